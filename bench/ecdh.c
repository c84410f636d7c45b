// The floor under a Web Push's cost: the CPU time of one P-256 ECDH, the key agreement fcm-mock
// makes once per push (RFC 8291: the subscription's private key with the sender's one-time public
// key), with nettle (what the mock links) and with OpenSSL's libcrypto (issue 38: would it make a
// push cheaper?).
//
//   ecdh [COUNT]       nettle's `ecc_point_mul` alone: prints `ecdh_us=N` (CPU microseconds per
//                      multiplication over COUNT of them, default 2000) for bench_webpush.py
//   ecdh COUNT all     every variant below, one `name_us=N` line each:
//     nettle_mul          ecc_point_mul on a point already decoded
//     nettle_decode_mul   the sender's key decoded from its 65 bytes (ecc_point_set, which checks
//                         it is on the curve) and then multiplied: what a push needs
//     openssl_mul         EC_POINT_mul on a point already decoded (OpenSSL's low-level call)
//     openssl_decode_mul  EC_POINT_oct2point (which checks the curve), then EC_POINT_mul
//     openssl_derive_checked  EVP_PKEY_derive with the peer's EVP_PKEY made once (a new context
//                         each time, as a push would: derive_init, set_peer with its default
//                         check of the peer, which multiplies by the group's order, derive)
//     openssl_derive      the same with only the on-curve check (enough on P-256, as nettle's)
//     openssl_decode_derive  the peer's EVP_PKEY made from its 65 bytes each time
//                         (EVP_PKEY_fromdata), then openssl_derive: what a push would need
//     openssl_set_encoded_derive  the same with the 65 bytes set on a key that has the group
//                         already (EVP_PKEY_copy_parameters, EVP_PKEY_set1_encoded_public_key)
//
// Build: gcc -O2 ecdh.c $(pkg-config --cflags --libs hogweed nettle libcrypto) -lgmp
#define OPENSSL_SUPPRESS_DEPRECATED
#include <gmp.h>
#include <nettle/ecc-curve.h>
#include <nettle/ecc.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void report(const char *name, double started, int count) {
    printf("%s_us=%.1f\n", name, (cpu_us() - started) / count);
}

static const char *scalar_hex = "c9f4e2d1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817060";

static int nettle_part(int count, int all) {
    const struct ecc_curve *curve = nettle_get_secp_256r1();
    struct ecc_scalar s;
    struct ecc_point p, r, q;
    ecc_scalar_init(&s, curve);
    ecc_point_init(&p, curve);
    ecc_point_init(&r, curve);
    ecc_point_init(&q, curve);
    mpz_t z, x, y;
    mpz_init_set_str(z, scalar_hex, 16);
    mpz_inits(x, y, NULL);
    if (!ecc_scalar_set(&s, z)) return 2;
    ecc_point_mul_g(&p, &s);  // a point on the curve to multiply, as a subscription's key is
    double a = cpu_us();
    for (int i = 0; i < count; i++) ecc_point_mul(&r, &s, &p);
    report(all ? "nettle_mul" : "ecdh", a, count);
    if (all) {
        unsigned char bytes[65];
        bytes[0] = 4;
        ecc_point_get(&p, x, y);
        mpz_export(bytes + 1, NULL, 1, 1, 1, 0, x);  // both are 32 bytes for this point
        mpz_export(bytes + 33, NULL, 1, 1, 1, 0, y);
        a = cpu_us();
        for (int i = 0; i < count; i++) {
            mpz_import(x, 32, 1, 1, 1, 0, bytes + 1);
            mpz_import(y, 32, 1, 1, 1, 0, bytes + 33);
            if (!ecc_point_set(&q, x, y)) return 2;
            ecc_point_mul(&r, &s, &q);
        }
        report("nettle_decode_mul", a, count);
    }
    mpz_clears(z, x, y, NULL);
    ecc_point_clear(&q);
    ecc_point_clear(&r);
    ecc_point_clear(&p);
    ecc_scalar_clear(&s);
    return 0;
}

static EVP_PKEY *peer_from(const unsigned char *pub, size_t len) {
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pub, len);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    EVP_PKEY *k = NULL;
    if (EVP_PKEY_fromdata_init(ctx) <= 0 || EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params) <= 0) k = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(b);
    return k;
}

// `full`: set_peer's own check of the peer (EVP_PKEY_public_check: on the curve and of the
// group's order, which costs a second multiplication); else only that it is on the curve
// (EVP_PKEY_public_check_quick), which is enough on P-256 (cofactor 1), as in nettle's
// ecc_point_set.
static int derive(EVP_PKEY *priv, EVP_PKEY *peer, unsigned char *out, int full) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(priv, NULL);
    size_t len = 32;
    int ok = ctx && EVP_PKEY_derive_init(ctx) > 0;
    if (ok && !full) {
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new(peer, NULL);
        ok = check && EVP_PKEY_public_check_quick(check) > 0;
        EVP_PKEY_CTX_free(check);
    }
    ok = ok && EVP_PKEY_derive_set_peer_ex(ctx, peer, full) > 0 && EVP_PKEY_derive(ctx, out, &len) > 0 && len == 32;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static int openssl_part(int count) {
    // The low-level multiplication.
    EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *k = NULL;
    BN_hex2bn(&k, scalar_hex);
    EC_POINT *p = EC_POINT_new(g), *r = EC_POINT_new(g);
    BN_CTX *bn = BN_CTX_new();
    EC_POINT_mul(g, p, k, NULL, NULL, bn);
    double a = cpu_us();
    for (int i = 0; i < count; i++) EC_POINT_mul(g, r, NULL, p, k, bn);
    report("openssl_mul", a, count);
    unsigned char octets[65];
    EC_POINT *q = EC_POINT_new(g);
    if (EC_POINT_point2oct(g, p, POINT_CONVERSION_UNCOMPRESSED, octets, 65, bn) != 65) return 2;
    a = cpu_us();
    for (int i = 0; i < count; i++) {
        // oct2point checks that the point is on the curve.
        if (!EC_POINT_oct2point(g, q, octets, 65, bn)) return 2;
        EC_POINT_mul(g, r, NULL, q, k, bn);
    }
    report("openssl_decode_mul", a, count);
    EC_POINT_free(q);

    // Through EVP, as a program on OpenSSL 3 would call it.
    EVP_PKEY *priv = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    EVP_PKEY *sender = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    unsigned char *pub = NULL;
    size_t pub_len = EVP_PKEY_get1_encoded_public_key(sender, &pub);
    EVP_PKEY *peer = peer_from(pub, pub_len);
    unsigned char secret[32], check[32];
    if (!priv || !peer || pub_len != 65 || !derive(priv, peer, check, 1)) return 2;
    a = cpu_us();
    for (int i = 0; i < count; i++) derive(priv, peer, secret, 1);
    report("openssl_derive_checked", a, count);
    a = cpu_us();
    for (int i = 0; i < count; i++) derive(priv, peer, secret, 0);
    report("openssl_derive", a, count);
    a = cpu_us();
    for (int i = 0; i < count; i++) {
        EVP_PKEY *q = peer_from(pub, pub_len);
        if (!q || !derive(priv, q, secret, 0)) return 2;
        EVP_PKEY_free(q);
    }
    report("openssl_decode_derive", a, count);
    // The peer's key decoded into a key that already has the group (EVP_PKEY_copy_parameters
    // from the subscription's key), instead of built up from parameters.
    a = cpu_us();
    for (int i = 0; i < count; i++) {
        EVP_PKEY *q = EVP_PKEY_new();
        if (!q || EVP_PKEY_copy_parameters(q, priv) <= 0 || EVP_PKEY_set1_encoded_public_key(q, pub, pub_len) <= 0
            || !derive(priv, q, secret, 0)) return 2;
        EVP_PKEY_free(q);
    }
    report("openssl_set_encoded_derive", a, count);
    if (memcmp(secret, check, 32) != 0) return 2;
    OPENSSL_free(pub);
    EVP_PKEY_free(peer);
    EVP_PKEY_free(sender);
    EVP_PKEY_free(priv);
    BN_CTX_free(bn);
    EC_POINT_free(r);
    EC_POINT_free(p);
    BN_free(k);
    EC_GROUP_free(g);
    return 0;
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 2000;
    int all = argc > 2 && strcmp(argv[2], "all") == 0;
    if (count <= 0) return 2;
    int rc = nettle_part(count, all);
    if (rc == 0 && all) rc = openssl_part(count);
    return rc;
}
