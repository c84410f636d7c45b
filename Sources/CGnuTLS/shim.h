#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>

// What Swift cannot import, as fixed functions: `gnutls_free` is a function-pointer global (or a
// macro, depending on the GnuTLS version). Everything else is in the TLS target (Swift) and
// CGnuTLSShim (certificate building, C).
static inline void fcm_gnutls_free(void *p) { gnutls_free(p); }
