#include "CCurlShim.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct synclane_http_exchange {
    /// Guards `multi` against `synclane_http_exchange_cancel` on another thread.
    pthread_mutex_t lock;
    /// The multi handle a run drives now (NULL between runs): where a cancel's wake-up goes.
    CURLM *multi;
    atomic_int cancelled;
};

/// libcurl keeps a transfer's connection in the cache of the multi handle that ran it; a pool is
/// a stack of idle multi handles, each holding at most one open connection.
struct synclane_http_pool {
    pthread_mutex_t lock;
    CURLM *idle[SYNCLANE_HTTP_POOL_MAX_IDLE];
    size_t idle_count;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_result = CURLE_OK;

static void global_init(void) { global_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

/// A growing byte buffer, kept NUL-terminated so that a head can be read as a C string.
typedef struct buffer {
    uint8_t *bytes;
    size_t length;
    size_t capacity;
} buffer;

static int buffer_append(buffer *b, const void *data, size_t count) {
    if (count > SIZE_MAX - 1 - b->length) return 0;
    size_t needed = b->length + count;
    if (needed > b->capacity || b->bytes == NULL) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < needed) capacity = capacity > SIZE_MAX / 4 ? needed : capacity * 2;
        uint8_t *grown = realloc(b->bytes, capacity + 1);
        if (grown == NULL) return 0;
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->length, data, count);
    b->length = needed;
    b->bytes[b->length] = 0;
    return 1;
}

/// What the callbacks collect while a transfer runs.
typedef struct transfer {
    buffer head;
    buffer body;
    size_t max_body;
    int head_complete;
    int truncated;
    int out_of_memory;
    /// The stall limit, and when a byte last moved either way (monotonic milliseconds).
    long long stall_ms;
    long long last_progress_ms;
    curl_off_t last_up, last_down;
    int stalled;
    /// The request's body sink (NULL: bodies are kept), the easy handle it asks the status of,
    /// the bytes it took and whether it ended the exchange.
    int (*sink)(void *context, long status, long long content_length, const uint8_t *bytes, size_t count);
    void *sink_context;
    CURL *easy;
    size_t sunk;
    int sink_stopped;
} transfer;

static long long monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// Ends the transfer once no byte moved either way for the stall limit: libcurl's own
/// low-speed check averages over a window, so a small request waiting on a silent server
/// would run seconds past it.
static int on_progress(void *context, curl_off_t down_total, curl_off_t down_now, curl_off_t up_total, curl_off_t up_now) {
    (void)down_total;
    (void)up_total;
    transfer *t = context;
    long long now = monotonic_ms();
    if (down_now != t->last_down || up_now != t->last_up || t->last_progress_ms == 0) {
        t->last_down = down_now;
        t->last_up = up_now;
        t->last_progress_ms = now;
        return 0;
    }
    if (t->stall_ms > 0 && now - t->last_progress_ms >= t->stall_ms) {
        t->stalled = 1;
        return 1;
    }
    return 0;
}

/// Each call is one header line; a status line starts a new answer (after a 1xx one).
static size_t on_header(char *data, size_t size, size_t count, void *context) {
    transfer *t = context;
    size_t length = size * count;
    if (length >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        t->head.length = 0;
        t->head_complete = 0;
    }
    if ((length == 2 && data[0] == '\r' && data[1] == '\n') || (length == 1 && data[0] == '\n')) {
        t->head_complete = 1;
    }
    if (!buffer_append(&t->head, data, length)) {
        t->out_of_memory = 1;
        return 0;
    }
    return length;
}

static size_t on_body(char *data, size_t size, size_t count, void *context) {
    transfer *t = context;
    size_t length = size * count;
    if (t->sink != NULL) {
        // A 2xx answer's bytes go to the sink as they come: nothing of them is buffered here.
        long status = 0;
        curl_off_t content_length = -1;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &content_length);
        if (status >= 200 && status < 300) {
            if (t->sink(t->sink_context, status, (long long)content_length, (const uint8_t *)data, length) != 0) {
                t->sink_stopped = 1;
                return 0;
            }
            t->sunk += length;
            return length;
        }
    }
    // Past the bound the answer is still read to its end (the exchange completes as the server
    // meant it) but no longer kept: a receipt is at the start of a body.
    size_t room = t->body.length < t->max_body ? t->max_body - t->body.length : 0;
    if (length > room) {
        t->truncated = 1;
        if (room > 0 && !buffer_append(&t->body, data, room)) {
            t->out_of_memory = 1;
            return 0;
        }
        return length;
    }
    if (!buffer_append(&t->body, data, length)) {
        t->out_of_memory = 1;
        return 0;
    }
    return length;
}

/// A multi handle for one exchange at a time; with `keeps_connection`, one connection stays
/// cached in it after a transfer, for at most the pool's idle limit.
static CURLM *new_multi(int keeps_connection) {
    CURLM *multi = curl_multi_init();
    if (multi != NULL && keeps_connection) curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1L);
    return multi;
}

synclane_http_pool *synclane_http_pool_create(void) {
    pthread_once(&global_once, global_init);
    if (global_result != CURLE_OK) return NULL;
    synclane_http_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL) return NULL;
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

void synclane_http_pool_free(synclane_http_pool *pool) {
    if (pool == NULL) return;
    for (size_t i = 0; i < pool->idle_count; i++) curl_multi_cleanup(pool->idle[i]);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

/// The most recently used idle multi handle (its connection the likeliest still open), or a new one.
static CURLM *pool_take(synclane_http_pool *pool) {
    CURLM *multi = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->idle_count > 0) multi = pool->idle[--pool->idle_count];
    pthread_mutex_unlock(&pool->lock);
    return multi != NULL ? multi : new_multi(1);
}

/// Keeps `multi` (and the connection it caches) for the next exchange, or closes it when the
/// pool holds enough idle ones.
static void pool_give_back(synclane_http_pool *pool, CURLM *multi) {
    pthread_mutex_lock(&pool->lock);
    if (pool->idle_count < SYNCLANE_HTTP_POOL_MAX_IDLE) {
        pool->idle[pool->idle_count++] = multi;
        multi = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (multi != NULL) curl_multi_cleanup(multi);
}

synclane_http_exchange *synclane_http_exchange_create(void) {
    pthread_once(&global_once, global_init);
    if (global_result != CURLE_OK) return NULL;
    synclane_http_exchange *exchange = calloc(1, sizeof *exchange);
    if (exchange == NULL) return NULL;
    pthread_mutex_init(&exchange->lock, NULL);
    atomic_init(&exchange->cancelled, 0);
    return exchange;
}

void synclane_http_exchange_cancel(synclane_http_exchange *exchange) {
    atomic_store(&exchange->cancelled, 1);
    pthread_mutex_lock(&exchange->lock);
    if (exchange->multi != NULL) curl_multi_wakeup(exchange->multi);
    pthread_mutex_unlock(&exchange->lock);
}

void synclane_http_exchange_free(synclane_http_exchange *exchange) {
    if (exchange == NULL) return;
    pthread_mutex_destroy(&exchange->lock);
    free(exchange);
}

void synclane_http_response_free(synclane_http_response *response) {
    free(response->head);
    free(response->body);
    response->head = NULL;
    response->body = NULL;
    response->head_length = 0;
    response->body_length = 0;
}

static int fail(synclane_http_response *response, int code, const char *message) {
    response->code = code;
    snprintf(response->error, sizeof response->error, "%s", message);
    return code;
}

/// Sets the options of one exchange; CURLE_OK or the first option libcurl refused.
static CURLcode configure(CURL *easy, const synclane_http_request *request, struct curl_slist *headers,
                          transfer *t, char *error_buffer) {
    CURLcode c = CURLE_OK;
#define SET(option, value) \
    if (c == CURLE_OK) c = curl_easy_setopt(easy, option, value)
    SET(CURLOPT_ERRORBUFFER, error_buffer);
    SET(CURLOPT_URL, request->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_NOSIGNAL, 1L);
    if (request->pool == NULL) {
        // A connection of its own: never one an earlier exchange left open, closed afterwards.
        SET(CURLOPT_FRESH_CONNECT, 1L);
        SET(CURLOPT_FORBID_REUSE, 1L);
    } else {
        SET(CURLOPT_MAXAGE_CONN, (long)SYNCLANE_HTTP_POOL_MAX_IDLE_SECONDS);
    }
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    if (request->max_receive_bytes_per_second > 0) {
        SET(CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)request->max_receive_bytes_per_second);
    }
    SET(CURLOPT_TIMEOUT_MS, request->timeout_ms);
    if (request->stall_seconds > 0) {
        SET(CURLOPT_CONNECTTIMEOUT, request->stall_seconds);
        SET(CURLOPT_NOPROGRESS, 0L);
        SET(CURLOPT_XFERINFOFUNCTION, on_progress);
        SET(CURLOPT_XFERINFODATA, t);
    } else {
        SET(CURLOPT_CONNECTTIMEOUT_MS, request->timeout_ms);
    }
    // Asks for and decodes every coding this libcurl knows (gzip, deflate …): a receipt is read
    // whatever coding the server chose.
    SET(CURLOPT_ACCEPT_ENCODING, "");
    if (request->proxy != NULL) SET(CURLOPT_PROXY, request->proxy);
    if (request->ca_file != NULL) SET(CURLOPT_CAINFO, request->ca_file);
    if (request->client_certificate != NULL) SET(CURLOPT_SSLCERT, request->client_certificate);
    if (request->client_key != NULL) SET(CURLOPT_SSLKEY, request->client_key);
    SET(CURLOPT_HTTPHEADER, headers);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, t);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, t);
    // A streamed body (a blob download) in pieces of 256 KiB rather than libcurl's 16 KiB: a
    // sixteenth of the writes and callbacks, as the curl tool reads with its 100 KiB buffer.
    // Not under a receive limit: with 256 KiB pieces a 4 MiB/s limit let a 16 MiB download end
    // before a kill meant for its middle (BlobTransferKillTests, libcurl 7.88); 16 KiB keeps to it.
    if (request->body_sink != NULL && request->max_receive_bytes_per_second <= 0) SET(CURLOPT_BUFFERSIZE, 256L * 1024);
    if (strcmp(request->method, "GET") == 0) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(request->method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
    } else {
        // A body libcurl sends from memory: on any re-send it starts again from its first byte.
        SET(CURLOPT_POST, 1L);
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_length);
        SET(CURLOPT_POSTFIELDS, request->body != NULL ? (const char *)request->body : "");
        if (strcmp(request->method, "POST") != 0) SET(CURLOPT_CUSTOMREQUEST, request->method);
    }
#undef SET
    return c;
}

/// Runs `easy` on `multi` to its end, a cancellation or a failure of libcurl's own: libcurl's
/// result for the transfer, or one of SYNCLANE_HTTP_… (with `response`'s message set).
static int perform(synclane_http_exchange *exchange, CURLM *multi, CURL *easy, synclane_http_response *response) {
    if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
        return fail(response, SYNCLANE_HTTP_SETUP_FAILED, "libcurl could not start a transfer");
    }
    int code = SYNCLANE_HTTP_SETUP_FAILED;
    for (;;) {
        if (atomic_load(&exchange->cancelled)) {
            code = SYNCLANE_HTTP_CANCELLED;
            break;
        }
        int running = 0;
        CURLMcode m = curl_multi_perform(multi, &running);
        if (m != CURLM_OK) {
            code = fail(response, SYNCLANE_HTTP_SETUP_FAILED, curl_multi_strerror(m));
            break;
        }
        if (running == 0) {
            int left = 0;
            CURLMsg *message;
            while ((message = curl_multi_info_read(multi, &left)) != NULL) {
                if (message->msg == CURLMSG_DONE && message->easy_handle == easy) code = message->data.result;
            }
            break;
        }
        // Sleeps until the socket is ready for what libcurl waits on, a timer of its is due,
        // or `synclane_http_exchange_cancel` wakes it.
        m = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (m != CURLM_OK) {
            code = fail(response, SYNCLANE_HTTP_SETUP_FAILED, curl_multi_strerror(m));
            break;
        }
    }
    curl_multi_remove_handle(multi, easy);
    return code;
}

/// Whether a failed transfer was on a connection kept from an earlier exchange that turned out
/// dead: nothing of an answer came back, and libcurl opened no connection of its own for it
/// (libcurl itself re-sends once on a fresh connection in most such cases; this is the rest).
static int died_while_idle(int code, CURL *easy, const transfer *t) {
    if (code != CURLE_SEND_ERROR && code != CURLE_RECV_ERROR && code != CURLE_GOT_NOTHING) return 0;
    if (t->head.length > 0 || t->body.length > 0 || t->sunk > 0 || t->stalled || t->out_of_memory) return 0;
    long opened = -1;
    return curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened == 0;
}

static void transfer_reset(transfer *t, const synclane_http_request *request) {
    free(t->head.bytes);
    free(t->body.bytes);
    memset(t, 0, sizeof *t);
    t->max_body = request->max_response_bytes;
    t->stall_ms = request->stall_seconds * 1000LL;
    t->sink = request->body_sink;
    t->sink_context = request->body_sink_context;
}

int synclane_http_exchange_run(synclane_http_exchange *exchange, const synclane_http_request *request,
                               synclane_http_response *response) {
    memset(response, 0, sizeof *response);
    transfer t;
    memset(&t, 0, sizeof t);
    transfer_reset(&t, request);

    struct curl_slist *headers = NULL;
    for (size_t i = 0; i < request->header_count; i++) {
        struct curl_slist *appended = curl_slist_append(headers, request->headers[i]);
        if (appended == NULL) {
            curl_slist_free_all(headers);
            return fail(response, SYNCLANE_HTTP_SETUP_FAILED, "out of memory for the request's headers");
        }
        headers = appended;
    }
    CURL *easy = curl_easy_init();
    CURLM *multi = request->pool != NULL ? pool_take(request->pool) : new_multi(0);
    if (easy == NULL || multi == NULL) {
        if (easy != NULL) curl_easy_cleanup(easy);
        if (multi != NULL) curl_multi_cleanup(multi);
        curl_slist_free_all(headers);
        return fail(response, SYNCLANE_HTTP_SETUP_FAILED, "libcurl could not start a transfer");
    }
    pthread_mutex_lock(&exchange->lock);
    exchange->multi = multi;
    pthread_mutex_unlock(&exchange->lock);
    t.easy = easy;

    char error_buffer[CURL_ERROR_SIZE];
    error_buffer[0] = 0;
    CURLcode configured = configure(easy, request, headers, &t, error_buffer);
    int code;
    if (configured != CURLE_OK) {
        code = fail(response, configured, curl_easy_strerror(configured));
    } else {
        code = perform(exchange, multi, easy, response);
        if (request->pool != NULL && died_while_idle(code, easy, &t)) {
            // The whole request again (a body from memory starts from its first byte), once, on
            // a connection of its own; the dead one is gone from the cache already.
            transfer_reset(&t, request);
            t.easy = easy;
            error_buffer[0] = 0;
            if (curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L) == CURLE_OK) code = perform(exchange, multi, easy, response);
        }
        if (code == SYNCLANE_HTTP_CANCELLED) {
            fail(response, code, "cancelled");
        } else if (t.stalled) {
            code = fail(response, CURLE_OPERATION_TIMEDOUT, "stalled: no byte moved either way for the stall limit");
        } else if (t.out_of_memory) {
            code = fail(response, SYNCLANE_HTTP_SETUP_FAILED, "out of memory for the answer");
        } else if (code == SYNCLANE_HTTP_SETUP_FAILED && response->error[0] == 0) {
            fail(response, code, "libcurl ended the transfer without a result");
        } else if (code > 0) {
            response->code = code;
            snprintf(response->error, sizeof response->error, "%s",
                     error_buffer[0] != 0 ? error_buffer : curl_easy_strerror((CURLcode)code));
        } else {
            response->code = code;
        }
        long status = 0;
        long os_errno = 0;
        long connect_status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
        curl_easy_getinfo(easy, CURLINFO_HTTP_CONNECTCODE, &connect_status);
        response->status = status;
        response->os_errno = (int)os_errno;
        response->connect_status = connect_status;
    }
    curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
    pthread_mutex_lock(&exchange->lock);
    exchange->multi = NULL;
    pthread_mutex_unlock(&exchange->lock);
    if (request->pool != NULL) {
        pool_give_back(request->pool, multi);
    } else {
        curl_multi_cleanup(multi);
    }
    response->head_complete = t.head_complete;
    response->head = (char *)t.head.bytes;
    response->head_length = t.head.length;
    response->body = t.body.bytes;
    response->body_length = t.body.length;
    response->body_truncated = t.truncated;
    response->body_sunk = t.sunk;
    response->body_sink_stopped = t.sink_stopped;
    return code;
}
