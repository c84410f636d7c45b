// The floor under a Web Push's cost: the CPU time of one P-256 ECDH with nettle's
// `ecc_point_mul`, the call fcm-mock makes once per push (RFC 8291's key agreement between the
// sender's one-time key and the subscription's key). Prints `ecdh_us=N` (CPU microseconds per
// multiplication, over `count` of them, default 2000) for bench_webpush.py.
#include <gmp.h>
#include <nettle/ecc-curve.h>
#include <nettle/ecc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 2000;
    if (count <= 0) return 2;
    const struct ecc_curve *curve = nettle_get_secp_256r1();
    struct ecc_scalar s;
    struct ecc_point p, r;
    ecc_scalar_init(&s, curve);
    ecc_point_init(&p, curve);
    ecc_point_init(&r, curve);
    mpz_t z;
    mpz_init_set_str(z, "c9f4e2d1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817060", 16);
    if (!ecc_scalar_set(&s, z)) return 2;
    ecc_point_mul_g(&p, &s);  // a point on the curve to multiply, as a subscription's key is
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (int i = 0; i < count; i++) ecc_point_mul(&r, &s, &p);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / count;
    printf("ecdh_us=%.1f\n", us);
    mpz_clear(z);
    ecc_point_clear(&r);
    ecc_point_clear(&p);
    ecc_scalar_clear(&s);
    return 0;
}
