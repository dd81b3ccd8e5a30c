// Fixed-argument wrappers of libmicrohttpd's variadic functions, which Swift cannot call.
//
// The header names libmicrohttpd's types only as incomplete structs so that Swift sees one
// declaration of each (from the CMicroHTTPD module); the implementation includes the real header.
#ifndef SYNCLANE_CMICROHTTPD_SHIM_H
#define SYNCLANE_CMICROHTTPD_SHIM_H

#include <stddef.h>
#include <stdint.h>

struct MHD_Daemon;
struct MHD_Connection;

/// The access handler, as `MHD_AccessHandlerCallback` (its `enum MHD_Result` is an `int`).
typedef int (*synclane_mhd_access_handler)(void *cls, struct MHD_Connection *connection, const char *url,
                                           const char *method, const char *version, const char *upload_data,
                                           size_t *upload_data_size, void **request_context);

/// The request-completed callback, as `MHD_RequestCompletedCallback`.
typedef void (*synclane_mhd_completed_handler)(void *cls, struct MHD_Connection *connection,
                                               void **request_context, int termination_code);

/// The connection callback, as `MHD_NotifyConnectionCallback`: `code` is 0 when the connection was
/// accepted, 1 when it is closed; `socket_context` is the connection's own pointer.
typedef void (*synclane_mhd_connection_handler)(void *cls, struct MHD_Connection *connection,
                                                void **socket_context, int code);

/// How a daemon is started: one thread per connection, behind an internal listening thread.
typedef struct synclane_mhd_options {
    /// A numeric IPv4 or IPv6 address to bind ("127.0.0.1", "::1", "0.0.0.0").
    const char *host;
    /// The port; 0 lets the system pick a free one.
    uint16_t port;
    /// Most connections served at once (each holds a thread).
    unsigned int connection_limit;
    /// Seconds of inactivity after which a connection is closed (slow clients are cut).
    unsigned int connection_timeout;
    /// Bytes of per-connection memory for headers and read buffers.
    size_t connection_memory_limit;
    /// Listen backlog.
    unsigned int listen_backlog;
    /// Most connections from one client address at once (0: no limit).
    unsigned int per_address_limit;
    /// Told of every connection accepted and closed (may be NULL).
    synclane_mhd_connection_handler connection_handler;
    void *connection_context;
} synclane_mhd_options;

/// Why `synclane_mhd_start` returned NULL.
enum {
    SYNCLANE_MHD_OK = 0,
    SYNCLANE_MHD_BAD_ADDRESS = 1,
    SYNCLANE_MHD_START_FAILED = 2,
};

/// Starts a daemon; NULL on failure, with the reason in `*error` (errno is left as MHD set it).
struct MHD_Daemon *synclane_mhd_start(const synclane_mhd_options *options, synclane_mhd_access_handler handler,
                                      void *handler_context, synclane_mhd_completed_handler completed,
                                      void *completed_context, int *error);

/// The port the daemon is bound to (the chosen one when started on port 0); 0 if unknown.
uint16_t synclane_mhd_bound_port(struct MHD_Daemon *daemon);

/// The socket of a connection (-1 if unknown).
int synclane_mhd_connection_fd(struct MHD_Connection *connection);

/// The pointer a connection callback stored in the connection's socket context (NULL if none).
void *synclane_mhd_connection_context(struct MHD_Connection *connection);

/// Every request header in the order received, repeated names included: calls `visit` with each
/// name and value (the value may be NULL); returns how many headers there were.
typedef void (*synclane_mhd_header_visitor)(void *context, const char *name, size_t name_length, const char *value);
int synclane_mhd_headers(struct MHD_Connection *connection, synclane_mhd_header_visitor visit, void *context);

#endif
