// ECDH on P-256 with nettle, for Web Push (RFC 8291): GnuTLS's public API has no ECDH. nettle's
// curve calls take GMP numbers, whose functions are macros Swift cannot import, so the byte
// conversions live here; the arithmetic is nettle's (`ecc_point_mul`, `ecc_point_mul_g`).
#include "CGnuTLSShim.h"

#include <gmp.h>
#include <nettle/ecc.h>
#include <nettle/ecc-curve.h>
#include <string.h>

// The 32 big-endian bytes of `z` (which is below 2^256) into `out`.
static void fcm_p256_bytes(const mpz_t z, unsigned char *out) {
    size_t n = 0;
    unsigned char buf[32];
    memset(out, 0, 32);
    if (mpz_sizeinbase(z, 256) > 32) return;
    mpz_export(buf, &n, 1, 1, 1, 0, z);
    memcpy(out + 32 - n, buf, n);
}

// `point` (0x04 || x || y) as a nettle point; 1 when it lies on the curve, else 0.
static int fcm_p256_load_point(struct ecc_point *p, const unsigned char *point) {
    if (point[0] != 0x04) return 0;
    mpz_t x, y;
    mpz_init(x);
    mpz_init(y);
    mpz_import(x, 32, 1, 1, 1, 0, point + 1);
    mpz_import(y, 32, 1, 1, 1, 0, point + 33);
    int ok = ecc_point_set(p, x, y);  // checks the curve equation and the coordinates' range
    mpz_clear(x);
    mpz_clear(y);
    return ok;
}

// `scalar` (32 big-endian bytes) as a nettle scalar; 1 when 0 < scalar < the group order.
static int fcm_p256_load_scalar(struct ecc_scalar *s, const unsigned char *scalar) {
    mpz_t z;
    mpz_init(z);
    mpz_import(z, 32, 1, 1, 1, 0, scalar);
    int ok = ecc_scalar_set(s, z);
    mpz_clear(z);
    return ok;
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_p256_point_valid(const unsigned char *point) {
    struct ecc_point p;
    ecc_point_init(&p, nettle_get_secp_256r1());
    int ok = fcm_p256_load_point(&p, point);
    ecc_point_clear(&p);
    return ok;
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_p256_public(const unsigned char *scalar, unsigned char *point) {
    const struct ecc_curve *curve = nettle_get_secp_256r1();
    struct ecc_scalar s;
    struct ecc_point r;
    ecc_scalar_init(&s, curve);
    ecc_point_init(&r, curve);
    int rc = -1;
    if (fcm_p256_load_scalar(&s, scalar)) {
        mpz_t x, y;
        mpz_init(x);
        mpz_init(y);
        ecc_point_mul_g(&r, &s);
        ecc_point_get(&r, x, y);
        point[0] = 0x04;
        fcm_p256_bytes(x, point + 1);
        fcm_p256_bytes(y, point + 33);
        mpz_clear(x);
        mpz_clear(y);
        rc = 0;
    }
    ecc_point_clear(&r);
    ecc_scalar_clear(&s);
    return rc;
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_p256_ecdh(const unsigned char *scalar, const unsigned char *point, unsigned char *secret) {
    const struct ecc_curve *curve = nettle_get_secp_256r1();
    struct ecc_scalar s;
    struct ecc_point p, r;
    ecc_scalar_init(&s, curve);
    ecc_point_init(&p, curve);
    ecc_point_init(&r, curve);
    int rc = -1;
    if (fcm_p256_load_scalar(&s, scalar) && fcm_p256_load_point(&p, point)) {
        mpz_t x, y;
        mpz_init(x);
        mpz_init(y);
        ecc_point_mul(&r, &s, &p);
        ecc_point_get(&r, x, y);
        fcm_p256_bytes(x, secret);
        mpz_clear(x);
        mpz_clear(y);
        rc = 0;
    }
    ecc_point_clear(&r);
    ecc_point_clear(&p);
    ecc_scalar_clear(&s);
    return rc;
}
