import FCMCore

extension APNsRoutes {
    /// What an APNs send's record keeps of its request, as the record's platform blocks:
    /// `{"apns":{"push_type":…,"topic":…,"priority":…,"expiration":…,"collapse_id":…,
    /// "environment":…,"key_id"|"certificate_id":…,"apns_id":…,"apns_unique_id":…,
    /// "headers":{…},"payload":{…}}}`. The headers are Apple's defaults filled in
    /// (`apns-push-type`, `apns-priority`, `apns-topic` when known, `apns-expiration`,
    /// `apns-collapse-id` when given, `apns-id`); `expiration` is as given (null without one).
    ///
    /// Written straight as bytes, in this order, with no tree built and serialized (nor a writer's
    /// call per key): every APNs send writes one (docs/performance.md "APNs"). The payload is the
    /// one parsed object, written compact as the record always kept it.
    static func recordedBlock(headers: APNsHeaders, apnsID: String, uniqueID: String?, payload: JSONObject,
                              authorizedBy: (name: String, id: String), environment: APNsEnvironment, now: Int64) -> String {
        // The keys are fixed: written as runs of literal text between the values, not key by key.
        var out: [UInt8] = []
        out.reserveCapacity(512)
        func text(_ s: StaticString) {
            out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
        }
        func value(_ s: String?) {
            if let s { appendJSONString(s, to: &out) } else { text("null") }
        }
        func number(_ n: Int64) {
            var digits = String(n)
            digits.withUTF8 { out.append(contentsOf: $0) }
        }
        text(#"{"apns":{"push_type":"#); value(headers.pushType.rawValue)
        text(#","topic":"#); value(headers.topic)
        text(#","priority":"#); number(Int64(headers.priority))
        text(#","expiration":"#)
        if let e = headers.expiration { number(e) } else { text("null") }
        text(#","collapse_id":"#); value(headers.collapseID)
        text(#","environment":"#); value(environment.rawValue)
        text(","); value(authorizedBy.name); text(":"); value(authorizedBy.id)
        text(#","apns_id":"#); value(apnsID)
        text(#","apns_unique_id":"#); value(uniqueID)
        text(#","headers":{"apns-push-type":"#); value(headers.pushType.rawValue)
        text(#","apns-priority":""#); number(Int64(headers.priority)); text(#"""#)
        if let topic = headers.topic { text(#","apns-topic":"#); value(topic) }
        text(#","apns-expiration":""#); number(expirationHeader(headers, now: now)); text(#"""#)
        if let c = headers.collapseID { text(#","apns-collapse-id":"#); value(c) }
        text(#","apns-id":"#); value(apnsID)
        text(#"},"payload":"#); appendJSONValue(.object(payload), to: &out)
        text("}}")
        return String(decoding: out, as: UTF8.self)
    }
}
