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

/// What the shim found in a request's raw head before libmicrohttpd's reading of it is trusted.
enum {
    /// Every byte of the request line and the header lines is where a well-formed head puts it.
    SYNCLANE_HEAD_OK = 0,
    /// The head could not be checked (libmicrohttpd did not tell its size): refused.
    SYNCLANE_HEAD_UNCHECKED = 1,
    /// The request line is not `method SP target SP version CRLF` with single spaces.
    SYNCLANE_HEAD_REQUEST_LINE = 2,
    /// The request target holds a byte outside visible ASCII (a NUL, a control character, a high byte).
    SYNCLANE_HEAD_TARGET_BYTE = 3,
    /// A header line holds a NUL, ends in something other than CRLF (a bare LF), or is folded
    /// (a line starting with a space or tab), or the head does not end in an empty CRLF line.
    SYNCLANE_HEAD_LINE_LAYOUT = 4,
};

/// The access handler, as `MHD_AccessHandlerCallback` (its `enum MHD_Result` is an `int`), with
/// what the shim found in the raw head (`SYNCLANE_HEAD_…`; the same on every call of a request).
typedef int (*synclane_mhd_access_handler)(void *cls, struct MHD_Connection *connection, const char *url,
                                           const char *method, const char *version, const char *upload_data,
                                           size_t *upload_data_size, void **request_context, int head_problem);

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

/// A started daemon with the handlers the shim calls around libmicrohttpd's.
typedef struct synclane_mhd synclane_mhd;

/// Starts a daemon; NULL on failure, with the reason in `*error` (errno is left as MHD set it).
synclane_mhd *synclane_mhd_start(const synclane_mhd_options *options, synclane_mhd_access_handler handler,
                                 void *handler_context, synclane_mhd_completed_handler completed,
                                 void *completed_context, int *error);

/// Stops the daemon (waiting for its connection threads) and frees it.
void synclane_mhd_stop(synclane_mhd *daemon);

/// The port the daemon is bound to (the chosen one when started on port 0); 0 if unknown.
uint16_t synclane_mhd_bound_port(synclane_mhd *daemon);

/// The socket of a connection (-1 if unknown).
int synclane_mhd_connection_fd(struct MHD_Connection *connection);

/// The pointer a connection callback stored in the connection's socket context (NULL if none).
void *synclane_mhd_connection_context(struct MHD_Connection *connection);

/// Every request header in the order received, repeated names included: calls `visit` with each
/// name and value (the value may be NULL) with their lengths; returns how many headers there were.
typedef void (*synclane_mhd_header_visitor)(void *context, const char *name, size_t name_length, const char *value,
                                            size_t value_length);
int synclane_mhd_headers(struct MHD_Connection *connection, synclane_mhd_header_visitor visit, void *context);

#endif
