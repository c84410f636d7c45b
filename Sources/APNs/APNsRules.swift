public import FCMCore
// The rules of an APNs send request (docs/spec/apns.md section 2) with no I/O: the headers, the
// device token in the path, the payload. The route applies them in the contract's order (path,
// method, authentication, headers, device token, topic against key and device, body, size),
// each refusal an `APNsError`.

/// `apns-push-type`, with the topic suffix each one requires.
public enum APNsPushType: String, Sendable, CaseIterable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls

    /// What the topic must end with after the bundle id (empty: the bare bundle id).
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .location: return ".location-query"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// Largest payload in bytes: 5,120 for VoIP, 4,096 for every other type.
    public var maxPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// Every suffix some push type requires, longest first (so `.voip-ptt` is not read as `.voip`).
    static let suffixes: [String] = Set(allCases.map(\.topicSuffix)).filter { !$0.isEmpty }.sorted { $0.count > $1.count }
    /// The same as bytes.
    static let suffixBytes: [[UInt8]] = suffixes.map { Array($0.utf8) }
}

/// A send's headers once they passed every rule, with Apple's defaults filled in.
public struct APNsHeaders: Sendable, Equatable {
    public var pushType: APNsPushType
    /// The sender's `apns-id`, as sent (nil: the answer's id is generated).
    public var apnsID: String?
    /// UNIX seconds; 0 = deliver now or never; nil = not given.
    public var expiration: Int64?
    public var priority: Int
    /// `apns-topic` as sent (nil: not given, allowed with certificate auth only).
    public var topic: String?
    /// The topic without its push type's suffix: the app's bundle id.
    public var bundleID: String?
    public var collapseID: String?

    /// Most bytes an `apns-collapse-id` may have.
    public static let maxCollapseIDBytes = 64

    /// How long a notification is kept for an offline device without `apns-expiration`, in
    /// seconds (Apple says "a limited period"): 30 days.
    public static let defaultTimeToLive: Int64 = 30 * 86_400

    /// The headers a send reads, in the order their rules run.
    static let names: [StaticString] = ["apns-push-type", "apns-id", "apns-expiration", "apns-priority", "apns-topic", "apns-collapse-id"]

    /// Checks `headers` in the contract's order: `apns-push-type`, `apns-id`, `apns-expiration`,
    /// `apns-priority`, `apns-topic` (required when `topicRequired`, as with token auth),
    /// `apns-collapse-id`, then any of those or `authorization` sent twice. Without a push type,
    /// `alert` when the payload has `aps.alert`, else `background` (read from `body`).
    public static func parse(_ headers: [(name: String, value: String)], body: [UInt8], topicRequired: Bool) throws(APNsError) -> APNsHeaders {
        var payload = APNsBody(body)
        return try parse(headers, body: &payload, topicRequired: topicRequired)
    }

    /// `parse(_:body:topicRequired:)` on a body whose JSON is parsed at most once, here (only
    /// for the push type's default) or by `APNsPayload.check` afterwards.
    public static func parse(_ headers: [(name: String, value: String)], body: inout APNsBody, topicRequired: Bool) throws(APNsError) -> APNsHeaders {
        // One slot a header (in `names`' order), with no array made a send.
        var values: (String?, String?, String?, String?, String?, String?) = (nil, nil, nil, nil, nil, nil)
        var duplicate: String?
        var authorizations = 0
        for h in headers {
            // Names compared as ASCII bytes, either case: no lowercased copy of every header. Every
            // name read here starts with an `a` and has a length of its own (but the two of 13
            // bytes): any other header is passed at its first byte or its length.
            guard let first = h.name.utf8.first, first | 0x20 == UInt8(ascii: "a") else { continue }
            let slot: Int
            switch h.name.utf8.count {
            case 7: slot = 1
            case 10: slot = 4
            case 13: slot = nameIs(h.name, "authorization") ? -1 : 3
            case 14: slot = 0
            case 15: slot = 2
            case 16: slot = 5
            default: continue
            }
            if slot < 0 {
                authorizations += 1
                if authorizations > 1, duplicate == nil { duplicate = "authorization" }
                continue
            }
            guard nameIs(h.name, names[slot]) else { continue }
            func put(_ value: inout String?) {
                if value == nil { value = h.value } else if duplicate == nil { duplicate = names[slot].description }
            }
            switch slot {
            case 0: put(&values.0)
            case 1: put(&values.1)
            case 2: put(&values.2)
            case 3: put(&values.3)
            case 4: put(&values.4)
            default: put(&values.5)
            }
        }
        let pushType: APNsPushType
        if let given = values.0 {
            guard let t = APNsPushType(rawValue: given) else {
                throw APNsError(.invalidPushType, "apns-push-type \(quoted(given)) is none of Apple's push types")
            }
            pushType = t
        } else {
            pushType = body.hasAlert ? .alert : .background
        }
        if let id = values.1, !isCanonicalUUID(id) {
            throw APNsError(.badMessageId, "apns-id \(quoted(id)) is not a UUID of the form 8-4-4-4-12")
        }
        var expiration: Int64?
        if let e = values.2 {
            guard !e.isEmpty, e.utf8.count <= 18, e.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int64(e) else {
                throw APNsError(.badExpirationDate, "apns-expiration \(quoted(e)) is not a non-negative whole number of UNIX seconds")
            }
            expiration = n
        }
        var priority = pushType == .background ? 5 : 10
        if let p = values.3 {
            guard let n = Int(p), ["10", "5", "1"].contains(p) else {
                throw APNsError(.badPriority, "apns-priority \(quoted(p)) is not 10, 5 or 1")
            }
            if n == 10, pushType == .background {
                throw APNsError(.badPriority, "apns-priority 10 is not allowed for background pushes (use 5 or 1)")
            }
            priority = n
        }
        var bundleID: String?
        if let topic = values.4 {
            bundleID = try Self.bundleID(topic: topic, pushType: pushType)
        } else if topicRequired {
            throw APNsError(.missingTopic, "apns-topic is required with token authentication")
        }
        if let c = values.5, c.utf8.count > maxCollapseIDBytes {
            throw APNsError(.badCollapseId, "apns-collapse-id has \(c.utf8.count) bytes, over the \(maxCollapseIDBytes) allowed")
        }
        if let duplicate {
            throw APNsError(.duplicateHeaders, "\(duplicate) was sent more than once")
        }
        return APNsHeaders(pushType: pushType, apnsID: values.1, expiration: expiration, priority: priority,
                           topic: values.4, bundleID: bundleID, collapseID: values.5)
    }

    /// The bundle id of `topic` for a push of `pushType`: the topic less the suffix that type
    /// requires. `BadTopic` when the suffix is missing, or when a type without one is given a
    /// topic ending in another type's suffix.
    public static func bundleID(topic: String, pushType: APNsPushType) throws(APNsError) -> String {
        let suffix = pushType.topicSuffix
        // An ASCII topic (every real one) is compared as bytes, read in place once; any other as
        // characters (a character that joins the one after it, before the suffix's `.`, makes
        // it no suffix).
        let asBytes = topic.utf8.withContiguousStorageIfAvailable { t -> (own: Bool, other: String?)? in
            guard isASCII(t) else { return nil }
            func ends(in s: [UInt8]) -> Bool {
                guard t.count >= s.count else { return false }
                var (i, j) = (s.count, t.count)
                while i > 0 {
                    i -= 1
                    j -= 1
                    if t[j] != s[i] { return false }
                }
                return true
            }
            if suffix.isEmpty {
                // Every suffix ends in a letter: only those ending in the topic's last byte are compared.
                let last = t.last
                return (true, APNsPushType.suffixBytes.first { $0.last == last && ends(in: $0) }.map { String(decoding: $0, as: UTF8.self) })
            }
            return (ends(in: Array(suffix.utf8)), nil)
        }
        let ends: Bool, other: String?
        if let asBytes, let (own, found) = asBytes {
            (ends, other) = (own, found)
        } else {
            (ends, other) = (topic.hasSuffix(suffix), suffix.isEmpty ? APNsPushType.suffixes.first(where: topic.hasSuffix) : nil)
        }
        if suffix.isEmpty {
            if topic.isEmpty { throw APNsError(.badTopic, "apns-topic is empty") }
            if let other {
                throw APNsError(.badTopic, "apns-topic \(quoted(topic)) ends in \(other), which a \(pushType.rawValue) push does not take")
            }
            return topic
        }
        guard ends, topic.utf8.count > suffix.utf8.count else {
            throw APNsError(.badTopic, "a \(pushType.rawValue) push needs a topic ending in \(suffix); got \(quoted(topic))")
        }
        // `.voip` is a suffix of nothing else, but `.voip-ptt` ends differently: checked above.
        return String(topic.dropLast(suffix.count))
    }

}

/// A send's body, read as a JSON object the first time a rule asks: the push type's default
/// (`aps.alert`) and the payload's rule share the one reading. An object is kept as its compact
/// text, which is what the record keeps: read in one pass with no tree built
/// (`JSONParser.compactObject`), or, for the shapes that pass leaves to the parser, parsed and
/// written compact; the text is the same either way.
public struct APNsBody: Sendable {
    public let bytes: [UInt8]
    private var read: (text: [UInt8], hasAlert: Bool)??

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The body as a JSON object's compact text, and whether its `aps` has an `alert`; nil when
    /// it is empty or not a JSON object.
    public mutating func object() -> (text: [UInt8], hasAlert: Bool)? {
        if let read { return read }
        let made: (text: [UInt8], hasAlert: Bool)?
        if bytes.isEmpty {
            made = nil
        } else if let compact = JSONParser.compactObject(bytes, probe: ("aps", "alert")) {
            made = (compact.text, compact.hasProbe)
        } else if let parsed = try? JSONParser.parse(bytes).objectValue {
            var text: [UInt8] = []
            appendJSONValue(.object(parsed), to: &text)
            made = (text, parsed["aps"]?.objectValue?["alert"] != nil)
        } else {
            made = nil
        }
        read = .some(made)
        return made
    }

    /// Whether the payload is a JSON object whose `aps` has an `alert`.
    var hasAlert: Bool {
        mutating get { object()?.hasAlert ?? false }
    }
}

/// The payload's rules: not empty, at most the push type's limit. A body that is not a JSON
/// object is accepted (Apple does not parse it) and the result says so.
public enum APNsPayload {
    /// The payload as a JSON object's compact text, or nil when it is not one (accepted, but
    /// undeliverable).
    public static func check(_ body: [UInt8], pushType: APNsPushType) throws(APNsError) -> [UInt8]? {
        var payload = APNsBody(body)
        return try check(&payload, pushType: pushType)
    }

    /// The same on a body the header rules may have parsed already.
    public static func check(_ body: inout APNsBody, pushType: APNsPushType) throws(APNsError) -> [UInt8]? {
        let count = body.bytes.count
        if count == 0 { throw APNsError(.payloadEmpty, "the request has no payload") }
        let limit = pushType.maxPayloadBytes
        if count > limit {
            throw APNsError(.payloadTooLarge, "the payload has \(count) bytes, over the \(limit) a \(pushType.rawValue) push may have")
        }
        return body.object()?.text
    }
}

extension APNsDeviceToken {
    /// `MissingDeviceToken` when empty, `BadDeviceToken` when not of the form.
    static func check(_ token: String) throws(APNsError) {
        if token.isEmpty { throw APNsError(.missingDeviceToken, "the path names no device token") }
        guard isWellFormed(token) else {
            throw APNsError(.badDeviceToken, "a device token is 64 to 200 hexadecimal characters, an even number")
        }
    }
}

extension APNsEnvironment {
    /// Apple's host names and the environment each serves.
    public static let hosts: [(String, APNsEnvironment)] = [
        ("api.push.apple.com", .production),
        ("api.sandbox.push.apple.com", .sandbox),
        ("api.development.push.apple.com", .sandbox),
    ]

    /// The environment of a request to `host` (`:authority` or `Host`, a port allowed): Apple's
    /// host names pick theirs; any other host gets `fallback` (`--apns-environment`).
    public static func of(host: String?, fallback: APNsEnvironment) -> APNsEnvironment {
        guard let host else { return fallback }
        // An ASCII host (every real one) is read as bytes, with no lowercased copy.
        let ascii = host.utf8.withContiguousStorageIfAvailable { b -> APNsEnvironment? in
            guard isASCII(b) else { return nil }
            var end = b.count
            if let colon = b.lastIndex(of: UInt8(ascii: ":")), b.last != UInt8(ascii: "]") { end = colon }
            if end > 0, b[end - 1] == UInt8(ascii: ".") { end -= 1 }
            let name = UnsafeBufferPointer(rebasing: b[..<end])
            return hosts.first(where: { equalsLowercaseASCII(name, $0.0) })?.1 ?? fallback
        }
        if let ascii, let environment = ascii { return environment }
        var h = host.lowercased()
        if let colon = h.lastIndex(of: ":"), !h.hasSuffix("]") { h = String(h[..<colon]) }
        if h.hasSuffix(".") { h.removeLast() }
        return hosts.first(where: { $0.0 == h })?.1 ?? fallback
    }
}

