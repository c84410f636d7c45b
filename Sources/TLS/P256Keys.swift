// P-256 keys: ES256 signatures (APNs provider tokens, VAPID) through GnuTLS, and ECDH for Web
// Push (RFC 8291) through nettle, which GnuTLS's public API lacks.

import CGnuTLS
import CGnuTLSShim
import CNettle

/// A P-256 public key: verifies ES256 signatures and is the peer of an ECDH.
///
/// `@unchecked Sendable`: the key is imported once here and only read afterwards; GnuTLS
/// verifies with it from any thread.
public final class P256PublicKey: @unchecked Sendable, Equatable, CustomStringConvertible {
    let key: gnutls_pubkey_t
    /// The uncompressed point, 65 bytes: 0x04, x, y (the form of VAPID's `k` and Web Push's
    /// `p256dh`).
    public let rawPoint: [UInt8]

    /// Imports an uncompressed point (65 bytes, 0x04 first) that lies on the curve.
    public init(rawPoint: [UInt8]) throws(TLSError) {
        guard rawPoint.count == 65, rawPoint[0] == 0x04 else {
            throw TLSError("a P-256 public key is 65 bytes starting with 0x04 (uncompressed), not \(rawPoint.count) bytes")
        }
        guard fcm_p256_point_valid(rawPoint) == 1 else { throw TLSError("the public key is not a point of the P-256 curve") }
        var k: gnutls_pubkey_t?
        var rc = gnutls_pubkey_init(&k)
        guard rc >= 0, let k else { throw TLSError("cannot make a public key", rc) }
        rc = withDatum(Array(rawPoint[1..<33])) { x in
            withDatum(Array(rawPoint[33..<65])) { y in gnutls_pubkey_import_ecc_raw(k, GNUTLS_ECC_CURVE_SECP256R1, &x, &y) }
        }
        guard rc >= 0 else {
            gnutls_pubkey_deinit(k)
            throw TLSError("cannot import the public key", rc)
        }
        key = k
        self.rawPoint = rawPoint
    }

    /// Imports the base64url form of an uncompressed point (padding allowed, nothing else).
    public convenience init(base64URL text: String) throws(TLSError) {
        guard let bytes = Base64URL.decode(text) else { throw TLSError("the public key is not base64url") }
        try self.init(rawPoint: bytes)
    }

    /// Imports a `-----BEGIN PUBLIC KEY-----` PEM of a P-256 key.
    public convenience init(pem: String) throws(TLSError) {
        var k: gnutls_pubkey_t?
        var rc = gnutls_pubkey_init(&k)
        guard rc >= 0, let k else { throw TLSError("cannot make a public key", rc) }
        defer { gnutls_pubkey_deinit(k) }
        rc = withDatum(Array(pem.utf8)) { gnutls_pubkey_import(k, &$0, GNUTLS_X509_FMT_PEM) }
        guard rc >= 0 else { throw TLSError("not a PEM public key", rc) }
        var curve = GNUTLS_ECC_CURVE_INVALID
        var x = gnutls_datum_t(data: nil, size: 0), y = gnutls_datum_t(data: nil, size: 0)
        guard gnutls_pubkey_get_pk_algorithm(k, nil) == Int32(GNUTLS_PK_ECDSA.rawValue),
            gnutls_pubkey_export_ecc_raw2(k, &curve, &x, &y, GNUTLS_EXPORT_FLAG_NO_LZ.rawValue) >= 0
        else { throw TLSError("not an elliptic-curve public key") }
        let point = [0x04] + leftPadded(takeDatum(x)) + leftPadded(takeDatum(y))
        guard curve == GNUTLS_ECC_CURVE_SECP256R1 else { throw TLSError("not a P-256 public key") }
        try self.init(rawPoint: point)
    }

    deinit { gnutls_pubkey_deinit(key) }

    /// The point in base64url without padding.
    public var base64URL: String { Base64URL.encode(rawPoint) }

    /// The key as `-----BEGIN PUBLIC KEY-----` PEM (SubjectPublicKeyInfo).
    public var pem: String {
        var out = gnutls_datum_t(data: nil, size: 0)
        // Exporting a key GnuTLS holds fails only when memory runs out.
        precondition(gnutls_pubkey_export2(key, GNUTLS_X509_FMT_PEM, &out) >= 0, "GnuTLS cannot export a public key")
        return String(decoding: takeDatum(out), as: UTF8.self)
    }

    /// Whether `signature`, a JWS ES256 signature (r and s, 32 bytes each), is this key's
    /// signature of `data`. Any other length is false.
    public func verifiesES256(_ data: [UInt8], signature: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        // GnuTLS verifies the DER form (SEQUENCE of two INTEGERs); the integers go in without
        // leading zeros, as DER wants them minimal.
        var der = gnutls_datum_t(data: nil, size: 0)
        let rc = withDatum(minimal(signature[0..<32])) { r in
            withDatum(minimal(signature[32..<64])) { s in gnutls_encode_rs_value(&der, &r, &s) }
        }
        guard rc >= 0 else { return false }
        let encoded = takeDatum(der)
        return withDatum(data) { d in
            withDatum(encoded) { s in gnutls_pubkey_verify_data2(key, GNUTLS_SIGN_ECDSA_SHA256, 0, &d, &s) >= 0 }
        }
    }

    public static func == (a: P256PublicKey, b: P256PublicKey) -> Bool { a.rawPoint == b.rawPoint }

    public var description: String { "P256PublicKey(\(base64URL))" }
}

/// A P-256 private key: signs ES256, derives ECDH secrets, and writes itself as PKCS #8 PEM (the
/// shape of Apple's `.p8` downloads).
///
/// `@unchecked Sendable`: made or imported once here and only read afterwards. Its description
/// names the public key only, so the secret cannot reach a log line by interpolation.
public final class P256PrivateKey: @unchecked Sendable, CustomStringConvertible {
    private let key: gnutls_privkey_t
    /// The secret scalar, 32 big-endian bytes (nettle's ECDH takes it as a number).
    private let scalar: [UInt8]
    /// The public half.
    public let publicKey: P256PublicKey

    /// A new random key.
    public convenience init() throws(TLSError) {
        var k: gnutls_privkey_t?
        var rc = gnutls_privkey_init(&k)
        guard rc >= 0, let k else { throw TLSError("cannot make a private key", rc) }
        // GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), a macro Swift does not import.
        rc = gnutls_privkey_generate(k, GNUTLS_PK_ECDSA, 1 << 31 | GNUTLS_ECC_CURVE_SECP256R1.rawValue, 0)
        guard rc >= 0 else {
            gnutls_privkey_deinit(k)
            throw TLSError("cannot generate a P-256 key", rc)
        }
        try self.init(taking: k)
    }

    /// Imports a PEM private key of the P-256 curve: PKCS #8 (`-----BEGIN PRIVATE KEY-----`, an
    /// Apple `.p8`) or SEC 1 (`-----BEGIN EC PRIVATE KEY-----`).
    public convenience init(pem: String) throws(TLSError) {
        try self.init(taking: importPrivateKey(pem: pem))
    }

    /// Imports the secret scalar (32 big-endian bytes, in [1, n-1]): the JWK `d` of a key, or a
    /// test vector's private key.
    public convenience init(rawScalar: [UInt8]) throws(TLSError) {
        var point = [UInt8](repeating: 0, count: 65)
        guard rawScalar.count == 32, fcm_p256_public(rawScalar, &point) == 0 else {
            throw TLSError("a P-256 private key is a number in [1, n-1] written in 32 bytes")
        }
        var k: gnutls_privkey_t?
        var rc = gnutls_privkey_init(&k)
        guard rc >= 0, let k else { throw TLSError("cannot make a private key", rc) }
        rc = withDatum(Array(point[1..<33])) { x in
            withDatum(Array(point[33..<65])) { y in
                withDatum(rawScalar) { d in gnutls_privkey_import_ecc_raw(k, GNUTLS_ECC_CURVE_SECP256R1, &x, &y, &d) }
            }
        }
        guard rc >= 0 else {
            gnutls_privkey_deinit(k)
            throw TLSError("cannot import the private key", rc)
        }
        try self.init(taking: k)
    }

    /// Keeps `k` (freed with this key, or here when it is not a P-256 key).
    private init(taking k: gnutls_privkey_t) throws(TLSError) {
        var curve = GNUTLS_ECC_CURVE_INVALID
        var x = gnutls_datum_t(data: nil, size: 0), y = gnutls_datum_t(data: nil, size: 0)
        var d = gnutls_datum_t(data: nil, size: 0)
        guard gnutls_privkey_get_pk_algorithm(k, nil) == Int32(GNUTLS_PK_ECDSA.rawValue),
            gnutls_privkey_export_ecc_raw2(k, &curve, &x, &y, &d, GNUTLS_EXPORT_FLAG_NO_LZ.rawValue) >= 0
        else {
            gnutls_privkey_deinit(k)
            throw TLSError("not an elliptic-curve private key")
        }
        let point = [0x04] + leftPadded(takeDatum(x)) + leftPadded(takeDatum(y))
        let secret = leftPadded(takeDatum(d))
        guard curve == GNUTLS_ECC_CURVE_SECP256R1 else {
            gnutls_privkey_deinit(k)
            throw TLSError("not a P-256 private key")
        }
        // A PEM may hold a scalar out of range, or a public point that is not its own: ECDH and
        // signatures would then fail later, so such a key is refused here.
        var derived = [UInt8](repeating: 0, count: 65)
        guard fcm_p256_public(secret, &derived) == 0, derived == point else {
            gnutls_privkey_deinit(k)
            throw TLSError("the private key's numbers do not form a P-256 key pair")
        }
        do {
            publicKey = try P256PublicKey(rawPoint: point)
        } catch {
            gnutls_privkey_deinit(k)
            throw error
        }
        key = k
        scalar = secret
    }

    deinit { gnutls_privkey_deinit(key) }

    /// The secret scalar (32 bytes), for storing the key compactly. A secret: never log it.
    public var rawScalar: [UInt8] { scalar }

    /// The key as PKCS #8 PEM, `-----BEGIN PRIVATE KEY-----`, byte for byte the layout of Apple's
    /// `.p8` files (and OpenSSL's): the private key in exactly 32 bytes with the public point.
    /// GnuTLS's own PKCS #8 export writes the private key as an integer (33 bytes when its high
    /// bit is set, fewer after leading zeros), which strict readers refuse (Python's
    /// `cryptography`, hence PyJWT and aioapns), so the DER is laid out here from the raw numbers
    /// and GnuTLS only writes the PEM armor.
    public var pem: String {
        // PrivateKeyInfo { version 0, { id-ecPublicKey, prime256v1 },
        //   OCTET STRING ECPrivateKey { version 1, OCTET STRING d, [1] BIT STRING point } }
        let der: [UInt8] = [0x30, 0x81, 0x87, 0x02, 0x01, 0x00,
                            0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                            0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07,
                            0x04, 0x6D, 0x30, 0x6B, 0x02, 0x01, 0x01, 0x04, 0x20]
            + scalar + [0xA1, 0x44, 0x03, 0x42, 0x00] + publicKey.rawPoint
        var out = gnutls_datum_t(data: nil, size: 0)
        // Fails only when memory runs out.
        precondition(withDatum(der) { gnutls_pem_base64_encode2("PRIVATE KEY", &$0, &out) } >= 0, "GnuTLS cannot write PEM")
        return String(decoding: takeDatum(out), as: UTF8.self)
    }

    /// The ES256 signature of `data` as JWS writes it: r and s, 32 bytes each.
    public func signES256(_ data: [UInt8]) throws(TLSError) -> [UInt8] {
        var sig = gnutls_datum_t(data: nil, size: 0)
        var rc = withDatum(data) { gnutls_privkey_sign_data2(key, GNUTLS_SIGN_ECDSA_SHA256, 0, &$0, &sig) }
        guard rc >= 0 else { throw TLSError("cannot sign", rc) }
        let der = takeDatum(sig)
        var r = gnutls_datum_t(data: nil, size: 0), s = gnutls_datum_t(data: nil, size: 0)
        rc = withDatum(der) { gnutls_decode_rs_value(&$0, &r, &s) }
        guard rc >= 0 else { throw TLSError("cannot read the signature", rc) }
        return leftPadded(takeDatum(r)) + leftPadded(takeDatum(s))
    }

    /// The ECDH shared secret with `peer` (the x coordinate of the product, 32 bytes).
    public func sharedSecret(with peer: P256PublicKey) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        // Both inputs were checked when the keys were made (scalar in range, point on the curve).
        precondition(fcm_p256_ecdh(scalar, peer.rawPoint, &out) == 0, "ECDH on checked P-256 keys failed")
        return out
    }

    public var description: String { "P256PrivateKey(public: \(publicKey.base64URL))" }
}

/// A P-256 coordinate or scalar as exactly 32 bytes: GnuTLS drops leading zeros (with
/// GNUTLS_EXPORT_FLAG_NO_LZ) or adds one (ASN.1 INTEGERs with the high bit set).
private func leftPadded(_ bytes: [UInt8]) -> [UInt8] {
    var b = bytes[...]
    while b.count > 32, b.first == 0 { b = b.dropFirst() }
    return [UInt8](repeating: 0, count: max(0, 32 - b.count)) + b
}

/// An unsigned big-endian integer without its leading zeros (at least one byte).
private func minimal(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
    var b = bytes
    while b.count > 1, b.first == 0 { b = b.dropFirst() }
    return Array(b)
}

/// base64url (RFC 4648 §5) by nettle, for keys handed to and taken from users.
public enum Base64URL {
    /// `bytes` in base64url without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var ctx = base64_encode_ctx()
        nettle_base64url_encode_init(&ctx)
        var out = [CChar](repeating: 0, count: bytes.count / 3 * 4 + 8)
        let n = out.withUnsafeMutableBufferPointer { o in
            let m = bytes.withUnsafeBufferPointer { nettle_base64_encode_update(&ctx, o.baseAddress!, $0.count, $0.baseAddress) }
            return m + nettle_base64_encode_final(&ctx, o.baseAddress! + m)
        }
        return String(decoding: out[0..<n].lazy.map { UInt8(bitPattern: $0) }.filter { $0 != UInt8(ascii: "=") }, as: UTF8.self)
    }

    /// The bytes of base64url `text` (with or without padding), or nil: nettle's decoder skips
    /// white space, so only the alphabet is let through to it.
    public static func decode(_ text: String) -> [UInt8]? {
        var chars = Array(text.utf8)
        var padding = 0
        while chars.last == UInt8(ascii: "=") {
            chars.removeLast()
            padding += 1
        }
        guard padding <= 2, chars.count % 4 != 1,
            chars.allSatisfy({ c in
                (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
                    || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
            })
        else { return nil }
        // nettle's final check wants whole groups of four.
        chars += [UInt8](repeating: UInt8(ascii: "="), count: (4 - chars.count % 4) % 4)
        var ctx = base64_decode_ctx()
        nettle_base64url_decode_init(&ctx)
        var out = [UInt8](repeating: 0, count: chars.count / 4 * 3 + 3)
        var n = out.count
        let ok = chars.withUnsafeBufferPointer { c in
            c.withMemoryRebound(to: CChar.self) { c in nettle_base64_decode_update(&ctx, &n, &out, c.count, c.baseAddress) }
        }
        guard ok == 1, nettle_base64_decode_final(&ctx) == 1 else { return nil }
        return Array(out[0..<n])
    }
}
