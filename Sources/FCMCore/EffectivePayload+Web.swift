// The Web Push message a browser's service worker receives (docs/effective-payloads.md "Web").

extension EffectivePayload {
    /// Header names the web form sets first, in the order it shows them.
    static let webHeaderOrder = ["ttl", "topic", "urgency"]

    /// `{"platform":"web","webpush":{"headers":{…},"data":{…},"notification":{…}}}`. Headers: each
    /// as the webpush block gives it (names matched ignoring case), else `TTL` the effective TTL,
    /// and for a legacy send `Topic` its `collapse_key` and `Urgency` its priority (`high`,
    /// `normal`); then any other header given. Data and notification are the message's,
    /// overlaid by the webpush block's; `fcm_options.link` is shown when given.
    public static func web(_ req: SendRequest) -> JSONObject {
        let block = req.platforms?.webpush
        let given = block?["headers"]?.objectValue
        let legacy = req.platforms == nil
        let options = deliveryOptions(req, for: .web, acceptedAtMillis: 0)

        var headers = JSONObject()
        headers["TTL"] = header(given, "TTL") ?? .string(String(options.ttlSeconds))
        headers["Topic"] = header(given, "Topic") ?? (legacy ? options.collapseKey.map(JSONValue.string) : nil)
        headers["Urgency"] = header(given, "Urgency") ?? (legacy ? .string(req.effectivePriority.rawValue) : nil)
        for m in given?.members ?? [] where !webHeaderOrder.contains(m.key.lowercased()) {
            headers[m.key] = m.value
        }
        var webpush = JSONObject([
            ("headers", .object(headers)),
            ("data", overlay(req.data, block?["data"]?.objectValue).map(JSONValue.object) ?? .null),
            ("notification", overlay(req.notification, block?["notification"]?.objectValue).map(JSONValue.object) ?? .null),
        ])
        if let link = block?["fcm_options"]?.objectValue?["link"] {
            webpush["fcm_options"] = .object(JSONObject([("link", link)]))
        }
        return JSONObject([("platform", .string("web")), ("webpush", .object(webpush))])
    }
}
