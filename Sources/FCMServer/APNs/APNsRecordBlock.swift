import FCMCore

extension APNsRoutes {
    /// What an APNs send's record keeps of its request, as the record's platform blocks:
    /// `{"apns":{"push_type":…,"topic":…,"priority":…,"expiration":…,"collapse_id":…,
    /// "environment":…,"key_id"|"certificate_id":…,"apns_id":…,"apns_unique_id":…,
    /// "headers":{…},"payload":{…}}}`. The headers are Apple's defaults filled in
    /// (`apns-push-type`, `apns-priority`, `apns-topic` when known, `apns-expiration`,
    /// `apns-collapse-id` when given, `apns-id`); `expiration` is as given (null without one).
    ///
    /// Written straight as bytes, in this order, with no tree built and serialized: every APNs
    /// send writes one (docs/performance.md "APNs"). The payload is the one parsed object,
    /// written compact as the record always kept it.
    static func recordedBlock(headers: APNsHeaders, apnsID: String, uniqueID: String?, payload: JSONObject,
                              authorizedBy: (name: String, id: String), environment: APNsEnvironment, now: Int64) -> String {
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key(literal: "apns")
        w.beginObject()
        w.key(literal: "push_type"); w.value(headers.pushType.rawValue)
        w.key(literal: "topic"); w.value(headers.topic)
        w.key(literal: "priority"); w.value(headers.priority)
        w.key(literal: "expiration"); if let e = headers.expiration { w.value(e) } else { w.null() }
        w.key(literal: "collapse_id"); w.value(headers.collapseID)
        w.key(literal: "environment"); w.value(environment.rawValue)
        w.key(authorizedBy.name); w.value(authorizedBy.id)
        w.key(literal: "apns_id"); w.value(apnsID)
        w.key(literal: "apns_unique_id"); w.value(uniqueID)
        w.key(literal: "headers")
        w.beginObject()
        w.key(literal: "apns-push-type"); w.value(headers.pushType.rawValue)
        w.key(literal: "apns-priority"); w.raw("\"\(headers.priority)\"")
        if let topic = headers.topic { w.key(literal: "apns-topic"); w.value(topic) }
        w.key(literal: "apns-expiration"); w.raw("\"\(expirationHeader(headers, now: now))\"")
        if let c = headers.collapseID { w.key(literal: "apns-collapse-id"); w.value(c) }
        w.key(literal: "apns-id"); w.value(apnsID)
        w.endObject()
        w.key(literal: "payload"); w.value(.object(payload))
        w.endObject()
        w.endObject()
        return w.string
    }
}
