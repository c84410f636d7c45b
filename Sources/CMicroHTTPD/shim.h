#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// The path and query arguments are left percent-encoded by libmicrohttpd, so the router can split
// on '/' and ':' before decoding each part (tokens and message ids may contain encoded bytes).
static size_t fcm_mhd_no_unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls; (void)c;
    return strlen(s);
}

// MHD_start_daemon is variadic and does not import into Swift: a fixed-arity wrapper.
// The caller owns `listen_fd` (already bound and listening); libmicrohttpd closes it on stop.
// With both PEM strings (copied by libmicrohttpd at start) the daemon speaks HTTPS (GnuTLS).
// The options both variants share (a macro: MHD_start_daemon's option list is variadic).
#define FCM_MHD_COMMON_OPTIONS \
    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd, \
    MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls, \
    MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_s, \
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit, \
    MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size, \
    MHD_OPTION_CONNECTION_LIMIT, connection_limit, \
    MHD_OPTION_UNESCAPE_CALLBACK, fcm_mhd_no_unescape, NULL

static inline struct MHD_Daemon *fcm_mhd_start(unsigned int flags, int listen_fd,
        MHD_AccessHandlerCallback handler, void *handler_cls,
        MHD_RequestCompletedCallback completed, void *completed_cls,
        unsigned int connection_timeout_s, size_t connection_memory_limit, unsigned int thread_pool_size,
        unsigned int connection_limit, const char *tls_key_pem, const char *tls_cert_pem) {
    if (tls_key_pem && tls_cert_pem)
        return MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, handler, handler_cls, FCM_MHD_COMMON_OPTIONS,
            MHD_OPTION_HTTPS_MEM_KEY, tls_key_pem, MHD_OPTION_HTTPS_MEM_CERT, tls_cert_pem, MHD_OPTION_END);
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, FCM_MHD_COMMON_OPTIONS, MHD_OPTION_END);
}

// libmicrohttpd's enums are marked closed/flag enums, which Swift renames; fixed names are clearer.
static const enum MHD_Result FCM_MHD_YES = MHD_YES;
static const enum MHD_Result FCM_MHD_NO = MHD_NO;
static const enum MHD_ValueKind FCM_MHD_HEADER_KIND = MHD_HEADER_KIND;
static const enum MHD_ValueKind FCM_MHD_GET_ARGUMENT_KIND = MHD_GET_ARGUMENT_KIND;
static const unsigned int FCM_MHD_FLAGS_EVENT_LOOP =
    MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
static const enum MHD_ResponseMemoryMode FCM_MHD_RESPMEM_MUST_COPY = MHD_RESPMEM_MUST_COPY;

// Streaming responses (server-sent events): an unknown length, ended by the reader callback.
static inline struct MHD_Response *fcm_mhd_stream_response(MHD_ContentReaderCallback reader, void *cls,
        MHD_ContentReaderFreeCallback free_cb) {
    return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, cls, free_cb);
}
static const ssize_t FCM_MHD_END_OF_STREAM = MHD_CONTENT_READER_END_OF_STREAM;
