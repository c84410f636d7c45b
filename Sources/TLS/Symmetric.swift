// Symmetric primitives from GnuTLS: HKDF-SHA-256 (RFC 5869) and AES-128-GCM (what Web Push's
// encryption is made of), and random bytes.

import CGnuTLS

/// HKDF with HMAC-SHA-256 (RFC 5869).
public enum HKDF {
    /// HKDF-Extract: the 32-byte pseudorandom key of `ikm` under `salt`.
    public static func extract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] {
        var prk = [UInt8](repeating: 0, count: 32)
        let rc = withDatum(ikm) { k in withDatum(salt) { s in gnutls_hkdf_extract(GNUTLS_MAC_SHA256, &k, &s, &prk) } }
        // Fails only for an unknown MAC: SHA-256 is always there.
        precondition(rc >= 0, "GnuTLS cannot run HKDF-SHA-256 (\(rc))")
        return prk
    }

    /// HKDF-Expand: `count` bytes (at most 255 × 32) of `prk` for `info`.
    public static func expand(prk: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let rc = withDatum(prk) { k in withDatum(info) { i in gnutls_hkdf_expand(GNUTLS_MAC_SHA256, &k, &i, &out, count) } }
        precondition(rc >= 0, "GnuTLS cannot run HKDF-SHA-256 (\(rc))")
        return out
    }
}

/// AES-128-GCM with a 16-byte tag after the ciphertext, one key per value.
public struct AES128GCM: ~Copyable {
    private let handle: gnutls_aead_cipher_hd_t

    /// A cipher under `key` (16 bytes).
    public init(key: [UInt8]) {
        var h: gnutls_aead_cipher_hd_t?
        let rc = withDatum(key) { gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_128_GCM, &$0) }
        // Fails only for a key of the wrong length (the callers derive 16 bytes) or no memory.
        guard rc >= 0, let h else { preconditionFailure("GnuTLS cannot set up AES-128-GCM (\(rc))") }
        handle = h
    }

    deinit { gnutls_aead_cipher_deinit(handle) }

    /// `plaintext` encrypted under `nonce` (12 bytes), with its tag appended.
    public func seal(_ plaintext: [UInt8], nonce: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var n = out.count
        let rc = gnutls_aead_cipher_encrypt(handle, nonce, nonce.count, nil, 0, 16, plaintext, plaintext.count, &out, &n)
        precondition(rc >= 0, "GnuTLS cannot encrypt with AES-128-GCM (\(rc))")
        return Array(out[0..<n])
    }

    /// The plaintext of `sealed` (ciphertext and tag) under `nonce`, or nil when the tag does not
    /// match (wrong key, or altered bytes).
    public func open(_ sealed: ArraySlice<UInt8>, nonce: [UInt8]) -> [UInt8]? {
        guard sealed.count >= 16 else { return nil }
        var out = [UInt8](repeating: 0, count: sealed.count)
        var n = out.count
        let rc = sealed.withUnsafeBufferPointer { c in
            gnutls_aead_cipher_decrypt(handle, nonce, nonce.count, nil, 0, 16, c.baseAddress, c.count, &out, &n)
        }
        return rc >= 0 ? Array(out[0..<n]) : nil
    }
}

/// `count` random bytes from GnuTLS's generator.
public func randomBytes(_ count: Int) throws(TLSError) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    let rc = gnutls_rnd(GNUTLS_RND_RANDOM, &out, count)
    guard rc >= 0 else { throw TLSError("no random bytes", rc) }
    return out
}
