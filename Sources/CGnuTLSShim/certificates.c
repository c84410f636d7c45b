// Certificate building for the TLS target (`fcm-mock cert`, the generated self-signed
// certificate): plain GnuTLS calls with goto clean-up, kept in C where that style is at home.
#include "CGnuTLSShim.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <gnutls/crypto.h>

// ECDSA keys on the P-256 curve (a macro, hence a function).
static unsigned int p256_bits(void) { return GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1); }

// Writes `d` to `path` with `mode` (0600 for keys), replacing the file. 0 or a GnuTLS error code.
static int fcm_gnutls_write_file(const char *path, const gnutls_datum_t *d, int mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0) return GNUTLS_E_FILE_ERROR;
    size_t off = 0;
    while (off < d->size) {
        ssize_t n = write(fd, d->data + off, d->size - off);
        if (n <= 0) { close(fd); return GNUTLS_E_FILE_ERROR; }
        off += (size_t)n;
    }
    fchmod(fd, mode);
    return close(fd) == 0 ? 0 : GNUTLS_E_FILE_ERROR;
}

// Exports `crt` or `key` as PEM into `path`.
static int fcm_gnutls_save(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *path) {
    gnutls_datum_t out = {NULL, 0};
    int rc = crt ? gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out)
                 : gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out);
    if (rc < 0) return rc;
    rc = fcm_gnutls_write_file(path, &out, crt ? 0644 : 0600);
    gnutls_free(out.data);
    return rc;
}

// A fresh certificate skeleton: version 3, a serial from `now` and `salt`, valid from an hour ago
// for `days`, subject common name `cn`, subject key id from `key`.
static int fcm_gnutls_skeleton(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn,
        long now, int salt, long days) {
    gnutls_x509_crt_set_version(crt, 3);
    unsigned char serial[12];
    for (int i = 0; i < 12; i++) serial[i] = (unsigned char)((now >> ((i % 8) * 5)) ^ (i * 37) ^ (salt * 91));
    serial[0] = (serial[0] & 0x7f) | 0x01;
    int rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    if (rc < 0) return rc;
    gnutls_x509_crt_set_activation_time(crt, (time_t)(now - 3600));
    gnutls_x509_crt_set_expiration_time(crt, (time_t)(now + days * 86400));
    if ((rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn))) < 0) return rc;
    if ((rc = gnutls_x509_crt_set_key(crt, key)) < 0) return rc;
    unsigned char id[64];
    size_t id_size = sizeof id;
    if ((rc = gnutls_x509_privkey_get_key_id(key, 0, id, &id_size)) < 0) return rc;
    return gnutls_x509_crt_set_subject_key_id(crt, id, id_size);
}

// The NUL-separated `names` (`count` of them) as subject alternative names of a server
// certificate: IPv4 and IPv6 literals as IP address entries, the rest as DNS names.
static int fcm_gnutls_set_names(gnutls_x509_crt_t crt, const char *names, int count) {
    const char *n = names;
    for (int i = 0; i < count; i++) {
        unsigned char ip[16];
        int rc;
        if (inet_pton(AF_INET, n, ip) == 1)
            rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip, 4, GNUTLS_FSAN_APPEND);
        else if (inet_pton(AF_INET6, n, ip) == 1)
            rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip, 16, GNUTLS_FSAN_APPEND);
        else
            rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, n, (unsigned)strlen(n), GNUTLS_FSAN_APPEND);
        if (rc < 0) return rc;
        n += strlen(n) + 1;
    }
    return 0;
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_gnutls_self_signed(const char *names, int count, const char *cert_path,
        const char *key_path, long now) {
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    int rc;
    if ((rc = gnutls_x509_privkey_init(&key)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, p256_bits(), 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_init(&crt)) < 0) goto done;
    if ((rc = fcm_gnutls_skeleton(crt, key, count > 0 ? names : "localhost", now, 0, 3650)) < 0) goto done;
    gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
    gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    if ((rc = fcm_gnutls_set_names(crt, names, count)) < 0) goto done;
    if ((rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0) goto done;
    if ((rc = fcm_gnutls_save(crt, NULL, cert_path)) < 0) goto done;
    rc = fcm_gnutls_save(NULL, key, key_path);
done:
    if (crt) gnutls_x509_crt_deinit(crt);
    if (key) gnutls_x509_privkey_deinit(key);
    return rc < 0 ? rc : 0;
}

static int fcm_gnutls_keep_names(gnutls_x509_crt_t crt, gnutls_x509_crt_t old, const char *names, int count);

// A server certificate for `names` signed by `ca` with `ca_key` (two years), written with its new
// key to `cert_path` and `key_path`; with `old`, the names `old` had beyond `names` are kept too.
static int fcm_gnutls_issue_server(gnutls_x509_crt_t ca, gnutls_x509_privkey_t ca_key, const char *names, int count,
        gnutls_x509_crt_t old, const char *cert_path, const char *key_path, long now) {
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    int rc;
    if ((rc = gnutls_x509_privkey_init(&key)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, p256_bits(), 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_init(&crt)) < 0) goto done;
    if ((rc = fcm_gnutls_skeleton(crt, key, count > 0 ? names : "localhost", now, 2, 730)) < 0) goto done;
    gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
    gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
    gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    {
        unsigned char id[64];
        size_t id_size = sizeof id;
        if ((rc = gnutls_x509_privkey_get_key_id(ca_key, 0, id, &id_size)) < 0) goto done;
        if ((rc = gnutls_x509_crt_set_authority_key_id(crt, id, id_size)) < 0) goto done;
    }
    if ((rc = fcm_gnutls_set_names(crt, names, count)) < 0) goto done;
    if (old && (rc = fcm_gnutls_keep_names(crt, old, names, count)) < 0) goto done;
    if ((rc = gnutls_x509_crt_sign2(crt, ca, ca_key, GNUTLS_DIG_SHA256, 0)) < 0) goto done;
    if ((rc = fcm_gnutls_save(crt, NULL, cert_path)) < 0) goto done;
    rc = fcm_gnutls_save(NULL, key, key_path);
done:
    if (crt) gnutls_x509_crt_deinit(crt);
    if (key) gnutls_x509_privkey_deinit(key);
    return rc < 0 ? rc : 0;
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_gnutls_ca_and_server(const char *names, int count, const char *ca_cert_path,
        const char *ca_key_path, const char *cert_path, const char *key_path, long now) {
    gnutls_x509_privkey_t ca_key = NULL;
    gnutls_x509_crt_t ca = NULL;
    int rc;
    if ((rc = gnutls_x509_privkey_init(&ca_key)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_generate(ca_key, GNUTLS_PK_ECDSA, p256_bits(), 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_init(&ca)) < 0) goto done;
    if ((rc = fcm_gnutls_skeleton(ca, ca_key, "fcm-mock local CA", now, 1, 3650)) < 0) goto done;
    gnutls_x509_crt_set_basic_constraints(ca, 1, 0);
    gnutls_x509_crt_set_key_usage(ca, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN | GNUTLS_KEY_DIGITAL_SIGNATURE);
    if ((rc = gnutls_x509_crt_sign2(ca, ca, ca_key, GNUTLS_DIG_SHA256, 0)) < 0) goto done;
    if ((rc = fcm_gnutls_save(ca, NULL, ca_cert_path)) < 0) goto done;
    if ((rc = fcm_gnutls_save(NULL, ca_key, ca_key_path)) < 0) goto done;
    rc = fcm_gnutls_issue_server(ca, ca_key, names, count, NULL, cert_path, key_path, now);
done:
    if (ca) gnutls_x509_crt_deinit(ca);
    if (ca_key) gnutls_x509_privkey_deinit(ca_key);
    return rc < 0 ? rc : 0;
}

// Reads the PEM certificate at `path` into `crt` (initialized here; the caller frees it even on
// failure).
static int fcm_gnutls_load_cert(const char *path, gnutls_x509_crt_t *crt) {
    gnutls_datum_t d = {NULL, 0};
    int rc;
    if ((rc = gnutls_x509_crt_init(crt)) < 0) return rc;
    if ((rc = gnutls_load_file(path, &d)) < 0) return rc;
    rc = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM);
    gnutls_free(d.data);
    return rc;
}

// Reads the PEM certificate at `cert_path` and the PEM key at `key_path` into `crt` and `key`
// (initialized here; the caller frees them even on failure).
static int fcm_gnutls_load_ca(const char *cert_path, const char *key_path, gnutls_x509_crt_t *crt,
        gnutls_x509_privkey_t *key) {
    gnutls_datum_t d = {NULL, 0};
    int rc;
    if ((rc = gnutls_x509_privkey_init(key)) < 0) return rc;
    if ((rc = fcm_gnutls_load_cert(cert_path, crt)) < 0) return rc;
    if ((rc = gnutls_load_file(key_path, &d)) < 0) return rc;
    rc = gnutls_x509_privkey_import(*key, &d, GNUTLS_X509_FMT_PEM);
    gnutls_free(d.data);
    return rc;
}

// Whether the NUL-separated `names` hold the subject alternative name of `type` in `buf` (`size`
// bytes): an IP address as one of their IP literals, a DNS name without regard to ASCII case.
static int fcm_names_hold(const char *names, int count, int type, const char *buf, size_t size) {
    const char *n = names;
    for (int i = 0; i < count; i++, n += strlen(n) + 1) {
        unsigned char ip[16];
        size_t ip_size = inet_pton(AF_INET, n, ip) == 1 ? 4 : inet_pton(AF_INET6, n, ip) == 1 ? 16 : 0;
        if (type == GNUTLS_SAN_IPADDRESS && ip_size == size && memcmp(ip, buf, size) == 0) return 1;
        if (type == GNUTLS_SAN_DNSNAME && !ip_size && strlen(n) == size && strncasecmp(n, buf, size) == 0) return 1;
    }
    return 0;
}

// Appends to `crt` the DNS and IP names of `old` that `names` do not hold (what `fcm-mock cert
// --host` added, kept when the certificate is made again).
static int fcm_gnutls_keep_names(gnutls_x509_crt_t crt, gnutls_x509_crt_t old, const char *names, int count) {
    for (unsigned seq = 0;; seq++) {
        char buf[512];
        size_t size = sizeof buf;
        int type = gnutls_x509_crt_get_subject_alt_name(old, seq, buf, &size, NULL);
        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) return 0;
        if (type == GNUTLS_E_SHORT_MEMORY_BUFFER) continue;
        if (type < 0) return type;
        if (type != GNUTLS_SAN_DNSNAME && type != GNUTLS_SAN_IPADDRESS) continue;
        if (fcm_names_hold(names, count, type, buf, size)) continue;
        int rc = gnutls_x509_crt_set_subject_alt_name(crt, (gnutls_x509_subject_alt_name_t)type, buf, (unsigned)size,
                                                      GNUTLS_FSAN_APPEND);
        if (rc < 0) return rc;
    }
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_gnutls_server_from_ca(const char *names, int count, const char *ca_cert_path, const char *ca_key_path,
        const char *old_cert_path, const char *cert_path, const char *key_path, long now) {
    gnutls_x509_crt_t ca = NULL, old = NULL;
    gnutls_x509_privkey_t ca_key = NULL;
    int rc = fcm_gnutls_load_ca(ca_cert_path, ca_key_path, &ca, &ca_key);
    // An old certificate that cannot be read gives no names to keep.
    if (rc >= 0 && fcm_gnutls_load_cert(old_cert_path, &old) < 0 && old) {
        gnutls_x509_crt_deinit(old);
        old = NULL;
    }
    if (rc >= 0) rc = fcm_gnutls_issue_server(ca, ca_key, names, count, old, cert_path, key_path, now);
    if (old) gnutls_x509_crt_deinit(old);
    if (ca) gnutls_x509_crt_deinit(ca);
    if (ca_key) gnutls_x509_privkey_deinit(ca_key);
    return rc < 0 ? rc : 0;
}

// Whether `crt` has `name` among its subject alternative names (as `fcm_names_hold` compares).
static int fcm_gnutls_names(gnutls_x509_crt_t crt, const char *name) {
    for (unsigned seq = 0;; seq++) {
        char buf[512];
        size_t size = sizeof buf;
        int type = gnutls_x509_crt_get_subject_alt_name(crt, seq, buf, &size, NULL);
        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) return 0;
        if (type == GNUTLS_E_SHORT_MEMORY_BUFFER) continue;
        if (type < 0) return 0;
        if (fcm_names_hold(name, 1, type, buf, size)) return 1;
    }
}

// Declared, and described, in CGnuTLSShim.h.
int fcm_gnutls_cert_serves(const char *cert_path, const char *names, int count, long until) {
    gnutls_x509_crt_t crt = NULL;
    int rc = fcm_gnutls_load_cert(cert_path, &crt);
    if (rc < 0) goto done;
    if ((long)gnutls_x509_crt_get_expiration_time(crt) < until) { rc = 2; goto done; }
    rc = 0;
    const char *n = names;
    for (int i = 0; i < count; i++, n += strlen(n) + 1) {
        if (!fcm_gnutls_names(crt, n)) { rc = 1; break; }
    }
done:
    if (crt) gnutls_x509_crt_deinit(crt);
    return rc;
}

// Apple's environment markers carry an ASN.1 NULL.
int fcm_gnutls_client_cert(const char *ca_cert_path, const char *ca_key_path, const char *common_name, const char *uid,
        const char *const *ext_oids, const unsigned char *const *ext_values, const unsigned *ext_sizes, unsigned ext_count,
        long now, long days, unsigned char **cert_pem, unsigned *cert_size, unsigned char **key_pem, unsigned *key_size) {
    gnutls_x509_privkey_t ca_key = NULL, key = NULL;
    gnutls_x509_crt_t ca = NULL, crt = NULL;
    gnutls_datum_t cert_out = {NULL, 0}, key_out = {NULL, 0};
    int rc;
    *cert_pem = *key_pem = NULL;
    *cert_size = *key_size = 0;
    if (strlen(uid) > 255 || strlen(common_name) > 320) return GNUTLS_E_INVALID_REQUEST;
    if ((rc = fcm_gnutls_load_ca(ca_cert_path, ca_key_path, &ca, &ca_key)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_init(&key)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, p256_bits(), 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_init(&crt)) < 0) goto done;
    if ((rc = fcm_gnutls_skeleton(crt, key, common_name, now, 3, days)) < 0) goto done;
    {
        // Random, so two certificates made in the same second differ (revocation goes by serial).
        unsigned char serial[16];
        if ((rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial)) < 0) goto done;
        serial[0] = (serial[0] & 0x7f) | 0x01;
        if ((rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial)) < 0) goto done;
    }
    if ((rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_LDAP_UID, 0, uid, (unsigned)strlen(uid))) < 0) goto done;
    gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
    gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
    if ((rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 0)) < 0) goto done;
    for (unsigned i = 0; i < ext_count; i++) {
        if ((rc = gnutls_x509_crt_set_extension_by_oid(crt, ext_oids[i], ext_values[i], ext_sizes[i], 0)) < 0) goto done;
    }
    {
        unsigned char id[64];
        size_t id_size = sizeof id;
        if ((rc = gnutls_x509_privkey_get_key_id(ca_key, 0, id, &id_size)) < 0) goto done;
        if ((rc = gnutls_x509_crt_set_authority_key_id(crt, id, id_size)) < 0) goto done;
    }
    if ((rc = gnutls_x509_crt_sign2(crt, ca, ca_key, GNUTLS_DIG_SHA256, 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cert_out)) < 0) goto done;
    if ((rc = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &key_out)) < 0) goto done;
    *cert_pem = cert_out.data;
    *cert_size = cert_out.size;
    *key_pem = key_out.data;
    *key_size = key_out.size;
    cert_out.data = key_out.data = NULL;
done:
    gnutls_free(cert_out.data);
    gnutls_free(key_out.data);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (key) gnutls_x509_privkey_deinit(key);
    if (ca) gnutls_x509_crt_deinit(ca);
    if (ca_key) gnutls_x509_privkey_deinit(ca_key);
    return rc < 0 ? rc : 0;
}
