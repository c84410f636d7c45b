/* h2send: HTTP/2 (h2c, prior knowledge) POSTs over one connection with up to STREAMS in flight,
 * each request's path and body taken in turn from a file: what h2load cannot do (it sends one body
 * to every URI), so an HTTP v1 send can name a different device each time, as an APNs send does
 * by its path. bench/bench_apns.py drives both sides of its equal-spread comparison with it.
 *
 *   h2send HOST PORT REQUESTS STREAMS FILE [-H 'name: value']...
 *
 * FILE: one request a line, `path<TAB>body` (the body one line of JSON). Every request carries
 * the -H headers and `content-type: application/json`. Prints
 * `requests=N ok=N non2xx=N seconds=S` (ok: a 2xx status). Exits 1 on a connection error.
 * Built by bench/run.sh (gcc -O2 ... -lnghttp2). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct { char *path; char *body; size_t len; } line_t;
typedef struct { const line_t *line; size_t sent; int status; } stream_t;

static int fd;
static long completed, ok, non2xx;

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *u) {
    (void)s; (void)flags; (void)u;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0) { if (errno == EINTR) continue; return NGHTTP2_ERR_CALLBACK_FAILURE; }
        off += (size_t)n;
    }
    return (ssize_t)len;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *u) {
    (void)s; (void)id; (void)u;
    stream_t *st = src->ptr;
    size_t n = st->line->len - st->sent;
    if (n > len) n = len;
    memcpy(buf, st->line->body + st->sent, n);
    st->sent += n;
    if (st->sent == st->line->len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *u) {
    (void)flags; (void)u;
    if (f->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7) != 0) return 0;
    stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st) st->status = (int)strtol((const char *)value, NULL, 10) * (valuelen == 3);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *u) {
    (void)code; (void)u;
    stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    completed++;
    if (st && st->status >= 200 && st->status < 300) ok++; else non2xx++;
    free(st);
    return 0;
}

static line_t *read_lines(const char *file, size_t *count) {
    FILE *f = fopen(file, "r");
    if (!f) { perror(file); exit(1); }
    size_t cap = 1024, n = 0;
    line_t *lines = malloc(cap * sizeof *lines);
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t got;
    while ((got = getline(&buf, &bufcap, f)) > 0) {
        if (buf[got - 1] == '\n') buf[--got] = 0;
        char *tab = strchr(buf, '\t');
        if (!tab) continue;
        *tab = 0;
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n].path = strdup(buf);
        lines[n].body = strdup(tab + 1);
        lines[n].len = strlen(tab + 1);
        n++;
    }
    free(buf);
    fclose(f);
    if (n == 0) { fprintf(stderr, "%s: no `path<TAB>body` lines\n", file); exit(1); }
    *count = n;
    return lines;
}

static nghttp2_nv nv(const char *name, const char *value) {
    nghttp2_nv v = {(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value), NGHTTP2_NV_FLAG_NONE};
    return v;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: h2send HOST PORT REQUESTS STREAMS FILE [-H 'name: value']...\n");
        return 2;
    }
    const char *host = argv[1], *port = argv[2];
    long total = atol(argv[3]), streams = atol(argv[4]);
    size_t nlines;
    line_t *lines = read_lines(argv[5], &nlines);
    /* Fixed headers: the pseudo-headers (path set per request), content-type, then -H ones. */
    enum { MAXH = 32 };
    nghttp2_nv fixed[MAXH];
    int nfixed = 0;
    char authority[300];
    snprintf(authority, sizeof authority, "%s:%s", host, port);
    fixed[nfixed++] = nv(":method", "POST");
    fixed[nfixed++] = nv(":scheme", "http");
    fixed[nfixed++] = nv(":authority", authority);
    fixed[nfixed++] = nv(":path", "/");
    fixed[nfixed++] = nv("content-type", "application/json");
    for (int i = 6; i + 1 < argc && nfixed < MAXH; i += 2) {
        if (strcmp(argv[i], "-H") != 0) continue;
        char *h = strdup(argv[i + 1]), *colon = strchr(h, ':');
        if (!colon) continue;
        *colon = 0;
        char *v = colon + 1;
        while (*v == ' ') v++;
        for (char *c = h; *c; c++) if (*c >= 'A' && *c <= 'Z') *c += 32;
        fixed[nfixed++] = nv(h, v);
    }

    /* A server that closes the connection makes a write fail, not kill the tool. */
    signal(SIGPIPE, SIG_IGN);
    struct addrinfo hints = {0}, *ai;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai) != 0) { fprintf(stderr, "cannot resolve %s\n", host); return 1; }
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) { perror("connect"); return 1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, NULL);
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
                                         {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, settings, 2);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long submitted = 0;
    uint8_t buf[65536];
    while (completed < total) {
        while (submitted < total && submitted - completed < streams) {
            const line_t *l = &lines[submitted % (long)nlines];
            stream_t *st = calloc(1, sizeof *st);
            st->line = l;
            fixed[3] = nv(":path", l->path);
            nghttp2_data_provider dp = {.source.ptr = st, .read_callback = read_body};
            if (nghttp2_submit_request(s, NULL, fixed, (size_t)nfixed, &dp, st) < 0) { fprintf(stderr, "submit failed\n"); return 1; }
            submitted++;
        }
        if (nghttp2_session_send(s) != 0) { fprintf(stderr, "send failed\n"); return 1; }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { fprintf(stderr, "the connection ended after %ld answers\n", completed); return 1; }
        if (nghttp2_session_mem_recv(s, buf, (size_t)n) < 0) { fprintf(stderr, "bad frames from the server\n"); return 1; }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("requests=%ld ok=%ld non2xx=%ld seconds=%.3f\n", completed, ok, non2xx,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    nghttp2_session_del(s);
    close(fd);
    return 0;
}
