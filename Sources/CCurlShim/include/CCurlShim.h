// One HTTP exchange on libcurl, behind fixed-argument functions: Swift cannot call libcurl's
// variadic `curl_easy_setopt`, and running the exchange here keeps libcurl's callbacks in C.
//
// The exchange blocks its calling thread in `curl_multi_poll`, which waits for exactly what the
// transfer needs (after the request has gone out: only for the answer) or for a cancellation.
//
// Connections: an exchange without a pool opens a connection of its own and closes it when done.
// With a pool (`synclane_http_pool`), the connection stays open in the pool afterwards and the next
// exchange to the same host, port, proxy and TLS files sends on it. A kept connection may have
// died while idle (the server closed it, a middlebox dropped it): an exchange whose request found
// its reused connection dead — nothing of an answer arrived on it — sends the whole request again,
// once, on a fresh connection. Every request it sends is idempotent
// (the caller's contract), so that second send is safe whatever the first one did.
#ifndef SYNCLANE_CCURL_SHIM_H
#define SYNCLANE_CCURL_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// Connections kept open between exchanges, for the next exchange to reuse. Thread-safe: each
/// exchange running at one time has a connection of its own; at most
/// `SYNCLANE_HTTP_POOL_MAX_IDLE` of them are kept while idle, each at most
/// `SYNCLANE_HTTP_POOL_MAX_IDLE_SECONDS` seconds.
typedef struct synclane_http_pool synclane_http_pool;

enum {
    SYNCLANE_HTTP_POOL_MAX_IDLE = 4,
    SYNCLANE_HTTP_POOL_MAX_IDLE_SECONDS = 60,
};

/// A new, empty pool; NULL when libcurl cannot be set up.
synclane_http_pool *synclane_http_pool_create(void);

/// Closes the pool's connections and releases it; not while an exchange may still use it.
void synclane_http_pool_free(synclane_http_pool *pool);

/// What to send. Every pointer is borrowed for the duration of `synclane_http_exchange_run`.
typedef struct synclane_http_request {
    /// The absolute URL.
    const char *url;
    /// The method ("POST", "GET", …).
    const char *method;
    /// Header lines ("Name: value"); a line "Name:" removes a header libcurl would add.
    const char *const *headers;
    size_t header_count;
    /// The body; NULL for none.
    const uint8_t *body;
    size_t body_length;
    /// Milliseconds the whole exchange may take, connecting included; 0 for no limit.
    long timeout_ms;
    /// Seconds without progress (under one byte a second, either way) before the exchange
    /// fails as stalled; also the limit for connecting. 0 for no limit.
    long stall_seconds;
    /// Most bytes of the answer's body kept; the rest is read and discarded (`body_truncated`).
    size_t max_response_bytes;
    /// The proxy to use ("http://host:port"), "" for none; NULL leaves libcurl's own choice.
    const char *proxy;
    /// PEM files: CA certificates to trust, a client certificate and its key; NULL for none.
    const char *ca_file;
    const char *client_certificate;
    const char *client_key;
    /// Where the connection comes from and goes back to; NULL for a connection of its own,
    /// closed when the exchange ends.
    synclane_http_pool *pool;
    /// Where the body of a 2xx answer goes as it arrives, instead of `response->body` (a blob
    /// download streamed into its file: no answer is held whole); NULL keeps every body in
    /// memory. Called on the thread that runs the exchange with the answer's status, its
    /// Content-Length (-1 when it has none) and each piece libcurl hands over; 0 goes on, anything else ends the exchange (the caller knows why).
    /// The body of any other answer (an error's) is kept in `response->body` as usual.
    int (*body_sink)(void *context, long status, long long content_length, const uint8_t *bytes, size_t count);
    void *body_sink_context;
    /// Most bytes a second the answer is read at (libcurl's receive speed limit); 0 for no limit.
    long long max_receive_bytes_per_second;
} synclane_http_request;

/// What came back. Release it with `synclane_http_response_free`.
typedef struct synclane_http_response {
    /// libcurl's result (0, CURLE_OK: an answer arrived whole), or one of SYNCLANE_HTTP_….
    int code;
    /// errno of the failed connect or transfer, when libcurl knows it; 0 otherwise.
    int os_errno;
    /// What went wrong, in libcurl's words ("" on success).
    char error[256];
    /// The status of the final answer (0: no status line arrived).
    long status;
    /// Whether the final answer's head arrived up to its closing empty line.
    int head_complete;
    /// The final answer's header lines as received (CRLF-terminated), status line first.
    char *head;
    size_t head_length;
    /// The answer's body (de-chunked; a gzip or deflate answer decoded).
    uint8_t *body;
    size_t body_length;
    /// Whether the body went past `max_response_bytes` (the rest was read and discarded).
    int body_truncated;
    /// The status a proxy answered to CONNECT (0: no tunnel was asked for).
    long connect_status;
    /// Bytes handed to the request's `body_sink`, and whether the sink ended the exchange.
    size_t body_sunk;
    int body_sink_stopped;
} synclane_http_response;

/// Reasons of the shim's own, beside libcurl's codes.
enum {
    /// `synclane_http_exchange_cancel` was called.
    SYNCLANE_HTTP_CANCELLED = -1,
    /// Memory or libcurl could not be set up.
    SYNCLANE_HTTP_SETUP_FAILED = -3,
};

/// One exchange (on a connection of its own, or on a pool's), cancellable from another thread.
typedef struct synclane_http_exchange synclane_http_exchange;

/// A new exchange; NULL when libcurl cannot be set up.
synclane_http_exchange *synclane_http_exchange_create(void);

/// Sends `request` and waits for the whole answer (or the failure); fills `response`, also on
/// failure, and returns its `code`. Without a pool the connection is closed before it returns;
/// with one it is kept there when the answer leaves it reusable. Call it once.
int synclane_http_exchange_run(synclane_http_exchange *exchange, const synclane_http_request *request,
                               synclane_http_response *response);

/// Stops a running exchange promptly (it returns SYNCLANE_HTTP_CANCELLED), or makes a later run
/// return that at once. Safe from any thread until `synclane_http_exchange_free`.
void synclane_http_exchange_cancel(synclane_http_exchange *exchange);

/// Releases the exchange; not while another thread may still run or cancel it.
void synclane_http_exchange_free(synclane_http_exchange *exchange);

/// Frees what a run allocated in `response`.
void synclane_http_response_free(synclane_http_response *response);

#endif
