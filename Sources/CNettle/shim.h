// nettle (and GMP, which its elliptic-curve calls take numbers in), for the one piece GnuTLS's
// public API lacks: ECDH on P-256 for Web Push (RFC 8291). The curve arithmetic is in
// CGnuTLSShim/p256.c, because GMP's calls are macros Swift cannot import; Swift uses nettle's
// base64url directly.
#include <nettle/base64.h>
#include <nettle/ecc.h>
#include <nettle/ecc-curve.h>
#include <gmp.h>
