/// A JSON Web Token as OAuth 2.0 service accounts send them (RFC 7519, compact form), taken apart
/// and checked for shape: the signature itself is verified by the TLS layer's RSA key, with
/// `signingInput` and `signature`. Only RS256 is accepted, and only with a `kid` (the service
/// account's `private_key_id`, which names the key to verify with): `alg: none`, an HMAC signed
/// with the public key as its secret, and every other algorithm are refused before any key is
/// looked at.
public struct JWT: Sendable {
    /// Longest token taken (bytes): a service account's assertion is under 1 KiB.
    public static let maxBytes = 8192

    /// The header's `kid`.
    public let keyID: String
    /// The claims.
    public let claims: JSONObject
    /// `base64url(header) "." base64url(claims)`: the bytes the signature covers.
    public let signingInput: [UInt8]
    /// The signature's bytes (an RSA PKCS #1 v1.5 signature over SHA-256 of `signingInput`).
    public let signature: [UInt8]

    /// Why a token is not a JWT this server takes.
    public enum Failure: Error, Sendable, Equatable {
        /// Over `maxBytes`.
        case tooLong
        /// Not three base64url parts, or a part that is not JSON of an object.
        case malformed(String)
        /// `alg` other than RS256 (the value, or "missing").
        case unsupportedAlgorithm(String)
        /// No `kid` in the header.
        case missingKeyID
    }

    /// Takes a compact JWT apart; nothing is verified yet but its shape and algorithm.
    public static func parse(_ token: String) throws(Failure) -> JWT {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxBytes else { throw .tooLong }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("a JWT has three parts separated by dots") }
        guard let headerBytes = base64URLDecode(parts[0]), let claimBytes = base64URLDecode(parts[1]),
            let signature = base64URLDecode(parts[2])
        else { throw .malformed("a part is not base64url") }
        guard let header = try? JSONParser.parse(headerBytes).objectValue else { throw .malformed("the header is not a JSON object") }
        guard let alg = header["alg"]?.stringValue, alg == "RS256" else {
            throw .unsupportedAlgorithm(header["alg"]?.stringValue ?? "missing")
        }
        guard let kid = header["kid"]?.stringValue, !kid.isEmpty else { throw .missingKeyID }
        guard let claims = try? JSONParser.parse(claimBytes).objectValue else { throw .malformed("the claims are not a JSON object") }
        guard !signature.isEmpty else { throw .malformed("the signature is empty") }
        return JWT(keyID: kid, claims: claims, signingInput: Array(bytes[..<parts[1].endIndex]), signature: signature)
    }

    /// A claim that is a whole number of seconds (`iat`, `exp`), or nil.
    public func seconds(_ claim: String) -> Int64? {
        claims[claim]?.numberValue?.int64
    }
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
