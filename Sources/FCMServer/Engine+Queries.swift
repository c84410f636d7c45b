import FCMCore
import FCMStore
import Platform

/// Filters of `GET /api/v1/messages`.
public struct MessageFilter: Sendable {
    public var senderID: String?
    public var token: String?
    public var topic: String?
    public var transport: String?
    public var status: String?
    public var sinceMillis: Int64?
    /// The `message_id` an XMPP client gave its message.
    public var xmppMessageID: String?
    /// `recipients=N`: at most N recipients per record (the first N), with `recipients_total`.
    public var recipientsLimit: Int?
    public init() {}
}

/// Inbox statuses (control-api.md "Inbox entries").
let inboxStatuses: Set<String> = ["delivered", "pending", "expired", "collapsed", "dropped"]

extension Engine {
    /// Message records, newest first, as JSON texts; `next` is the cursor of the following page.
    public func messageRecords(_ f: MessageFilter, limit: Int, before cursor: Int64?) throws(ControlError) -> (items: [String], next: Int64?) {
        try expireDue()
        // Messages are what app servers sent: a device's deleted_messages notices are not.
        var sql = "SELECT \(Self.messageColumns) FROM messages WHERE target_kind != 'deleted_messages'"
        var args: [SQLValue] = []
        if let c = cursor { sql += " AND id < ?"; args.append(.int(c)) }
        if let v = f.senderID { sql += " AND sender_id = ?"; args.append(.text(v)) }
        if let v = f.transport { sql += " AND transport = ?"; args.append(.text(v)) }
        if let v = f.xmppMessageID { sql += " AND client_message_id = ?"; args.append(.text(v)) }
        if let v = f.sinceMillis { sql += " AND accepted_at >= ?"; args.append(.int(v)) }
        if let v = f.topic {
            // Topic names match case-insensitively, as sends match subscribers (names are ASCII,
            // which is all SQLite's lower() folds).
            sql += " AND target_kind = 'topic' AND lower(target_value) = ?"
            args.append(.text("/topics/" + Topics.key(v)))
        }
        if let t = f.token {
            // The device's deliveries come from the in-memory inbox index; deleted devices and
            // tokens that never were devices are found by the token kept on the row.
            let ids = state.withLock { s in s.tokenIndex[t].flatMap { s.inbox[$0] } ?? [] }
            sql += " AND id IN (SELECT message FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"
                + " UNION SELECT message FROM deliveries WHERE device IS NULL AND token = ?)"
            args.append(.text(JSONValue.array(ids.map { .number(JSONNumber($0)) }).serialized()))
            args.append(.text(t))
        }
        if let st = f.status {
            switch st {
            case "accepted", "rejected":
                sql += " AND status = ?"
                args.append(.text(st))
            case _ where inboxStatuses.contains(st) || st == "failed":
                sql += " AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id >= messages.id"
                    + " AND d.id < messages.id + messages.recipients AND d.status = ?)"
                args.append(.text(st))
            default:
                throw .badRequest("status must be one of accepted, rejected, failed, delivered, pending, expired, collapsed, dropped")
            }
        }
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(.int(Int64(limit + 1)))
        let now = clock.nowMillis()
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([String], Int64?) in
                var rows: [MessageRecordRow] = []
                try c.query(sql, args) { (r: Statement) throws(StoreError) in rows.append(MessageRecordRow(r)) }
                var next: Int64?
                if rows.count > limit {
                    rows.removeLast()
                    next = rows.last?.id
                }
                return (try rows.map { (row: MessageRecordRow) throws(StoreError) -> String in
                    try render(row, c, now: now, recipientsLimit: f.recipientsLimit)
                }, next)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// One message record by any message id it issued (a multicast's record answers for every
    /// recipient's id).
    public func messageRecord(_ id: String) throws(ControlError) -> String {
        // A topic send's id is the number FCM answered; it is the record's own stamp.
        if let number = Int64(id), number > 0 {
            let found: String?
            do {
                found = try store.read { (c: SQLiteConnection) throws(StoreError) -> String? in
                    var row: MessageRecordRow?
                    try c.query("SELECT \(Self.messageColumns) FROM messages WHERE id = ?", [.int(number)]) {
                        (r: Statement) throws(StoreError) in row = MessageRecordRow(r)
                    }
                    return try row.map { (r: MessageRecordRow) throws(StoreError) -> String in try render(r, c, now: clock.nowMillis()) }
                }
            } catch {
                throw .internal(error.description)
            }
            guard let found else { throw .notFound("message '\(id)' does not exist") }
            return found
        }
        guard let wanted = MessageID(id) else { throw .notFound("message '\(id)' does not exist") }
        let now = clock.nowMillis()
        let found: String?
        do {
            found = try store.read { (c: SQLiteConnection) throws(StoreError) -> String? in
                // A recipient's id is a delivery row id; a record without recipients (400, 401)
                // is found by its own id.
                let messageID = try c.scalar("SELECT message FROM deliveries WHERE id = ?", [.int(wanted.micros)]) ?? wanted.micros
                var row: MessageRecordRow?
                try c.query("SELECT \(Self.messageColumns) FROM messages WHERE id = ?", [.int(messageID)]) {
                    (r: Statement) throws(StoreError) in row = MessageRecordRow(r)
                }
                guard let row, UInt32(truncatingIfNeeded: row.suffix) == wanted.suffix else { return nil }
                return try render(row, c, now: now)
            }
        } catch {
            throw .internal(error.description)
        }
        guard let found else { throw .notFound("message '\(id)' does not exist") }
        return found
    }

    static let messageColumns = """
        id, suffix, multicast_id, sender_id, transport, format, accepted_at, target_kind, target_value, collapse_key,
        time_to_live, restricted_package_name, flags, priority, data, notification, status, error, error_detail,
        http_status, raw, recipients, fault, client_message_id
        """

    private func render(_ m: MessageRecordRow, _ c: SQLiteConnection, now: Int64, recipientsLimit: Int? = nil) throws(StoreError) -> String {
        struct Recipient {
            var device: Int64?, token: String?, mid: Int64, status: String, error: String?, canonical: Int64?, fault: String?
        }
        var recipients: [Recipient] = []
        if m.recipients > 0 {
            try c.query("SELECT device, token, id, status, error, canonical, expires_at, fault FROM deliveries WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                        [.int(m.id), .int(m.id + Int64(m.recipients)), .int(Int64(recipientsLimit ?? -1))]) { (r: Statement) throws(StoreError) in
                var status = r.text(3) ?? ""
                if status == "pending" && r.int(6) <= now { status = "expired" }
                recipients.append(Recipient(device: r.optionalInt(0), token: r.text(1), mid: r.int(2), status: status,
                                            error: r.text(4), canonical: r.optionalInt(5), fault: r.text(7)))
            }
        }
        let tokens = self.tokens(for: recipients.flatMap { [$0.device, $0.canonical].compactMap { $0 } })
        let suffix = UInt32(truncatingIfNeeded: m.suffix)
        var w = JSONWriter()
        w.beginObject()
        w.key("message_id"); w.value(MessageID(micros: m.id, suffix: suffix).description)
        w.key("multicast_id"); if let v = m.multicastID { w.value(v) } else { w.null() }
        w.key("sender_id"); w.value(m.senderID)
        w.key("transport"); w.value(m.transport)
        w.key("format"); w.value(m.format)
        w.key("accepted_at"); w.value(rfc3339(millis: m.acceptedAt))
        w.key("target"); w.beginObject()
        w.key("kind"); w.value(m.targetKind)
        // A token target's value is its one recipient's token; a multicast's, how many it had.
        let targetValue: String?
        if let v = m.targetValue {
            targetValue = v
        } else if m.recipients == 1, let only = recipients.first {
            targetValue = only.device.flatMap { tokens[$0] } ?? only.token
        } else {
            targetValue = m.recipients == 0 ? nil : "\(m.recipients) tokens"
        }
        w.key("value"); w.value(targetValue)
        w.endObject()
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
        w.key("status"); w.value(m.status)
        w.key("error"); w.value(m.error)
        w.key("error_detail"); w.value(m.errorDetail)
        if m.transport == "xmpp" {
            w.key("xmpp_message_id"); w.value(m.clientMessageID)
        } else {
            w.key("http_status"); w.value(m.httpStatus)
        }
        w.key("fault"); w.value(m.fault)
        if let raw = m.raw { w.key("raw_body"); w.value(raw) }
        w.key("recipients"); w.beginArray()
        for r in recipients {
            w.beginObject()
            w.key("token"); w.value(r.device.flatMap { tokens[$0] } ?? r.token)
            w.key("message_id"); w.value(r.error == nil ? MessageID(micros: r.mid, suffix: suffix).description : nil)
            w.key("status"); w.value(r.status)
            w.key("error"); w.value(r.error)
            w.key("canonical_token"); w.value(r.canonical.flatMap { tokens[$0] })
            if let f = r.fault { w.key("fault"); w.value(f) }
            w.endObject()
        }
        w.endArray()
        if recipientsLimit != nil { w.key("recipients_total"); w.value(m.recipients) }
        w.endObject()
        return w.string
    }

    /// A device's inbox entries, oldest first, after delivery row `afterID`.
    public func inbox(_ token: String, status: String?, afterID: Int64, limit: Int) throws(ControlError) -> (items: [String], next: Int64?) {
        if let status, !inboxStatuses.contains(status) {
            throw .badRequest("status must be one of delivered, pending, expired, collapsed, dropped")
        }
        let candidates: [Int64]? = state.withLock { s in
            guard let id = s.tokenIndex[token] else { return nil }
            let all = s.inbox[id] ?? []
            return Array(all[Self.firstAfter(afterID, in: all)...])
        }
        guard let candidates else { throw .notFound("device '\(token)' does not exist") }
        let now = clock.nowMillis()
        let sql = """
            SELECT d.id, m.suffix, d.status, m.accepted_at, d.delivered_at, d.expires_at, m.collapse_key, m.priority,
              m.transport, m.target_kind, m.data, m.notification, m.target_value
            FROM deliveries d JOIN messages m ON m.id = d.message WHERE d.id = ?
            """
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([String], Int64?) in
                var items: [String] = []
                var lastID: Int64 = 0
                var more = false
                for id in candidates {
                    if more { break }
                    try c.query(sql, [.int(id)]) { (r: Statement) throws(StoreError) in
                        var st = r.text(2) ?? ""
                        guard inboxStatuses.contains(st) else { return }
                        if st == "pending" && r.int(5) <= now { st = "expired" }
                        if let status, status != st { return }
                        if items.count == limit { more = true; return }
                        lastID = r.int(0)
                        items.append(Self.inboxEntry(r, status: st))
                    }
                }
                return (items, more ? lastID : nil)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// The position of the first entry of the ascending `ids` greater than `afterID`.
    private static func firstAfter(_ afterID: Int64, in ids: [Int64]) -> Int {
        var lo = 0, hi = ids.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ids[mid] <= afterID { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// How many deliveries the device's inbox holds after `afterID`, whatever their status (at
    /// least as many as any page can show); nil for an unknown device.
    private func inboxCount(_ token: String, afterID: Int64) -> Int? {
        state.withLock { s in
            guard let id = s.tokenIndex[token] else { return nil }
            let all = s.inbox[id] ?? []
            return all.count - Self.firstAfter(afterID, in: all)
        }
    }

    private static func inboxEntry(_ r: Statement, status: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        if r.text(9) == "deleted_messages" {
            w.key("message_type"); w.value("deleted_messages")
            w.key("total_deleted"); w.value(Int64(r.text(12) ?? "") ?? 0)
        }
        w.key("message_id"); w.value(MessageID(micros: r.int(0), suffix: UInt32(truncatingIfNeeded: r.int(1))).description)
        w.key("status"); w.value(status)
        w.key("accepted_at"); w.value(rfc3339(millis: r.int(3)))
        w.key("delivered_at"); w.value(r.optionalInt(4).map { rfc3339(millis: $0) })
        w.key("expires_at"); w.value(rfc3339(millis: r.int(5)))
        w.key("collapse_key"); w.value(r.text(6))
        w.key("priority"); w.value(r.text(7))
        w.key("via"); w.beginObject()
        w.key("transport"); w.value(r.text(8))
        w.key("target"); w.value(r.text(9))
        // The bare topic name (`news`, not `/topics/news`) for topic sends.
        if r.text(9) == "topic", let v = r.text(12), v.hasPrefix("/topics/") {
            w.key("topic"); w.value(String(v.dropFirst(8)))
        } else {
            w.key("topic"); w.null()
        }
        w.endObject()
        w.key("data"); if let d = r.text(10) { w.raw(d) } else { w.null() }
        w.key("notification"); if let n = r.text(11) { w.raw(n) } else { w.null() }
        w.endObject()
        return w.string
    }

    /// Long poll: answers as soon as the inbox holds at least `min` matching entries, or when
    /// `waitSeconds` have passed (with what there is). `reply` runs at once or later, on another
    /// thread; no thread waits meanwhile.
    public func waitForInbox(_ token: String, status: String?, afterID: Int64, limit: Int, min: Int, waitSeconds: Double,
                             reply: @escaping @Sendable (Result<(items: [String], next: Int64?), ControlError>) -> Void) {
        let first: (items: [String], next: Int64?)
        do {
            first = try inbox(token, status: status, afterID: afterID, limit: limit)
        } catch {
            return reply(.failure(error))
        }
        // A page holds at most `limit` entries: a `min` above it is met by a full page.
        let need = Swift.min(min, limit)
        if first.items.count >= need || waitSeconds <= 0 { return reply(.success(first)) }
        let deadline = monotonicNanos() + UInt64(waitSeconds * 1e9)
        longPolls.add(deadline: deadline) { [self] final in
            // Re-checked after every commit: the in-memory count rules most checks out without a
            // query (hundreds of waiting polls each paging through SQLite on every send took a
            // core).
            if !final, let n = inboxCount(token, afterID: afterID), n < need { return false }
            do throws(ControlError) {
                let page = try inbox(token, status: status, afterID: afterID, limit: limit)
                guard page.items.count >= need || final else { return false }
                reply(.success(page))
            } catch {
                reply(.failure(error))
            }
            return true
        }
    }
}

/// A `messages` row as read back.
struct MessageRecordRow {
    var id: Int64, suffix: Int64, multicastID: Int64?, senderID: String?, transport: String?, format: String?
    var acceptedAt: Int64, targetKind: String?, targetValue: String?, collapseKey: String?, timeToLive: Int64
    var restrictedPackageName: String?, flags: Int64, priority: String?, data: String?, notification: String?
    var status: String?, error: String?, errorDetail: String?, httpStatus: Int, raw: String?, recipients: Int, fault: String?, clientMessageID: String?

    init(_ r: Statement) {
        id = r.int(0); suffix = r.int(1); multicastID = r.optionalInt(2); senderID = r.text(3)
        transport = r.text(4); format = r.text(5); acceptedAt = r.int(6); targetKind = r.text(7); targetValue = r.text(8)
        collapseKey = r.text(9); timeToLive = r.int(10); restrictedPackageName = r.text(11); flags = r.int(12)
        priority = r.text(13); data = r.text(14); notification = r.text(15); status = r.text(16); error = r.text(17)
        errorDetail = r.text(18); httpStatus = Int(r.int(19)); raw = r.text(20); recipients = Int(r.int(21)); fault = r.text(22); clientMessageID = r.text(23)
    }
}
