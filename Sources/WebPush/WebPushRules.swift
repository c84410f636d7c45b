public import FCMCore
// The rules of a Web Push request (docs/spec/webpush.md sections 2 and 3) with no I/O: the
// headers of `POST /wp/{id}` (RFC 8030 §5), the size limit, the two spellings of VAPID's
// `Authorization` (RFC 8292 §3 and the older draft's `WebPush` + `Crypto-Key: p256ecdsa=`) and
// the claims of its JWT. Each refusal is a `WebPushError`; the route applies them in the
// contract's order.

/// RFC 8030 §5.3: how urgently the user agent wants the message.
public enum WebPushUrgency: String, Sendable, CaseIterable {
    case veryLow = "very-low", low, normal, high
}

/// The content coding of a push's body.
public enum WebPushEncoding: String, Sendable, CaseIterable {
    /// RFC 8291 over RFC 8188: salt, record size and the sender's key in the body's header.
    case aes128gcm
    /// The older draft: `Encryption: salt=…` and `Crypto-Key: dh=…` beside the body.
    case aesgcm
}

/// A push's headers once they passed every rule.
public struct WebPushHeaders: Sendable, Equatable {
    /// The TTL kept: as sent, or lowered to `maxTTL`.
    public var ttl: Int64
    /// The TTL as sent (above `maxTTL` when it was lowered).
    public var sentTTL: Int64
    public var urgency: WebPushUrgency
    /// Whether `Urgency` was sent (absent: `normal`, recorded as such).
    public var urgencyGiven: Bool
    public var topic: String?
    /// The body's coding; nil for a push without a body.
    public var encoding: WebPushEncoding?
    /// `Encryption` and `Crypto-Key` as sent (the `aesgcm` parameters, and the older VAPID key).
    public var encryption: String?
    public var cryptoKey: String?
    public var authorization: String?

    /// Four weeks: a larger TTL is lowered to it.
    public static let maxTTL: Int64 = 2_419_200
    /// Longest `Topic`.
    public static let maxTopicLength = 32
    /// The largest body: the encrypted record with its header (RFC 8030 §7.2 lets a service
    /// refuse more than 4,096 bytes, and Chrome's and Firefox's do).
    public static let maxBodyBytes = 4096

    /// Checks the headers in the contract's order: `TTL`, `Content-Encoding` (when the body is
    /// not empty), `Urgency`, `Topic`. Repeated fields are read as one value joined with ", "
    /// (as HTTP does), which no rule accepts.
    public static func parse(_ headers: [(name: String, value: String)], bodyBytes: Int) throws(WebPushError) -> WebPushHeaders {
        func value(_ name: String) -> String? {
            var out: String?
            for h in headers where equalsLowercaseASCII(h.name, name) {
                out = out.map { $0 + ", " + h.value } ?? h.value
            }
            return out?.trimmingSpaces()
        }
        guard let ttlText = value("ttl") else {
            throw WebPushError(.missingTTL, "the TTL header is required: the seconds the push service may keep the message")
        }
        let sent = try ttl(ttlText)
        var encoding: WebPushEncoding?
        if bodyBytes > 0 {
            guard let given = value("content-encoding") else {
                throw WebPushError(.invalidEncoding, "a body needs Content-Encoding aes128gcm (RFC 8291) or aesgcm")
            }
            guard let e = WebPushEncoding(rawValue: given.lowercased()) else {
                throw WebPushError(.invalidEncoding, "Content-Encoding \(quoted(given)) is neither aes128gcm nor aesgcm")
            }
            encoding = e
        }
        var urgency = WebPushUrgency.normal
        let urgencyText = value("urgency")
        if let u = urgencyText {
            guard let parsed = WebPushUrgency(rawValue: u.lowercased()) else {
                throw WebPushError(.invalidUrgency, "Urgency \(quoted(u)) is none of very-low, low, normal, high")
            }
            urgency = parsed
        }
        let topic = value("topic")
        if let t = topic { try checkTopic(t) }
        return WebPushHeaders(ttl: min(sent, maxTTL), sentTTL: sent, urgency: urgency, urgencyGiven: urgencyText != nil,
                              topic: topic, encoding: encoding, encryption: value("encryption"), cryptoKey: value("crypto-key"),
                              authorization: value("authorization"))
    }

    /// A `TTL` value: decimal digits only, not negative; one too large for 64 bits counts as the
    /// largest (it is lowered to the most the service keeps, as any large one).
    static func ttl(_ text: String) throws(WebPushError) -> Int64 {
        if text.hasPrefix("-"), text.utf8.count > 1, text.utf8.dropFirst().allSatisfy(isDigit) {
            throw WebPushError(.invalidTTL, "TTL \(quoted(text)) is negative")
        }
        guard !text.isEmpty, text.utf8.allSatisfy(isDigit) else {
            throw WebPushError(.invalidTTL, "TTL \(quoted(text)) is not a whole number of seconds")
        }
        return Int64(text) ?? Int64.max
    }

    /// A `Topic`: 1 to 32 characters of the base64url alphabet (RFC 8030 §5.4).
    static func checkTopic(_ t: String) throws(WebPushError) {
        guard !t.isEmpty, t.utf8.count <= maxTopicLength, t.utf8.allSatisfy(isBase64URL) else {
            throw WebPushError(.invalidTopic, "Topic \(quoted(t)) is not 1 to 32 characters of the base64url alphabet (A-Z a-z 0-9 - _)")
        }
    }

    /// `payloadTooLarge` for a body over `maxBodyBytes` (`overServerLimit`: the server
    /// discarded it, so its size is not known).
    public static func checkSize(_ bytes: Int, overServerLimit: Bool) throws(WebPushError) {
        if overServerLimit {
            throw WebPushError(.payloadTooLarge, "the body is over the \(maxBodyBytes) bytes a push may carry")
        }
        if bytes > maxBodyBytes {
            throw WebPushError(.payloadTooLarge, "the body has \(bytes) bytes, over the \(maxBodyBytes) a push may carry")
        }
    }
}

/// What a VAPID `Authorization` header carries: the JWT and the public key it claims.
public struct VAPIDCredential: Sendable, Equatable {
    /// The compact JWT as sent.
    public var token: String
    /// The public key as sent (base64url of the 65-byte uncompressed point).
    public var key: String
    /// Which spelling it came in.
    public var scheme: Scheme

    public enum Scheme: String, Sendable {
        /// RFC 8292: `vapid t=<JWT>, k=<key>`.
        case vapid
        /// The older draft: `WebPush <JWT>` with `Crypto-Key: p256ecdsa=<key>`.
        case webpush = "WebPush"
    }

    /// Longest `Authorization` taken: a JWT (at most `JWT.maxBytes`) and a key.
    public static let maxHeaderBytes = JWT.maxBytes + 256

    /// The credential of `authorization` (with `cryptoKey` for the older scheme); nil when there
    /// is no `Authorization`. Either spelling of RFC 8292's (`t=…, k=…` or `t=…,k=…`, any
    /// order, the scheme in any case); the older scheme's `Crypto-Key` may join its parameters
    /// with `;` or `,`. Anything else is `unauthorized`.
    public static func parse(authorization: String?, cryptoKey: String?) throws(WebPushError) -> VAPIDCredential? {
        guard let header = authorization else { return nil }
        guard header.utf8.count <= maxHeaderBytes else {
            throw WebPushError(.unauthorized, "the Authorization header has \(header.utf8.count) bytes, over the \(maxHeaderBytes) a VAPID one needs")
        }
        let h = header.trimmingSpaces()
        if hasPrefixIgnoringCase(h.utf8, "vapid "), h.utf8.count > 6 {
            let params = parameters(String(h.dropFirst(6)), separators: [","])
            guard let t = params["t"], !t.isEmpty else {
                throw WebPushError(.unauthorized, "the vapid Authorization has no t=<JWT>")
            }
            guard let k = params["k"], !k.isEmpty else {
                throw WebPushError(.unauthorized, "the vapid Authorization has no k=<public key>")
            }
            return VAPIDCredential(token: t, key: k, scheme: .vapid)
        }
        if hasPrefixIgnoringCase(h.utf8, "webpush "), h.utf8.count > 8 {
            let token = String(h.dropFirst(8)).trimmingSpaces()
            guard let cryptoKey, let k = parameters(cryptoKey, separators: [";", ","])["p256ecdsa"], !k.isEmpty else {
                throw WebPushError(.unauthorized, "the WebPush Authorization needs Crypto-Key: p256ecdsa=<public key>")
            }
            return VAPIDCredential(token: token, key: k, scheme: .webpush)
        }
        throw WebPushError(.unauthorized, "the Authorization header is neither 'vapid t=<JWT>, k=<key>' nor 'WebPush <JWT>'")
    }

    /// `name=value` pairs split at `separators` (spaces around them ignored, quotes taken off,
    /// the first of each name kept; names in lowercase).
    static func parameters(_ text: String, separators: Set<Character>) -> [String: String] {
        var out: [String: String] = [:]
        for part in text.split(whereSeparator: { separators.contains($0) }) {
            guard let eq = part.firstIndex(of: "=") else { continue }
            let name = String(part[..<eq]).trimmingSpaces().lowercased()
            var v = String(part[part.index(after: eq)...]).trimmingSpaces()
            if v.utf8.count >= 2, v.hasPrefix("\""), v.hasSuffix("\"") { v = String(v.dropFirst().dropLast()) }
            if out[name] == nil { out[name] = v }
        }
        return out
    }
}

/// The claims a VAPID JWT must carry (RFC 8292 §2).
public enum VAPIDClaims {
    /// How far ahead `exp` may be: 24 hours.
    public static let maxLifetimeSeconds: Int64 = 86_400

    /// The subject (`sub`) of a JWT whose `aud` is `audience` (an origin; a trailing `/` and
    /// the case of scheme and host are forgiven), `exp` after `now` and at most 24 hours ahead
    /// (seconds on the mock's clock), and `sub` a `mailto:` or `https:` URI.
    public static func check(_ jwt: JWT, audience: String, now: Int64) throws(WebPushError) -> String {
        guard let aud = jwt.claims["aud"]?.stringValue else {
            throw WebPushError(.unauthorized, "the VAPID JWT has no aud: it must be the push service's origin, \(audience)")
        }
        try checkTimely(aud: aud, exp: jwt.seconds("exp"), audience: audience, now: now)
        guard let sub = jwt.claims["sub"]?.stringValue, !sub.isEmpty else {
            throw WebPushError(.unauthorized, "the VAPID JWT has no sub: a mailto: or https: contact is required")
        }
        guard hasPrefixIgnoringCase(sub.utf8, "mailto:") || hasPrefixIgnoringCase(sub.utf8, "https:") else {
            throw WebPushError(.unauthorized, "the VAPID JWT's sub \(quoted(sub)) is neither a mailto: nor an https: URI")
        }
        return sub
    }

    /// The checks that depend on the push and the clock, not on the token alone: `aud` is
    /// `audience` (by `origin`), `exp` is there, after `now` and at most 24 hours ahead (seconds
    /// on the mock's clock). `check` runs them on a new JWT, and the engine again on every push
    /// with a JWT it verified before.
    public static func checkTimely(aud: String, exp: Int64?, audience: String, now: Int64) throws(WebPushError) {
        guard origin(aud) == origin(audience) else {
            throw WebPushError(.unauthorized, "the VAPID JWT's aud \(quoted(aud)) is not the endpoint's origin \(audience)")
        }
        guard let exp else {
            throw WebPushError(.unauthorized, "the VAPID JWT has no exp of whole seconds")
        }
        if exp <= now {
            throw WebPushError(.unauthorized, "the VAPID JWT expired \(now - exp) s ago on the mock's clock")
        }
        if exp - now > maxLifetimeSeconds {
            throw WebPushError(.unauthorized, "the VAPID JWT's exp is \(exp - now) s ahead: at most 24 hours (86400 s)")
        }
    }

    /// An origin compared as RFC 6454 does for these: scheme and host without case, no final
    /// `/`, the scheme's default port left out (`Host: fcm.googleapis.com:443` is the origin
    /// `https://fcm.googleapis.com`).
    public static func origin(_ s: String) -> String {
        var o = s.lowercased()
        while o.hasSuffix("/") { o.removeLast() }
        if o.hasPrefix("https://"), o.hasSuffix(":443") { o.removeLast(4) }
        if o.hasPrefix("http://"), o.hasSuffix(":80") { o.removeLast(3) }
        return o
    }
}
