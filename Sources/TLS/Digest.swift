// SHA-256 from GnuTLS (already linked for TLS and RS256), for what must name content by its
// hash: the web page's Content-Security-Policy lists a `'sha256-…'` source per inline block.

import CGnuTLS

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// The 32-byte digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let rc = bytes.withUnsafeBytes { b in
            out.withUnsafeMutableBytes { o in gnutls_hash_fast(GNUTLS_DIG_SHA256, b.baseAddress, b.count, o.baseAddress) }
        }
        // Only an unknown algorithm or a library without SHA-256 fails: neither can be running.
        precondition(rc >= 0, "GnuTLS cannot compute SHA-256 (\(rc))")
        return out
    }
}
