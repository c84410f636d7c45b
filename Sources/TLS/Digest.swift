// SHA-256 and SHA-1 from GnuTLS (already linked for TLS and RS256), for what must name content by
// its hash: the web page's Content-Security-Policy lists a `'sha256-…'` source per inline block,
// and a WebSocket handshake's `Sec-WebSocket-Accept` is the SHA-1 of the client's key (RFC 6455
// §4.2.2; SHA-1 there proves only that the server read the key, so its weakness does not matter).

import CGnuTLS

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// The 32-byte digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        hashFast(GNUTLS_DIG_SHA256, bytes, size: 32, name: "SHA-256")
    }
}

/// SHA-1 (FIPS 180-4), for protocols that name it (the WebSocket handshake), never for security.
public enum SHA1 {
    /// The 20-byte digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        hashFast(GNUTLS_DIG_SHA1, bytes, size: 20, name: "SHA-1")
    }
}

private func hashFast(_ algorithm: gnutls_digest_algorithm_t, _ bytes: [UInt8], size: Int, name: String) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: size)
    let rc = bytes.withUnsafeBytes { b in
        out.withUnsafeMutableBytes { o in gnutls_hash_fast(algorithm, b.baseAddress, b.count, o.baseAddress) }
    }
    // Only an unknown algorithm or a library without it fails: neither can be running.
    precondition(rc >= 0, "GnuTLS cannot compute \(name) (\(rc))")
    return out
}
