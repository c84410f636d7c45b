// What a device of each platform receives for a send (docs/spec/fcm-v1.md section 5,
// docs/effective-payloads.md): the payload it sees and the collapse key and TTL its offline
// storage applies. Pure rules on a `SendRequest`, for legacy sends (top-level fields only) and v1
// sends (`platforms` set) alike. The iOS (APNs) form is in EffectivePayload+iOS.swift, the Web Push
// form in EffectivePayload+Web.swift.

/// A device's platform as the delivery rules see it.
public enum PushPlatform: String, Sendable, Equatable, CaseIterable {
    case android, ios, web
}

/// The collapse key and TTL under which one platform holds a message for an offline device.
public struct DeliveryOptions: Sendable, Equatable {
    /// Messages with the same key replace each other while held; nil: not collapsible.
    public var collapseKey: String?
    /// Seconds the message may wait; 0: now or never.
    public var ttlSeconds: Int64

    /// `ttlSeconds` is kept within 0 and `longestTTLSeconds`: a v1 send's `TTL` or
    /// `apns-expiration` may be any 64-bit number, and a message's expiry in milliseconds must
    /// not overflow.
    public init(collapseKey: String?, ttlSeconds: Int64) {
        self.collapseKey = collapseKey
        self.ttlSeconds = min(max(ttlSeconds, 0), Self.longestTTLSeconds)
    }

    /// A century: longer than any store will be asked to hold a message.
    public static let longestTTLSeconds: Int64 = 100 * 365 * 86_400
}

/// The effective payload and delivery options of a send, per platform.
public enum EffectivePayload {
    /// The collapse key and TTL `platform` applies to `req`. A legacy send (no `platforms`) uses
    /// its top-level `collapse_key` and `time_to_live` on every platform and costs no JSON work.
    /// A v1 send uses each platform's own block: android `collapse_key`/`ttl`; APNs
    /// `apns-collapse-id`/`apns-expiration` (epoch seconds, made relative to `acceptedAtMillis`);
    /// Web Push `Topic`/`TTL`. A platform whose block sets nothing keeps a message 4 weeks
    /// without collapsing it.
    public static func deliveryOptions(_ req: SendRequest, for platform: PushPlatform, acceptedAtMillis: Int64) -> DeliveryOptions {
        let legacy = DeliveryOptions(collapseKey: req.options.collapseKey, ttlSeconds: req.options.timeToLive)
        guard let p = req.platforms else { return legacy }
        switch platform {
        case .android:
            let a = p.android
            return DeliveryOptions(collapseKey: a?["collapse_key"]?.stringValue ?? req.options.collapseKey,
                                   ttlSeconds: a?["ttl"].flatMap(durationSeconds) ?? req.options.timeToLive)
        case .ios:
            let headers = p.apns?["headers"]?.objectValue
            let now = floorSeconds(acceptedAtMillis)
            // 0 (or any moment already past): now or never.
            let ttl = header(headers, "apns-expiration").flatMap(integer).map { expiration in
                expiration <= now ? 0 : expiration - now
            }
            return DeliveryOptions(collapseKey: header(headers, "apns-collapse-id")?.stringValue,
                                   ttlSeconds: ttl ?? SendOptions.defaultTimeToLive)
        case .web:
            let headers = p.webpush?["headers"]?.objectValue
            // At most 4 weeks, as a push service keeps a message (webpush.md: a longer TTL is lowered).
            return DeliveryOptions(collapseKey: header(headers, "Topic")?.stringValue,
                                   ttlSeconds: header(headers, "TTL").flatMap(integer).map { min(max(0, $0), SendOptions.defaultTimeToLive) }
                                       ?? SendOptions.defaultTimeToLive)
        }
    }

    /// What a device of `platform` receives, as the inbox shows it under `effective`.
    public static func payload(_ req: SendRequest, for platform: PushPlatform, acceptedAtMillis: Int64) -> JSONObject {
        switch platform {
        case .android: return android(req)
        case .ios: return ios(req, acceptedAtMillis: acceptedAtMillis)
        case .web: return web(req)
        }
    }

    /// `{"platform":"android","data","notification","collapse_key","priority","ttl_s"}`: data and
    /// notification overlaid by the android block's, options from it (legacy: the top-level
    /// ones). `priority` is spelled `normal`/`high` as everywhere in the control API.
    public static func android(_ req: SendRequest) -> JSONObject {
        let a = req.platforms?.android
        // An app reads its data as strings (`RemoteMessage.getData()`): a legacy value that is
        // none arrives as its JSON text, as over MCS.
        let data = overlay(req.data, a?["data"]?.objectValue).map { d in
            d.members.allSatisfy { $0.value.stringValue != nil } ? d
                : JSONObject(d.members.map { ($0.key, .string($0.value.stringValue ?? $0.value.serialized())) })
        }
        let notification = overlay(req.notification, a?["notification"]?.objectValue)
        let options = deliveryOptions(req, for: .android, acceptedAtMillis: 0)
        var priority = req.options.priority ?? (notification != nil ? .high : .normal)
        if let given = a?["priority"]?.stringValue, let p = Priority(rawValue: given.lowercased()) { priority = p }
        return JSONObject([
            ("platform", .string("android")),
            ("data", data.map(JSONValue.object) ?? .null),
            ("notification", notification.map(JSONValue.object) ?? .null),
            ("collapse_key", options.collapseKey.map(JSONValue.string) ?? .null),
            ("priority", .string(priority.rawValue)),
            ("ttl_s", .number(JSONNumber(options.ttlSeconds))),
        ])
    }

    /// The collapse key and priority of the device's own form, `effective` (what `payload`
    /// gives, or a room's own form of it): an Android device's as its form says; an iPhone's from
    /// its APNs headers (`apns-collapse-id`; `apns-priority` 10 is high); a browser's from its
    /// Web Push headers (`Topic`; `Urgency` high is high). Nil for a form of no platform.
    public static func entryOptions(_ effective: JSONObject) -> (collapseKey: String?, priority: String?)? {
        func header(_ block: String, _ name: String) -> String? {
            Self.header(effective[block]?.objectValue?["headers"]?.objectValue, name)?.stringValue
        }
        switch effective["platform"]?.stringValue {
        case "android": return (effective["collapse_key"]?.stringValue, effective["priority"]?.stringValue)
        case "ios": return (header("apns", "apns-collapse-id"), header("apns", "apns-priority") == "10" ? "high" : "normal")
        case "web": return (header("webpush", "topic"), header("webpush", "urgency")?.lowercased() == "high" ? "high" : "normal")
        default: return nil
        }
    }

    // MARK: - Helpers shared by the platform forms

    /// `base` with every member of `over` set on it (a shallow overlay); nil when both are nil.
    static func overlay(_ base: JSONObject?, _ over: JSONObject?) -> JSONObject? {
        guard var out = base else { return over }
        for m in over?.members ?? [] { out[m.key] = m.value }
        return out
    }

    /// A header of `headers` by name, ignoring case as HTTP does.
    static func header(_ headers: JSONObject?, _ name: String) -> JSONValue? {
        guard let headers else { return nil }
        let wanted = lowercasedIfNeeded(name)
        // An ASCII key is compared as bytes, either case, with no lowercased copy of it.
        return headers.members.first { member in
            let ascii = member.key.utf8.withContiguousStorageIfAvailable { b -> Bool? in isASCII(b) ? equalsLowercaseASCII(b, wanted) : nil }
            if let ascii, let same = ascii { return same }
            return member.key.lowercased() == wanted
        }?.value
    }

    /// An integer given as a number or as a decimal string (header values are strings).
    static func integer(_ v: JSONValue) -> Int64? {
        switch v {
        case .number(let n): return n.int64
        case .string(let s): return Int64(s)
        default: return nil
        }
    }

    /// A proto3 duration (`"3.5s"`) or a number of seconds, in whole seconds; a fraction rounds
    /// up, so a TTL that is not zero never becomes "now or never". Nil when malformed.
    static func durationSeconds(_ v: JSONValue) -> Int64? {
        if case .number(let n) = v { return n.int64.flatMap { $0 >= 0 ? $0 : nil } }
        guard case .string(let text) = v, text.hasSuffix("s") else { return nil }
        let parts = text.dropLast().split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit), let seconds = Int64(whole) else { return nil }
        guard parts.count == 2 else { return seconds }
        let fraction = parts[1]
        guard !fraction.isEmpty, fraction.count <= 9, fraction.allSatisfy(\.isASCIIDigit) else { return nil }
        return fraction.contains { $0 != "0" } && seconds < .max ? seconds + 1 : seconds
    }

    /// Whole seconds of a time in milliseconds (rounded down, also before 1970).
    public static func floorSeconds(_ millis: Int64) -> Int64 {
        millis / 1000 - (millis % 1000 < 0 ? 1 : 0)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension EffectivePayload {
    /// The platform blocks as a message record stores them
    /// (`{"android":…,"apns":…,"webpush":…,"fcm_options":…}`); nil when the text is not such an
    /// object. Members that are not objects are left out.
    public static func storedPlatforms(_ json: String) -> PlatformConfigs? {
        guard case .object(let o)? = try? JSONParser.parse(json) else { return nil }
        return PlatformConfigs(android: o["android"]?.objectValue, apns: o["apns"]?.objectValue,
                               webpush: o["webpush"]?.objectValue, fcmOptions: o["fcm_options"]?.objectValue)
    }
}
