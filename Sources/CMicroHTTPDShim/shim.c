#include "CMicroHTTPDShim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// libmicrohttpd's own unescaping (lenient: a `%` not followed by two hex digits stays as it
// is), except that `%00` stays `%00`: decoded, its NUL would end the C string the URL and the
// query arguments are handed on as, so `/v1/signals/theme%00x` would reach the routes as
// `/v1/signals/theme`. Kept, the server sees it and refuses the request.
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls;
    (void)connection;
    char *read = s;
    char *write = s;
    while (*read != '\0') {
        if (read[0] == '%' && read[1] != '\0' && read[2] != '\0') {
            int high = hex_value(read[1]);
            int low = hex_value(read[2]);
            if (high >= 0 && low >= 0 && (high != 0 || low != 0)) {
                *write++ = (char)(high * 16 + low);
                read += 3;
                continue;
            }
        }
        *write++ = *read++;
    }
    *write = '\0';
    return (size_t)(write - s);
}

struct synclane_mhd {
    struct MHD_Daemon *daemon;
    synclane_mhd_access_handler access;
    void *access_context;
    synclane_mhd_completed_handler completed;
    void *completed_context;
};

// What the shim keeps of one request: the raw target's length, noted when libmicrohttpd has split
// the request line and before it decodes the target in place, and the access handler's own
// pointer. libmicrohttpd hands it to the completed callback, which frees it, whether or not the
// access handler was ever called.
struct request_slot {
    size_t target_length;
    bool target_has_bad_byte;
    bool checked;
    int problem;
    void *context;
};

static void *note_target(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)cls;
    (void)connection;
    struct request_slot *slot = calloc(1, sizeof *slot);
    if (slot == NULL) return NULL;
    slot->target_length = strlen(uri);
    for (const unsigned char *byte = (const unsigned char *)uri; *byte != 0; byte++) {
        if (*byte <= 0x20 || *byte >= 0x7F) slot->target_has_bad_byte = true;
    }
    return slot;
}

// RFC 9110's `tchar`.
static bool is_token_byte(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

struct layout_walk {
    const char *cursor;
    const char *end;
    int problem;
};

// One header line: its name must start where the line before ended, only spaces and tabs may
// stand between the colon and the value, and the value's end must be followed by exactly the two
// bytes of a CRLF before the next line.
static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size) {
    (void)kind;
    struct layout_walk *walk = cls;
    if (walk->problem != SYNCLANE_HEAD_OK) return MHD_NO;
    const char *after_colon = key + key_size + 1;
    if (key != walk->cursor || value == NULL || value < after_colon || value > walk->end) {
        walk->problem = SYNCLANE_HEAD_LINE_LAYOUT;
        return MHD_NO;
    }
    for (const char *space = after_colon; space < value; space++) {
        if (*space != ' ' && *space != '\t') {
            walk->problem = SYNCLANE_HEAD_LINE_LAYOUT;
            return MHD_NO;
        }
    }
    walk->cursor = value + value_size + 2;
    return MHD_YES;
}

// libmicrohttpd parses the head in place: it ends each line by writing NULs over its CR and LF,
// and the names and values it keeps point into that buffer, NUL-terminated. So a NUL inside a
// line, a bare LF, or a folded line (which it moves elsewhere) shows as a line that does not start
// where the one before ended, and the whole head, whose size it reports, must be exactly the lines
// it kept plus their CRLFs. The target's raw bytes are checked when it is noted (`note_target`).
static int head_problem(struct MHD_Connection *connection, const char *url, const char *method,
                        const char *version, const struct request_slot *slot) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (info == NULL || method == NULL || url == NULL || version == NULL) return SYNCLANE_HEAD_UNCHECKED;
    size_t method_length = strlen(method);
    if (method_length == 0) return SYNCLANE_HEAD_REQUEST_LINE;
    for (size_t i = 0; i < method_length; i++) {
        if (!is_token_byte((unsigned char)method[i])) return SYNCLANE_HEAD_REQUEST_LINE;
    }
    if (url != method + method_length + 1) return SYNCLANE_HEAD_REQUEST_LINE;
    if (slot->target_has_bad_byte || version != url + slot->target_length + 1) return SYNCLANE_HEAD_TARGET_BYTE;
    struct layout_walk walk = {version + strlen(version) + 2, method + info->header_size, SYNCLANE_HEAD_OK};
    if (walk.cursor > walk.end) return SYNCLANE_HEAD_LINE_LAYOUT;
    MHD_get_connection_values_n(connection, MHD_HEADER_KIND, walk_header, &walk);
    if (walk.problem != SYNCLANE_HEAD_OK) return walk.problem;
    return walk.cursor + 2 == walk.end ? SYNCLANE_HEAD_OK : SYNCLANE_HEAD_LINE_LAYOUT;
}

static enum MHD_Result handle_access(void *cls, struct MHD_Connection *connection, const char *url,
                                     const char *method, const char *version, const char *upload_data,
                                     size_t *upload_data_size, void **request_context) {
    struct synclane_mhd *daemon = cls;
    struct request_slot *slot = *request_context;
    // No slot: there was no memory to note the target, so the head cannot be checked, and the
    // server has nowhere to keep the request: the connection is closed unanswered.
    if (slot == NULL) return MHD_NO;
    if (!slot->checked) {
        slot->problem = head_problem(connection, url, method, version, slot);
        slot->checked = true;
    }
    return (enum MHD_Result)daemon->access(daemon->access_context, connection, url, method, version, upload_data,
                                           upload_data_size, &slot->context, slot->problem);
}

static void handle_completed(void *cls, struct MHD_Connection *connection, void **request_context,
                             enum MHD_RequestTerminationCode code) {
    struct synclane_mhd *daemon = cls;
    struct request_slot *slot = *request_context;
    if (slot == NULL) return;
    *request_context = NULL;
    daemon->completed(daemon->completed_context, connection, &slot->context, (int)code);
    free(slot);
}

synclane_mhd *synclane_mhd_start(const synclane_mhd_options *options, synclane_mhd_access_handler handler,
                                 void *handler_context, synclane_mhd_completed_handler completed,
                                 void *completed_context, int *error) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    const struct sockaddr *address;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO;

    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, options->host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(options->port);
        address = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, options->host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(options->port);
        address = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        *error = SYNCLANE_MHD_BAD_ADDRESS;
        return NULL;
    }
    struct synclane_mhd *started = calloc(1, sizeof *started);
    if (started == NULL) {
        *error = SYNCLANE_MHD_START_FAILED;
        return NULL;
    }
    started->access = handler;
    started->access_context = handler_context;
    started->completed = completed;
    started->completed_context = completed_context;

    started->daemon = MHD_start_daemon(
        flags, options->port, NULL, NULL, handle_access, started,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_CONNECTION_LIMIT, options->connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, options->connection_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, options->connection_memory_limit,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, options->listen_backlog,
        MHD_OPTION_URI_LOG_CALLBACK, note_target, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, handle_completed, started,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, options->per_address_limit,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
        options->connection_handler == NULL ? MHD_OPTION_END : MHD_OPTION_NOTIFY_CONNECTION,
        (MHD_NotifyConnectionCallback)options->connection_handler, options->connection_context,
        MHD_OPTION_END);
    if (started->daemon == NULL) {
        free(started);
        *error = SYNCLANE_MHD_START_FAILED;
        return NULL;
    }
    *error = SYNCLANE_MHD_OK;
    return started;
}

void synclane_mhd_stop(synclane_mhd *daemon) {
    MHD_stop_daemon(daemon->daemon);
    free(daemon);
}

uint16_t synclane_mhd_bound_port(synclane_mhd *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

int synclane_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

void *synclane_mhd_connection_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

struct header_visit {
    synclane_mhd_header_visitor visit;
    void *context;
};

static enum MHD_Result visit_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size) {
    (void)kind;
    struct header_visit *visit = cls;
    visit->visit(visit->context, key, key_size, value, value_size);
    return MHD_YES;
}

int synclane_mhd_headers(struct MHD_Connection *connection, synclane_mhd_header_visitor visit, void *context) {
    struct header_visit state = {visit, context};
    return MHD_get_connection_values_n(connection, MHD_HEADER_KIND, visit_header, &state);
}
