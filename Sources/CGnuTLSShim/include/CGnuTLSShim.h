#ifndef FCM_CGNUTLS_SHIM_H
#define FCM_CGNUTLS_SHIM_H

// Certificate building (certificates.c) and P-256 ECDH (p256.c, with nettle) for the TLS target,
// in C. The signatures use no GnuTLS or nettle type, so Swift sees those libraries only through
// the CGnuTLS and CNettle modules.

// A self-signed server certificate (ECDSA P-256, SHA-256, ten years) for the NUL-separated
// `names` (the first is the common name), written as PEM to `cert_path` (0644) and `key_path`
// (0600). Returns 0 or a GnuTLS error code.
int fcm_gnutls_self_signed(const char *names, int count, const char *cert_path, const char *key_path, long now);

// `fcm-mock cert`: a new local certificate authority (ECDSA P-256, ten years) and a server
// certificate it signs (two years) for the NUL-separated `names` (`count` of them; IPv4 and IPv6
// literals become IP address entries, the rest DNS names; the first is the common name). Writes
// PEM files: certificates 0644, keys 0600. Returns 0 or a GnuTLS error code.
int fcm_gnutls_ca_and_server(const char *names, int count, const char *ca_cert_path, const char *ca_key_path,
                             const char *cert_path, const char *key_path, long now);

// A new server certificate (and key) for `names`, as `fcm_gnutls_ca_and_server` makes one, signed
// by the existing CA in `ca_cert_path`/`ca_key_path`: for a CA folder whose server certificate no
// longer fits. The names of the certificate at `old_cert_path` that `names` lack are kept (an
// unreadable one keeps none). Returns 0 or a GnuTLS error code.
int fcm_gnutls_server_from_ca(const char *names, int count, const char *ca_cert_path, const char *ca_key_path,
                              const char *old_cert_path, const char *cert_path, const char *key_path, long now);

// Whether the PEM certificate at `cert_path` serves the NUL-separated `names` until `until` (Unix
// seconds): 0 yes, 1 a name is missing from its subject alternative names, 2 it expires before
// then, or a (negative) GnuTLS error code when it cannot be read.
int fcm_gnutls_cert_serves(const char *cert_path, const char *names, int count, long until);

// A client certificate signed by the CA in `ca_cert_path`/`ca_key_path` (PEM files): a new ECDSA
// P-256 key, a random 16-byte serial, subject UID `uid` and common name `common_name`,
// client-authentication usage, valid from an hour ago for `days`, and `ext_count` extensions
// (`ext_oids[i]` with the DER value `ext_values[i]` of `ext_sizes[i]` bytes, in that order: the
// APNs room's topic extension and environment markers). The certificate and its PKCS #8 key
// come back as PEM in buffers the caller frees with `gnutls_free`. Returns 0 or a GnuTLS error
// code.
int fcm_gnutls_client_cert(const char *ca_cert_path, const char *ca_key_path, const char *common_name, const char *uid,
                           const char *const *ext_oids, const unsigned char *const *ext_values, const unsigned *ext_sizes,
                           unsigned ext_count, long now, long days, unsigned char **cert_pem, unsigned *cert_size,
                           unsigned char **key_pem, unsigned *key_size);

// 1 if `point` (65 bytes: 0x04 || x || y) is a point of P-256, else 0.
int fcm_p256_point_valid(const unsigned char *point);

// The public point (65 bytes, uncompressed) of the private `scalar` (32 big-endian bytes): 0, or
// -1 when the scalar is not in [1, n-1].
int fcm_p256_public(const unsigned char *scalar, unsigned char *point);

// ECDH: the x coordinate (32 bytes) of `scalar` times `point` into `secret`: 0, or -1 when the
// scalar is out of range or the point is not on the curve.
int fcm_p256_ecdh(const unsigned char *scalar, const unsigned char *point, unsigned char *secret);

#endif
