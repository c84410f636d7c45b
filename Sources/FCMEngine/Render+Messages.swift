public import FCMModel
import FCMCore
import FCMStore

// Message records and inbox entries as the control API shows them, from the store's rows.
extension Render {
    /// A message record as the control API shows it, from its row and its recipients' rows.
    public static func messageRecord(_ record: MessageRecord) -> String {
        let (m, recipients, tokens, recipientsLimit) = (record.row, record.recipients, record.tokens, record.recipientsLimit)
        let suffix = m.suffix
        var w = JSONWriter()
        w.beginObject()
        let form = record.blocks.form(m.transport)
        recordHead(&w, m, form: form, recipients: m.recipients) { recipients.first.flatMap { $0.token ?? $0.device.flatMap { tokens[$0] } } }
        w.key("options"); w.beginObject()
        w.key("collapse_key"); w.value(m.collapseKey)
        w.key("priority"); w.value(m.priority)
        w.key("time_to_live"); w.value(m.timeToLive)
        w.key("restricted_package_name"); w.value(m.restrictedPackageName)
        w.key("content_available"); w.value(m.flags & 1 != 0)
        w.key("mutable_content"); w.value(m.flags & 2 != 0)
        w.key("dry_run"); w.value(false)
        if m.flags & 4 != 0 { w.key("delay_while_idle"); w.value(m.flags & 8 != 0) }
        w.endObject()
        w.key("data"); if let d = m.data { w.raw(d) } else { w.null() }
        w.key("notification"); if let n = m.notification { w.raw(n) } else { w.null() }
        if form.showsBlocks {
            // Parsed once for both: a room's record fields live in its stored block.
            let blocks = m.platforms.flatMap { try? JSONParser.parse($0) }?.objectValue
            platformBlocks(&w, blocks, read: record.blocks, acceptedAt: m.acceptedAt)
            for (name, value) in record.blocks.recordFields(transport: m.transport, blocks) { w.key(name); w.value(value) }
        }
        w.key("status"); w.value(m.status)
        w.key("error"); w.value(m.error)
        w.key("error_detail"); w.value(m.errorDetail)
        if form.byClientMessageID {
            w.key("xmpp_message_id"); w.value(m.clientMessageID)
        } else {
            w.key("http_status"); w.value(m.httpStatus)
        }
        w.key("fault"); w.value(m.fault)
        if let raw = m.raw { w.key("raw_body"); w.value(raw) }
        // What its sender got and the request headers that matter, once answered.
        if let a = m.answer { w.key("answer"); w.raw(RecordedExchange.json(answer: a)) }
        if let h = m.headers { w.key("headers"); w.raw(RecordedExchange.json(headers: h)) }
        w.key("recipients"); w.beginArray()
        for r in recipients {
            w.beginObject()
            // The token the sender named: a device's own, or the old one it replaced.
            w.key("token"); w.value(r.token ?? r.device.flatMap { tokens[$0] })
            w.key("message_id"); w.value(r.error == nil ? MessageID(micros: r.id, suffix: suffix).description : nil)
            w.key("status"); w.value(r.status)
            w.key("error"); w.value(r.error)
            w.key("canonical_token"); w.value(r.canonical.flatMap { tokens[$0] })
            if let f = r.fault { w.key("fault"); w.value(f) }
            if let t = r.deliveredAt { w.key("delivered_at"); w.value(rfc3339(millis: t)) }
            if let t = r.settledAt { w.key("settled_at"); w.value(rfc3339(millis: t)) }
            // A real client's delivery: its life on the connection (or why it was dropped).
            let (cd, detail) = ClientDelivery.shown(r.clientDelivery)
            if let cd {
                w.key("client_delivery"); w.raw(cd)
            } else if let d = r.device, record.clientDevices.contains(d) {
                w.key("client_delivery"); w.null()
            }
            if let detail { w.key("error_detail"); w.value(detail) }
            w.endObject()
        }
        w.endArray()
        if recipientsLimit != nil { w.key("recipients_total"); w.value(m.recipients) }
        if let counts = record.recipientCounts {
            w.key("recipient_counts"); w.beginObject()
            for (status, n) in counts { w.key(status); w.value(n) }
            w.endObject()
        }
        w.endObject()
        return w.string
    }
}

extension Render {
    /// A record's `android`, `apns`, `webpush` and `fcm_options` as sent (null when absent),
    /// from the stored `{"android":…,…}`, parsed; a room's own block as its reader shows it
    /// (`RecordBlocks`: an APNs send's with its Apple headers put back), given when it was
    /// accepted.
    static func platformBlocks(_ w: inout JSONWriter, _ blocks: JSONObject?, read: RecordBlocks, acceptedAt: Int64) {
        for name in ["android", "apns", "webpush", "fcm_options"] {
            w.key(name)
            if let b = blocks?[name]?.objectValue {
                w.raw(JSONValue.object(read.read(name, b, acceptedAtMillis: acceptedAt)).serialized())
            } else if let b = blocks?[name] {
                w.raw(b.serialized())
            } else {
                w.null()
            }
        }
    }

    /// A record's first fields, which its events share: ids, sender, transport, format, time, and
    /// the target. A token target's value is its one recipient's token; a multicast's, how many
    /// it had.
    static func recordHead(_ w: inout JSONWriter, _ m: MessageRow, form: RecordForm, recipients: Int, onlyToken: () -> String?) {
        w.key("message_id"); w.value(MessageID(micros: m.id, suffix: m.suffix).description)
        w.key("multicast_id"); if let v = m.multicastID { w.value(v) } else { w.null() }
        w.key("sender_id"); w.value(m.senderID)
        w.key("transport"); w.value(m.transport)
        // The `name` a v1 send was answered (null for one refused).
        if form.showsName { w.key("v1_name"); w.value(m.v1Name) }
        w.key("format"); w.value(m.format)
        w.key("accepted_at"); w.value(rfc3339(millis: m.acceptedAt))
        w.key("target"); w.beginObject()
        w.key("kind"); w.value(m.targetKind)
        w.key("value"); w.value(m.targetValue ?? (recipients == 1 ? onlyToken() : recipients == 0 ? nil : "\(recipients) tokens"))
        w.endObject()
    }

    /// One inbox entry.
    public static func inboxEntry(_ e: InboxEntry) -> String {
        let (r, status) = (e.row, e.status)
        var w = JSONWriter()
        w.beginObject()
        if r.targetKind == "deleted_messages" {
            w.key("message_type"); w.value("deleted_messages")
            w.key("total_deleted"); w.value(Int64(r.targetValue ?? "") ?? 0)
        }
        w.key("message_id"); w.value(MessageID(micros: r.id, suffix: r.suffix).description)
        w.key("status"); w.value(status)
        // Why an accepted send never reached the device (an APNs body that is no JSON object).
        if status == "undeliverable" { w.key("error_detail"); w.value(r.errorDetail) }
        let (clientDelivery, dropped) = ClientDelivery.shown(r.clientDelivery)
        if let dropped { w.key("error_detail"); w.value(dropped) }
        w.key("accepted_at"); w.value(rfc3339(millis: r.acceptedAt))
        w.key("delivered_at"); w.value(r.deliveredAt.map { rfc3339(millis: $0) })
        w.key("expires_at"); w.value(rfc3339(millis: r.expiresAt))
        if let cd = clientDelivery {
            w.key("client_delivery"); w.raw(cd)
        } else if e.realClient {
            w.key("client_delivery"); w.null()
        }
        // What the device received, in its platform's form (docs/effective-payloads.md); its
        // collapse key and priority are the entry's (an iPhone's from its APNs headers, a
        // browser's from its Web Push headers), not those of the message's Android form.
        let effective = effective(r, platform: e.platform, blocks: e.blocks)
        let (collapseKey, priority) = effective.objectValue.flatMap(EffectivePayload.entryOptions) ?? (r.collapseKey, r.priority)
        w.key("collapse_key"); w.value(collapseKey)
        w.key("priority"); w.value(priority)
        w.key("via"); w.beginObject()
        w.key("transport"); w.value(r.transport)
        w.key("target"); w.value(r.targetKind)
        // The bare topic name (`news`, not `/topics/news`) for topic sends.
        if r.targetKind == "topic", let v = r.targetValue, v.hasPrefix(Topics.prefix) {
            w.key("topic"); w.value(Topics.name(v))
        } else {
            w.key("topic"); w.null()
        }
        w.endObject()
        w.key("data"); if let d = r.data { w.raw(d) } else { w.null() }
        w.key("notification"); if let n = r.notification { w.raw(n) } else { w.null() }
        w.key("effective"); w.value(effective)
        if let form = r.transport.map({ e.blocks.form($0) }), form.inboxNamesTransport {
            w.key("transport"); w.value(r.transport)
            if let name = form.inboxBlock {
                // A request as its service saw it (Web Push: headers, VAPID, the plaintext).
                w.key(name); w.value(r.platforms.flatMap(EffectivePayload.storedPlatforms)?.block(name).map(JSONValue.object) ?? .null)
            }
        }
        w.endObject()
        return w.string
    }
}

extension Render {
    /// A list (`Render.list`) with `total` (how many match, at most `cap`) and `total_capped`
    /// (true when there are `cap` or more).
    public static func withTotal(_ list: String, total: Int, cap: Int) -> String {
        var w = JSONWriter()
        w.key("total"); w.value(Int64(total))
        w.key("total_capped"); w.value(total >= cap)
        // The list is an object: its last brace makes room for the two fields.
        return String(list.dropLast()) + "," + w.string + "}"
    }
}
