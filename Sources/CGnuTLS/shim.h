#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

// Macros and a function-pointer global that Swift cannot import, as fixed functions.
static inline void fcm_gnutls_free(void *p) { gnutls_free(p); }
static inline unsigned int fcm_gnutls_p256_bits(void) { return GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1); }
static inline void fcm_gnutls_transport_set_fd(gnutls_session_t s, int fd) { gnutls_transport_set_int2(s, fd, fd); }

// A self-signed certificate (ECDSA P-256, SHA-256, ten years) for `common_name` and the DNS names in
// `names` (NUL-separated, `count` of them), written as PEM to `cert_path` and `key_path`.
// Returns 0 or a GnuTLS error code.
static inline int fcm_gnutls_self_signed(const char *common_name, const char *names, int count,
        const char *cert_path, const char *key_path, long now) {
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    gnutls_datum_t out = {NULL, 0};
    int rc;
    if ((rc = gnutls_x509_privkey_init(&key)) < 0) return rc;
    if ((rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, fcm_gnutls_p256_bits(), 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_init(&crt)) < 0) goto done;
    gnutls_x509_crt_set_version(crt, 3);
    unsigned char serial[8];
    for (int i = 0; i < 8; i++) serial[i] = (unsigned char)((now >> (i * 5)) ^ (i * 37));
    serial[0] &= 0x7f;
    gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    gnutls_x509_crt_set_activation_time(crt, (time_t)(now - 3600));
    gnutls_x509_crt_set_expiration_time(crt, (time_t)(now + 10L * 365 * 86400));
    gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, common_name, (unsigned)strlen(common_name));
    const char *n = names;
    for (int i = 0; i < count; i++) {
        gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, n, (unsigned)strlen(n), GNUTLS_FSAN_APPEND);
        n += strlen(n) + 1;
    }
    gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
    gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    if ((rc = gnutls_x509_crt_set_key(crt, key)) < 0) goto done;
    if ((rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0) goto done;
    if ((rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out)) < 0) goto done;
    FILE *f = fopen(cert_path, "wb");
    if (!f) { rc = GNUTLS_E_FILE_ERROR; goto done; }
    fwrite(out.data, 1, out.size, f);
    fclose(f);
    gnutls_free(out.data);
    out.data = NULL;
    if ((rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out)) < 0) goto done;
    f = fopen(key_path, "wb");
    if (!f) { rc = GNUTLS_E_FILE_ERROR; goto done; }
    fwrite(out.data, 1, out.size, f);
    fclose(f);
    rc = 0;
done:
    if (out.data) gnutls_free(out.data);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (key) gnutls_x509_privkey_deinit(key);
    return rc;
}
