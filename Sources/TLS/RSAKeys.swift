// RSA keys for OAuth 2.0 service accounts: the mock makes a key pair per service account
// (its private half goes into the service-account JSON once), and verifies the RS256
// signatures of the JWTs signed with it.

import CGnuTLS
import Platform

/// A public key that verifies RS256 (RSASSA-PKCS1-v1_5 with SHA-256) signatures.
///
/// `@unchecked Sendable`: the key is imported once here and only read afterwards; GnuTLS
/// verifies with it from any thread.
public final class RSAPublicKey: @unchecked Sendable {
    private let key: gnutls_pubkey_t

    /// Imports a `-----BEGIN PUBLIC KEY-----` PEM.
    public init(pem: String) throws(TLSError) {
        var k: gnutls_pubkey_t?
        var rc = gnutls_pubkey_init(&k)
        guard rc >= 0, let k else { throw TLSError("cannot make a public key", rc) }
        rc = withDatum(Array(pem.utf8)) { gnutls_pubkey_import(k, &$0, GNUTLS_X509_FMT_PEM) }
        guard rc >= 0 else {
            gnutls_pubkey_deinit(k)
            throw TLSError("not a PEM public key", rc)
        }
        guard gnutls_pubkey_get_pk_algorithm(k, nil) == Int32(GNUTLS_PK_RSA.rawValue) else {
            gnutls_pubkey_deinit(k)
            throw TLSError("not an RSA public key")
        }
        key = k
    }

    deinit { gnutls_pubkey_deinit(key) }

    /// Whether `signature` is this key's RS256 signature of `data`.
    public func verifiesRS256(_ data: [UInt8], signature: [UInt8]) -> Bool {
        withDatum(data) { d in
            withDatum(signature) { s in gnutls_pubkey_verify_data2(key, GNUTLS_SIGN_RSA_SHA256, 0, &d, &s) >= 0 }
        }
    }
}

/// A private RSA key that signs RS256.
///
/// `@unchecked Sendable`: made or imported once here and only read afterwards.
public final class RSAPrivateKey: @unchecked Sendable {
    private let key: gnutls_privkey_t
    /// The key as PKCS #8 PEM (`-----BEGIN PRIVATE KEY-----`, the form service-account JSON uses).
    public let pem: String
    /// Its public half as `-----BEGIN PUBLIC KEY-----` PEM.
    public let publicKeyPEM: String

    /// A new key pair of `bits` bits.
    public convenience init(generatingBits bits: UInt32 = 2048) throws(TLSError) {
        var x: gnutls_x509_privkey_t?
        var rc = gnutls_x509_privkey_init(&x)
        guard rc >= 0, let x else { throw TLSError("cannot make a private key", rc) }
        defer { gnutls_x509_privkey_deinit(x) }
        rc = gnutls_x509_privkey_generate(x, GNUTLS_PK_RSA, bits, 0)
        guard rc >= 0 else { throw TLSError("cannot generate an RSA key", rc) }
        var out = gnutls_datum_t(data: nil, size: 0)
        rc = gnutls_x509_privkey_export2_pkcs8(x, GNUTLS_X509_FMT_PEM, nil, UInt32(GNUTLS_PKCS_PLAIN.rawValue), &out)
        guard rc >= 0 else { throw TLSError("cannot write the private key", rc) }
        defer { fcm_gnutls_free(out.data) }
        try self.init(pem: String(decoding: UnsafeBufferPointer(start: out.data, count: Int(out.size)), as: UTF8.self))
    }

    /// Imports a PEM private key (PKCS #8 or PKCS #1).
    public init(pem: String) throws(TLSError) {
        let k = try importPrivateKey(pem: pem)
        var pub: gnutls_pubkey_t?
        var rc = gnutls_pubkey_init(&pub)
        guard rc >= 0, let pub else {
            gnutls_privkey_deinit(k)
            throw TLSError("cannot make a public key", rc)
        }
        defer { gnutls_pubkey_deinit(pub) }
        var out = gnutls_datum_t(data: nil, size: 0)
        rc = gnutls_pubkey_import_privkey(pub, k, 0, 0)
        if rc >= 0 { rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_PEM, &out) }
        guard rc >= 0 else {
            gnutls_privkey_deinit(k)
            throw TLSError("cannot write the public key", rc)
        }
        defer { fcm_gnutls_free(out.data) }
        key = k
        self.pem = pem
        publicKeyPEM = String(decoding: UnsafeBufferPointer(start: out.data, count: Int(out.size)), as: UTF8.self)
    }

    deinit { gnutls_privkey_deinit(key) }

    /// The RS256 signature of `data`.
    public func signRS256(_ data: [UInt8]) throws(TLSError) -> [UInt8] {
        var sig = gnutls_datum_t(data: nil, size: 0)
        let rc = withDatum(data) { gnutls_privkey_sign_data(key, GNUTLS_DIG_SHA256, 0, &$0, &sig) }
        guard rc >= 0 else { throw TLSError("cannot sign", rc) }
        defer { fcm_gnutls_free(sig.data) }
        return Array(UnsafeBufferPointer(start: sig.data, count: Int(sig.size)))
    }
}

/// A private key of any kind read from PEM (PKCS #8, PKCS #1, SEC 1), for the caller to free.
func importPrivateKey(pem: String) throws(TLSError) -> gnutls_privkey_t {
    var k: gnutls_privkey_t?
    var rc = gnutls_privkey_init(&k)
    guard rc >= 0, let k else { throw TLSError("cannot make a private key", rc) }
    rc = withDatum(Array(pem.utf8)) { gnutls_privkey_import_x509_raw(k, &$0, GNUTLS_X509_FMT_PEM, nil, 0) }
    guard rc >= 0 else {
        gnutls_privkey_deinit(k)
        throw TLSError("not a PEM private key", rc)
    }
    return k
}

/// Runs `body` with a datum over `bytes` (GnuTLS reads it during the call only).
func withDatum<T>(_ bytes: [UInt8], _ body: (inout gnutls_datum_t) -> T) -> T {
    bytes.withUnsafeBufferPointer { b in
        var d = gnutls_datum_t(data: UnsafeMutablePointer(mutating: b.baseAddress), size: UInt32(b.count))
        return body(&d)
    }
}

/// The bytes of a datum GnuTLS allocated, which is freed.
func takeDatum(_ d: gnutls_datum_t) -> [UInt8] {
    defer { fcm_gnutls_free(d.data) }
    guard let p = d.data else { return [] }
    return Array(UnsafeBufferPointer(start: p, count: Int(d.size)))
}
