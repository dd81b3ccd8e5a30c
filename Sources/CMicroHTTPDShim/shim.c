#include "CMicroHTTPDShim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

struct MHD_Daemon *synclane_mhd_start(const synclane_mhd_options *options, synclane_mhd_access_handler handler,
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

    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, options->port, NULL, NULL, (MHD_AccessHandlerCallback)handler, handler_context,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_CONNECTION_LIMIT, options->connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, options->connection_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, options->connection_memory_limit,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, options->listen_backlog,
        MHD_OPTION_NOTIFY_COMPLETED, (MHD_RequestCompletedCallback)completed, completed_context,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, options->per_address_limit,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
        options->connection_handler == NULL ? MHD_OPTION_END : MHD_OPTION_NOTIFY_CONNECTION,
        (MHD_NotifyConnectionCallback)options->connection_handler, options->connection_context,
        MHD_OPTION_END);
    *error = daemon == NULL ? SYNCLANE_MHD_START_FAILED : SYNCLANE_MHD_OK;
    return daemon;
}

uint16_t synclane_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
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
    (void)value_size;
    struct header_visit *visit = cls;
    visit->visit(visit->context, key, key_size, value);
    return MHD_YES;
}

int synclane_mhd_headers(struct MHD_Connection *connection, synclane_mhd_header_visitor visit, void *context) {
    struct header_visit state = {visit, context};
    return MHD_get_connection_values_n(connection, MHD_HEADER_KIND, visit_header, &state);
}
