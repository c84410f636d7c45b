/*
 * XMPP load for the benchmark: N connections (threads), each logging in with SASL PLAIN (unless
 * --raw), then sending downstream messages with at most WINDOW unanswered, for SECONDS.
 * Every answer is a <message> stanza (an ack or nack), counted by its closing tag; with --raw
 * (against the echo server) the echoed stanzas are counted the same way.
 *
 *   xmpp_load PORT SENDER KEY TOKEN SECONDS CONNECTIONS WINDOW [--raw]
 *
 * Prints one line: `XMPP connections=N seconds=S sent=X answered=Y acks=A nacks=K`.
 * Loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int port, seconds, window_size, raw_mode;
static const char *sender, *key, *token;
static long long total_sent, total_answered, total_acks, total_nacks;
static pthread_mutex_t totals = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads until `needle` has been seen (for the handshake); -1 on close or time-out. */
static int read_until(int fd, const char *needle) {
    char buf[8192];
    size_t have = 0;
    double deadline = now_s() + 10;
    while (now_s() < deadline) {
        ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (r <= 0) return -1;
        have += (size_t)r;
        buf[have] = 0;
        if (strstr(buf, needle)) return 0;
        if (have > sizeof buf / 2) { memmove(buf, buf + have / 2, have - have / 2); have -= have / 2; }
    }
    return -1;
}

static void b64(const unsigned char *in, size_t n, char *out) {
    static const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i, o = 0;
    for (i = 0; i + 2 < n; i += 3) {
        out[o++] = a[in[i] >> 2]; out[o++] = a[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
        out[o++] = a[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)]; out[o++] = a[in[i + 2] & 63];
    }
    if (n - i == 1) { out[o++] = a[in[i] >> 2]; out[o++] = a[(in[i] & 3) << 4]; out[o++] = '='; out[o++] = '='; }
    else if (n - i == 2) { out[o++] = a[in[i] >> 2]; out[o++] = a[((in[i] & 3) << 4) | (in[i + 1] >> 4)]; out[o++] = a[(in[i + 1] & 15) << 2]; out[o++] = '='; }
    out[o] = 0;
}

static int login(int fd) {
    const char *hdr = "<stream:stream to=\"fcm.googleapis.com\" version=\"1.0\" xmlns=\"jabber:client\" "
                      "xmlns:stream=\"http://etherx.jabber.org/streams\">";
    if (send_all(fd, hdr, strlen(hdr)) || read_until(fd, "</stream:features>")) return -1;
    unsigned char plain[512];
    size_t n = 0;
    plain[n++] = 0;
    n += (size_t)snprintf((char *)plain + n, sizeof plain - n, "%s@fcm.googleapis.com", sender);
    plain[n++] = 0;
    n += (size_t)snprintf((char *)plain + n, sizeof plain - n, "%s", key);
    char enc[1024], auth[1200];
    b64(plain, n, enc);
    snprintf(auth, sizeof auth, "<auth mechanism=\"PLAIN\" xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\">%s</auth>", enc);
    if (send_all(fd, auth, strlen(auth)) || read_until(fd, "<success")) return -1;
    if (send_all(fd, hdr, strlen(hdr)) || read_until(fd, "</stream:features>")) return -1;
    const char *bind = "<iq type=\"set\" id=\"b\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><resource>bench</resource></bind></iq>";
    if (send_all(fd, bind, strlen(bind)) || read_until(fd, "</iq>")) return -1;
    return 0;
}

static void *run(void *arg) {
    long id = (long)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return NULL; }
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (!raw_mode && login(fd) != 0) { fprintf(stderr, "xmpp_load: login failed\n"); close(fd); return NULL; }
    long long sent = 0, answered = 0, acks = 0, nacks = 0;
    char out[65536], in[65536];
    size_t carry = 0;
    double end = now_s() + seconds;
    while (now_s() < end) {
        /* Fill the window. */
        size_t o = 0;
        while (sent - answered < window_size && o + 300 < sizeof out) {
            o += (size_t)snprintf(out + o, sizeof out - o,
                "<message id=\"\"><gcm xmlns=\"google:mobile:data\">{&quot;to&quot;:&quot;%s&quot;,&quot;message_id&quot;:&quot;b%ld-%lld&quot;}</gcm></message>",
                token, id, sent);
            sent++;
        }
        if (o && send_all(fd, out, o)) break;
        ssize_t r = recv(fd, in + carry, sizeof in - 1 - carry, 0);
        if (r <= 0) continue;
        size_t have = carry + (size_t)r;
        in[have] = 0;
        char *p = in, *last_end = in;
        while ((p = strstr(p, "</message>")) != NULL) {
            answered++;
            p += 10;
            last_end = p;
        }
        /* Count ack/nack words in the completed part (quotes raw, as the mock sends them). */
        for (char *q = in; q < last_end && (q = strstr(q, "\"message_type\":\"")) != NULL && q < last_end; q += 16) {
            if (strncmp(q + 16, "ack", 3) == 0) acks++; else if (strncmp(q + 16, "nack", 4) == 0) nacks++;
        }
        carry = have - (size_t)(last_end - in);
        memmove(in, last_end, carry);
    }
    close(fd);
    pthread_mutex_lock(&totals);
    total_sent += sent; total_answered += answered; total_acks += acks; total_nacks += nacks;
    pthread_mutex_unlock(&totals);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: xmpp_load PORT SENDER KEY TOKEN SECONDS CONNECTIONS WINDOW [--raw]\n"); return 2; }
    port = atoi(argv[1]); sender = argv[2]; key = argv[3]; token = argv[4];
    seconds = atoi(argv[5]);
    int conns = atoi(argv[6]);
    window_size = atoi(argv[7]);
    raw_mode = argc > 8 && strcmp(argv[8], "--raw") == 0;
    pthread_t t[64];
    if (conns > 64) conns = 64;
    double start = now_s();
    for (long i = 0; i < conns; i++) pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < conns; i++) pthread_join(t[i], NULL);
    printf("XMPP connections=%d seconds=%.3f sent=%lld answered=%lld acks=%lld nacks=%lld\n", conns, now_s() - start,
           total_sent, total_answered, total_acks, total_nacks);
    return 0;
}
