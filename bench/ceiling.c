/*
 * The benchmark's ceiling: the least an HTTP request can cost on this machine with the mock's
 * server library and threading mode (libmicrohttpd, internal epoll loops, a pool of 4 threads).
 * Every request, whatever its method or path, has its body read and discarded and gets a fixed
 * 200 with a small JSON body shaped like a one-token /fcm/send answer.
 *
 *   ceiling PORT                          listen on 127.0.0.1:PORT (0 = pick a free port)
 *   ceiling serve --http-port PORT ...    the same, taking fcm-mock's flags (others ignored),
 *                                         so it can stand in for the mock in bench/run.sh
 *
 * Prints `listening http=127.0.0.1:PORT` on stdout once it accepts connections; SIGTERM or
 * SIGINT stops it with exit code 0. Bad arguments: exit 2.
 *
 * Build: gcc -O2 -o ceiling ceiling.c $(pkg-config --cflags --libs libmicrohttpd)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result handler_result;
#else
typedef int handler_result;
#endif

static const char BODY[] =
    "{\"multicast_id\":5512345678901234567,\"success\":1,\"failure\":0,\"canonical_ids\":0,"
    "\"results\":[{\"message_id\":\"0:1700000000000123%31bd1c9631bd1c96\"}]}";

static struct MHD_Response *shared_response;
static int request_marker; /* its address marks "headers seen" in *con_cls */

static handler_result handle(void *cls, struct MHD_Connection *connection, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    if (*con_cls == NULL) { /* first call: headers only */
        *con_cls = &request_marker;
        return MHD_YES;
    }
    if (*upload_data_size != 0) { /* a chunk of the body: discard it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(connection, MHD_HTTP_OK, shared_response);
}

static int parse_port(const char *s) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535) return -1;
    return (int)v;
}

static void usage(void) {
    fprintf(stderr, "usage: ceiling PORT | ceiling serve --http-port PORT [ignored flags...]\n");
}

int main(int argc, char **argv) {
    int port = -1;
    if (argc == 2) {
        port = parse_port(argv[1]);
    } else if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        port = 8080;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--http-port") == 0 && i + 1 < argc) {
                port = parse_port(argv[++i]);
            } else if (strncmp(argv[i], "--http-port=", 12) == 0) {
                port = parse_port(argv[i] + 12);
            }
        }
    }
    if (port < 0) {
        usage();
        return 2;
    }

    /* Block the stop signals in every thread (libmicrohttpd's inherit this mask); main waits. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    shared_response = MHD_create_response_from_buffer(sizeof(BODY) - 1, (void *)BODY,
                                                      MHD_RESPMEM_PERSISTENT);
    if (shared_response == NULL ||
        MHD_add_response_header(shared_response, "Content-Type",
                                "application/json; charset=UTF-8") != MHD_YES) {
        fprintf(stderr, "ceiling: cannot create the response\n");
        return 1;
    }

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    /* The same threading mode as the mock's HTTP server: internal epoll loops, a pool of 4. */
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME,
        (uint16_t)port, NULL, NULL, &handle, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)4,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int)1,
        MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "ceiling: cannot listen on 127.0.0.1:%d\n", port);
        return 2;
    }

    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_in bound;
    socklen_t len = sizeof bound;
    if (info == NULL || getsockname(info->listen_fd, (struct sockaddr *)&bound, &len) != 0) {
        fprintf(stderr, "ceiling: cannot read the bound port\n");
        MHD_stop_daemon(daemon);
        return 1;
    }
    printf("listening http=127.0.0.1:%u\n", (unsigned)ntohs(bound.sin_port));
    fflush(stdout);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    MHD_stop_daemon(daemon);
    MHD_destroy_response(shared_response);
    return 0;
}
