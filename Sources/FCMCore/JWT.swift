/// A JSON Web Token (RFC 7519, compact form) taken apart and checked for shape: the signature
/// itself is verified by the TLS layer's keys, with `signingInput` and `signature`. The caller
/// says which algorithm it expects, and only that one is accepted: RS256 for Google's service
/// accounts, ES256 for APNs provider tokens and VAPID. `alg: none`, HMACs (which a verifier
/// could be tricked into keying with a public key) and every other algorithm are refused before
/// any key is looked at.
public struct JWT: Sendable {
    /// Longest token taken (bytes): a service account's assertion is under 1 KiB.
    public static let maxBytes = 8192

    /// The signature algorithms a caller can expect.
    public enum Algorithm: String, Sendable {
        /// RSASSA-PKCS1-v1_5 with SHA-256: OAuth 2.0 service accounts.
        case rs256 = "RS256"
        /// ECDSA on P-256 with SHA-256, the signature as r and s (64 bytes): APNs provider
        /// tokens, VAPID (RFC 8292).
        case es256 = "ES256"
    }

    /// The algorithm, as the header names it (the one the caller expected).
    public let algorithm: Algorithm
    /// The header's `kid` (the service account's `private_key_id`, the APNs key id); empty when
    /// the header has none and the caller did not require one (VAPID tokens carry none).
    public let keyID: String
    /// The claims.
    public let claims: JSONObject
    /// `base64url(header) "." base64url(claims)`: the bytes the signature covers.
    public let signingInput: [UInt8]
    /// The signature's bytes (RS256: an RSA PKCS #1 v1.5 signature; ES256: r and s, 32 bytes
    /// each), over SHA-256 of `signingInput`.
    public let signature: [UInt8]

    /// Why a token is not a JWT this server takes.
    public enum Failure: Error, Sendable, Equatable {
        /// Over `maxBytes`.
        case tooLong
        /// Not three base64url parts, or a part that is not JSON of an object.
        case malformed(String)
        /// `alg` other than the one expected (the value, or "missing").
        case unsupportedAlgorithm(String)
        /// No `kid` in the header, and the caller requires one.
        case missingKeyID
        /// A signature of the wrong length for the algorithm (ES256: 64 bytes).
        case signatureLength(expected: Int, got: Int)
    }

    /// Takes a compact JWT apart; nothing is verified yet but its shape and algorithm, which
    /// must be `algorithm` (RS256 unless said). A `kid` is required unless `requiringKeyID` is
    /// false.
    public static func parse(_ token: String, algorithm: Algorithm = .rs256,
                             requiringKeyID: Bool = true) throws(Failure) -> JWT {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxBytes else { throw .tooLong }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("a JWT has three parts separated by dots") }
        guard let headerBytes = base64URLDecode(parts[0]), let claimBytes = base64URLDecode(parts[1]),
            let signature = base64URLDecode(parts[2])
        else { throw .malformed("a part is not base64url") }
        guard let header = try? JSONParser.parse(headerBytes).objectValue else { throw .malformed("the header is not a JSON object") }
        guard let alg = header["alg"]?.stringValue, alg == algorithm.rawValue else {
            throw .unsupportedAlgorithm(header["alg"]?.stringValue ?? "missing")
        }
        // RFC 7515 §4.1.11: extensions marked critical must be understood; this server knows none.
        guard header["crit"] == nil else { throw .malformed("the header names critical extensions (crit)") }
        let kid: String
        if let k = header["kid"]?.stringValue, !k.isEmpty {
            kid = k
        } else if requiringKeyID || header["kid"] != nil {
            throw .missingKeyID
        } else {
            kid = ""
        }
        guard let claims = try? JSONParser.parse(claimBytes).objectValue else { throw .malformed("the claims are not a JSON object") }
        guard !signature.isEmpty else { throw .malformed("the signature is empty") }
        if algorithm == .es256, signature.count != 64 { throw .signatureLength(expected: 64, got: signature.count) }
        return JWT(algorithm: algorithm, keyID: kid, claims: claims, signingInput: Array(bytes[..<parts[1].endIndex]),
                   signature: signature)
    }

    /// A claim that is a whole number of seconds (`iat`, `exp`), or nil. Kept within
    /// ±`secondsBound` (about 34,800 years either side of 1970), so the checks' sums, differences
    /// and milliseconds cannot overflow however large the number a token carries; every such
    /// time is far past or far ahead all the same.
    public func seconds(_ claim: String) -> Int64? {
        claims[claim]?.numberValue?.int64.map { min(max($0, -Self.secondsBound), Self.secondsBound) }
    }

    public static let secondsBound: Int64 = 1 << 40
}

/// base64url without padding (RFC 4648 §5), as JWTs use it; padding is accepted too.
public func base64URLEncode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    let alphabet = base64URL
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count * 4 + 2) / 3)
    var it = bytes.makeIterator()
    while let a = it.next() {
        let b = it.next(), c = it.next()
        let n = UInt32(a) << 16 | UInt32(b ?? 0) << 8 | UInt32(c ?? 0)
        out.append(alphabet[Int(n >> 18 & 63)])
        out.append(alphabet[Int(n >> 12 & 63)])
        if b != nil { out.append(alphabet[Int(n >> 6 & 63)]) }
        if c != nil { out.append(alphabet[Int(n & 63)]) }
    }
    return String(decoding: out, as: UTF8.self)
}

/// The same for an array, written straight into the string's storage: callers in other modules
/// get this one rather than the generic one, which would run unspecialized there (a relayed
/// push's body went through it at about 460 instructions a byte).
public func base64URLEncode(_ bytes: [UInt8]) -> String {
    let count = bytes.count / 3 * 4 + [0, 2, 3][bytes.count % 3]
    return bytes.withUnsafeBufferPointer { src in
        base64URL.withUnsafeBufferPointer { alphabet in
            String(unsafeUninitializedCapacity: count) { out in
                var i = 0, o = 0
                while i + 3 <= src.count {
                    let n = UInt32(src[i]) << 16 | UInt32(src[i + 1]) << 8 | UInt32(src[i + 2])
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    out[o + 2] = alphabet[Int(n >> 6 & 63)]
                    out[o + 3] = alphabet[Int(n & 63)]
                    i += 3
                    o += 4
                }
                let left = src.count - i
                if left > 0 {
                    let n = UInt32(src[i]) << 16 | (left > 1 ? UInt32(src[i + 1]) << 8 : 0)
                    out[o] = alphabet[Int(n >> 18 & 63)]
                    out[o + 1] = alphabet[Int(n >> 12 & 63)]
                    o += 2
                    if left > 1 {
                        out[o] = alphabet[Int(n >> 6 & 63)]
                        o += 1
                    }
                }
                return o
            }
        }
    }
}

/// Decodes base64url (or standard base64: `+` and `/` are taken too), with or without padding;
/// nil for any other byte or an impossible length.
public func base64URLDecode<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
    var out: [UInt8] = []
    out.reserveCapacity(text.count * 3 / 4)
    var acc: UInt32 = 0
    var bits = 0
    var padding = 0
    for ch in text {
        let v: UInt32
        switch ch {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(ch - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(ch - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(ch - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "-"), UInt8(ascii: "+"): v = 62
        case UInt8(ascii: "_"), UInt8(ascii: "/"): v = 63
        case UInt8(ascii: "="):
            padding += 1
            continue
        default: return nil
        }
        if padding > 0 { return nil }  // data after padding
        acc = acc << 6 | v
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
        }
    }
    // A lone sixth of a byte (one character of a group of four) encodes nothing: malformed.
    if bits >= 6 || padding > 2 { return nil }
    return out
}
