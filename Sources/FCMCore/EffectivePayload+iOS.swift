// FCM's iOS form: the APNs request an iOS device's FCM message becomes (docs/effective-payloads.md
// "iOS"), beside the web form (EffectivePayload+Web.swift). A rule of FCM's, which every room's
// sends to an iOS device share; what the APNs room keeps of its own sends is APNs/APNsRecordBlock.swift.

extension EffectivePayload {
    /// Header names the iOS form always sets, in the order it shows them.
    static let apnsHeaderOrder = ["apns-priority", "apns-expiration", "apns-collapse-id", "apns-push-type"]

    /// Legacy notification fields and the `aps.alert` keys FCM maps them to (as firebase-admin's
    /// legacy payload reference documents: `body_loc_key` is APNs' `loc-key`, and so on).
    static let alertKeys: [(String, String)] = [
        ("title", "title"), ("subtitle", "subtitle"), ("body", "body"),
        ("title_loc_key", "title-loc-key"), ("title_loc_args", "title-loc-args"),
        ("body_loc_key", "loc-key"), ("body_loc_args", "loc-args"),
    ]

    /// `{"platform":"ios","apns":{"headers":{…},"payload":{…}}}`. Headers: each as the apns block
    /// gives it (names matched ignoring case), else `apns-priority` 10 when the message shows
    /// something and 5 when it does not (legacy: from `priority`, high 10, normal 5),
    /// `apns-expiration` the accept time plus the TTL (0 for a TTL of 0), `apns-collapse-id` the
    /// legacy `collapse_key`, `apns-push-type` `alert` or `background`; then any other header
    /// given. The payload is built from the notification and data, then overlaid by
    /// `apns.payload`.
    public static func ios(_ req: SendRequest, acceptedAtMillis: Int64) -> JSONObject {
        let apns = req.platforms?.apns
        let given = apns?["headers"]?.objectValue
        let legacy = req.platforms == nil
        let payload = apnsPayload(req)
        let shown = showsSomething(payload["aps"]?.objectValue)
        let options = deliveryOptions(req, for: .ios, acceptedAtMillis: acceptedAtMillis)

        var headers = JSONObject()
        let priority = legacy ? (req.effectivePriority == .high ? "10" : "5") : (shown ? "10" : "5")
        headers["apns-priority"] = header(given, "apns-priority") ?? .string(priority)
        let expiration = options.ttlSeconds == 0 ? 0 : floorSeconds(acceptedAtMillis) + options.ttlSeconds
        headers["apns-expiration"] = header(given, "apns-expiration") ?? .string(String(expiration))
        headers["apns-collapse-id"] = header(given, "apns-collapse-id") ?? (legacy ? options.collapseKey.map(JSONValue.string) : nil)
        headers["apns-push-type"] = header(given, "apns-push-type") ?? .string(shown ? "alert" : "background")
        for m in given?.members ?? [] where !apnsHeaderOrder.contains(m.key.lowercased()) {
            headers[m.key] = m.value
        }
        return JSONObject([
            ("platform", .string("ios")),
            ("apns", .object(JSONObject([("headers", .object(headers)), ("payload", .object(payload))]))),
        ])
    }

    /// `{"aps":{…},…data keys…}`: `aps` from the notification (`alert` from its texts, `badge`,
    /// `sound`, `click_action` as `category`) and the options (`content-available`,
    /// `mutable-content`), the data keys beside it, a notification `image` as
    /// `fcm_options.image` (where the iOS SDK's extension helper reads it); then `apns.payload`:
    /// an `aps.alert` object merged key by key over the built alert, an `aps.alert` string
    /// replacing it, other `aps` keys and top-level keys set; `apns.fcm_options.image` last.
    static func apnsPayload(_ req: SendRequest) -> JSONObject {
        let n = req.notification
        var aps = JSONObject()
        var alert = JSONObject()
        for (from, to) in alertKeys {
            if let v = n?[from] { alert[to] = from.hasSuffix("_args") ? locArgs(v) : v }
        }
        if alert.count > 0 { aps["alert"] = .object(alert) }
        if let v = n?["badge"] { aps["badge"] = badge(v) }
        if let v = n?["sound"] { aps["sound"] = v }
        if let v = n?["click_action"] { aps["category"] = v }
        if req.options.contentAvailable { aps["content-available"] = .number(JSONNumber(1)) }
        if req.options.mutableContent { aps["mutable-content"] = .number(JSONNumber(1)) }

        var payload = JSONObject([("aps", .null)])
        // `aps` is APNs' own key: a data key of that name cannot reach the app.
        for m in req.data?.members ?? [] where m.key != "aps" { payload[m.key] = m.value }
        if let image = n?["image"] { payload["fcm_options"] = .object(JSONObject([("image", image)])) }

        let apns = req.platforms?.apns
        for m in apns?["payload"]?.objectValue?.members ?? [] {
            guard m.key == "aps" else {
                payload[m.key] = m.value
                continue
            }
            // The v1 rules make `aps` an object; anything else is ignored.
            for a in m.value.objectValue?.members ?? [] {
                if a.key == "alert", case .object(let over) = a.value, case .object(let built)? = aps["alert"] {
                    aps["alert"] = .object(overlay(built, over) ?? over)
                } else {
                    aps[a.key] = a.value
                }
            }
        }
        if let image = apns?["fcm_options"]?.objectValue?["image"] {
            var options = payload["fcm_options"]?.objectValue ?? JSONObject()
            options["image"] = image
            payload["fcm_options"] = .object(options)
        }
        payload["aps"] = .object(aps)
        return payload
    }

    /// Whether APNs shows the message to the user: an alert, a badge or a sound (Apple's `alert`
    /// push type); a message with none of them is a background push.
    static func showsSomething(_ aps: JSONObject?) -> Bool {
        guard let aps else { return false }
        switch aps["alert"] {
        case .string(let s)? where !s.isEmpty: return true
        case .object(let o)? where o.count > 0: return true
        default: return aps["badge"] != nil || aps["sound"] != nil
        }
    }

    /// A legacy badge is a string; APNs wants a number.
    static func badge(_ v: JSONValue) -> JSONValue {
        if case .string(let s) = v, let n = Int64(s) { return .number(JSONNumber(n)) }
        return v
    }

    /// Legacy `*_loc_args` may be an array written as a string; APNs wants the array.
    static func locArgs(_ v: JSONValue) -> JSONValue {
        if case .string(let s) = v, case .array(let items)? = try? JSONParser.parse(s, maxDepth: 1) { return .array(items) }
        return v
    }
}
