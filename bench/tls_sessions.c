// The resident memory GnuTLS keeps per idle server session past its handshake, as the mock's
// TLS sessions set it up: with the default priorities parsed for each session
// (gnutls_set_default_priority) and with one priority cache shared by all (gnutls_priority_init
// once, gnutls_priority_set per session: TLSPriorities in Sources/TLS/Session.swift).
//
//   tls_sessions N CERT KEY        prints KiB a session, both ways
//
// The clients are a forked process of their own over socket pairs, so only the server's sessions
// count in this process's VmRSS (read after malloc_trim, before and after the N handshakes).
#include <gnutls/gnutls.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

static int handshake(gnutls_session_t s) {
    int rc;
    do rc = gnutls_handshake(s); while (rc < 0 && !gnutls_error_is_fatal(rc));
    return rc;
}

// N sessions; `shared` the priority cache to set, or NULL for one parsed per session.
static double per_session(int n, gnutls_certificate_credentials_t server, gnutls_priority_t shared) {
    int (*fds)[2] = calloc((size_t)n, sizeof *fds);
    for (int i = 0; i < n; i++)
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) != 0) { perror("socketpair"); exit(2); }
    pid_t child = fork();
    if (child == 0) {
        gnutls_certificate_credentials_t anyone;
        gnutls_certificate_allocate_credentials(&anyone);
        for (int i = 0; i < n; i++) {
            gnutls_session_t c;
            gnutls_init(&c, GNUTLS_CLIENT);
            gnutls_set_default_priority(c);
            gnutls_credentials_set(c, GNUTLS_CRD_CERTIFICATE, anyone);
            gnutls_transport_set_int(c, fds[i][1]);
            if (handshake(c) < 0) _exit(1);
            gnutls_record_send(c, "x", 1);
        }
        pause();
        _exit(0);
    }
    gnutls_session_t *sessions = calloc((size_t)n, sizeof *sessions);
    malloc_trim(0);
    long before = rss_kib();
    for (int i = 0; i < n; i++) {
        gnutls_init(&sessions[i], GNUTLS_SERVER);
        if (shared) gnutls_priority_set(sessions[i], shared); else gnutls_set_default_priority(sessions[i]);
        gnutls_credentials_set(sessions[i], GNUTLS_CRD_CERTIFICATE, server);
        gnutls_transport_set_int(sessions[i], fds[i][0]);
        int rc = handshake(sessions[i]);
        if (rc < 0) { fprintf(stderr, "handshake %d: %s\n", i, gnutls_strerror(rc)); exit(2); }
        char b[8];
        gnutls_record_recv(sessions[i], b, sizeof b);
    }
    malloc_trim(0);
    long after = rss_kib();
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    for (int i = 0; i < n; i++) {
        gnutls_deinit(sessions[i]);
        close(fds[i][0]);
        close(fds[i][1]);
    }
    free(sessions);
    free(fds);
    return (double)(after - before) / n;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s N CERT KEY\n", argv[0]); return 2; }
    int n = atoi(argv[1]);
    gnutls_global_init();
    gnutls_certificate_credentials_t server;
    gnutls_certificate_allocate_credentials(&server);
    int rc = gnutls_certificate_set_x509_key_file(server, argv[2], argv[3], GNUTLS_X509_FMT_PEM);
    if (rc < 0) { fprintf(stderr, "%s: %s\n", argv[2], gnutls_strerror(rc)); return 2; }
    gnutls_priority_t shared;
    if ((rc = gnutls_priority_init(&shared, NULL, NULL)) < 0) { fprintf(stderr, "%s\n", gnutls_strerror(rc)); return 2; }
    double own = per_session(n, server, NULL);
    double one = per_session(n, server, shared);
    printf("| GnuTLS server sessions, idle past their handshake (%d each way) | KiB a session |\n|---|---:|\n", n);
    printf("| default priorities parsed for each session | %.1f |\n| one shared priority cache (the mock's) | %.1f |\n", own, one);
    return 0;
}
