#ifndef FCM_CGNUTLS_SHIM_H
#define FCM_CGNUTLS_SHIM_H

// Certificate building for the TLS target, in C (certificates.c). The signatures use no GnuTLS
// type, so Swift sees GnuTLS only through the CGnuTLS module.

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

#endif
