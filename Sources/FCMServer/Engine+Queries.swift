import FCMCore
import FCMStore

/// Filters of `GET /api/v1/messages`.
public struct MessageFilter: Sendable {
    public var senderID: String?
    public var token: String?
    public var topic: String?
    public var transport: String?
    public var status: String?
    public var sinceMillis: Int64?
    public init() {}
}

/// Inbox statuses (control-api.md "Inbox entries").
let inboxStatuses: Set<String> = ["delivered", "pending", "expired", "collapsed", "dropped"]

extension Engine {
    /// Message records, newest first, as JSON texts; `next` is the cursor of the following page.
    public func messageRecords(_ f: MessageFilter, limit: Int, before cursor: Int64?) throws(ControlError) -> (items: [String], next: Int64?) {
        var sql = "SELECT \(Self.messageColumns) FROM messages WHERE 1 = 1"
        var args: [SQLValue] = []
        if let c = cursor { sql += " AND id < ?"; args.append(.int(c)) }
        if let v = f.senderID { sql += " AND sender_id = ?"; args.append(.text(v)) }
        if let v = f.transport { sql += " AND transport = ?"; args.append(.text(v)) }
        if let v = f.sinceMillis { sql += " AND accepted_at >= ?"; args.append(.int(v)) }
        if let v = f.topic { sql += " AND target_kind = 'topic' AND target_value = ?"; args.append(.text("/topics/" + v)) }
        if let t = f.token {
            let id = state.withLock { $0.tokenIndex[t] }
            sql += " AND id IN (SELECT message FROM deliveries WHERE device = ? OR (device IS NULL AND token = ?))"
            args.append(.optional(id))
            args.append(.text(t))
        }
        if let st = f.status {
            switch st {
            case "accepted", "rejected":
                sql += " AND status = ?"
                args.append(.text(st))
            case _ where inboxStatuses.contains(st) || st == "failed":
                sql += " AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id >= messages.first_delivery"
                    + " AND d.id < messages.first_delivery + messages.delivery_count AND d.status = ?)"
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
                return (try rows.map { (row: MessageRecordRow) throws(StoreError) -> String in try render(row, c, now: now) }, next)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// One message record by any message id it issued (a multicast's record answers for every
    /// recipient's id).
    public func messageRecord(_ id: String) throws(ControlError) -> String {
        guard let wanted = MessageID(id) else { throw .notFound("message '\(id)' does not exist") }
        let now = clock.nowMillis()
        let found: String?
        do {
            found = try store.read { (c: SQLiteConnection) throws(StoreError) -> String? in
                var row: MessageRecordRow?
                try c.query("SELECT \(Self.messageColumns) FROM messages WHERE mid <= ? ORDER BY mid DESC LIMIT 1", [.int(wanted.micros)]) {
                    (r: Statement) throws(StoreError) in row = MessageRecordRow(r)
                }
                guard let row, UInt32(truncatingIfNeeded: row.suffix) == wanted.suffix,
                    wanted.micros < row.mid + Int64(max(row.deliveryCount, 1))
                else { return nil }
                return try render(row, c, now: now)
            }
        } catch {
            throw .internal(error.description)
        }
        guard let found else { throw .notFound("message '\(id)' does not exist") }
        return found
    }

    static let messageColumns = """
        id, mid, suffix, multicast_id, sender_id, transport, format, accepted_at, target_kind, target_value, options,
        data, notification, status, error, error_detail, http_status, raw, first_delivery, delivery_count
        """

    private func render(_ m: MessageRecordRow, _ c: SQLiteConnection, now: Int64) throws(StoreError) -> String {
        struct Recipient { var device: Int64?; var token: String?; var mid: Int64; var status: String; var error: String?; var canonical: Int64? }
        var recipients: [Recipient] = []
        if m.deliveryCount > 0 {
            try c.query("SELECT device, token, mid, status, error, canonical, expires_at FROM deliveries WHERE id >= ? AND id < ? ORDER BY id",
                        [.int(m.firstDelivery), .int(m.firstDelivery + Int64(m.deliveryCount))]) { (r: Statement) throws(StoreError) in
                var status = r.text(3) ?? ""
                if status == "pending" && r.int(6) <= now { status = "expired" }
                recipients.append(Recipient(device: r.optionalInt(0), token: r.text(1), mid: r.int(2), status: status,
                                            error: r.text(4), canonical: r.optionalInt(5)))
            }
        }
        let tokens = self.tokens(for: recipients.flatMap { [$0.device, $0.canonical].compactMap { $0 } })
        let suffix = UInt32(truncatingIfNeeded: m.suffix)
        var w = JSONWriter()
        w.beginObject()
        w.key("message_id"); w.value(MessageID(micros: m.mid, suffix: suffix).description)
        w.key("multicast_id"); if let v = m.multicastID { w.value(v) } else { w.null() }
        w.key("sender_id"); w.value(m.senderID)
        w.key("transport"); w.value(m.transport)
        w.key("format"); w.value(m.format)
        w.key("accepted_at"); w.value(rfc3339(millis: m.acceptedAt))
        w.key("target"); w.beginObject()
        w.key("kind"); w.value(m.targetKind)
        w.key("value"); w.value(m.targetValue)
        w.endObject()
        w.key("options"); w.raw(m.options)
        w.key("data"); if let d = m.data { w.raw(d) } else { w.null() }
        w.key("notification"); if let n = m.notification { w.raw(n) } else { w.null() }
        w.key("status"); w.value(m.status)
        w.key("error"); w.value(m.error)
        w.key("error_detail"); w.value(m.errorDetail)
        w.key("http_status"); w.value(m.httpStatus)
        if let raw = m.raw { w.key("raw_body"); w.value(raw) }
        w.key("recipients"); w.beginArray()
        for r in recipients {
            w.beginObject()
            w.key("token"); w.value(r.device.flatMap { tokens[$0] } ?? r.token)
            w.key("message_id"); w.value(r.error == nil ? MessageID(micros: r.mid, suffix: suffix).description : nil)
            w.key("status"); w.value(r.status)
            w.key("error"); w.value(r.error)
            w.key("canonical_token"); w.value(r.canonical.flatMap { tokens[$0] })
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.string
    }

    /// A device's inbox entries, oldest first, after delivery row `afterID`.
    public func inbox(_ token: String, status: String?, afterID: Int64, limit: Int) throws(ControlError) -> (items: [String], next: Int64?) {
        let device = try self.device(token)
        if let status, !inboxStatuses.contains(status) {
            throw .badRequest("status must be one of delivered, pending, expired, collapsed, dropped")
        }
        let now = clock.nowMillis()
        var sql = """
            SELECT d.id, d.mid, m.suffix, d.status, d.accepted_at, d.delivered_at, d.expires_at, d.collapse_key, m.priority,
              m.transport, m.target_kind, m.data, m.notification
            FROM deliveries d JOIN messages m ON m.id = d.message
            WHERE d.device = ? AND d.id > ?
            """
        var args: [SQLValue] = [.int(device.id), .int(afterID)]
        switch status {
        case nil: sql += " AND d.status IN ('delivered', 'pending', 'expired', 'collapsed', 'dropped')"
        case "pending": sql += " AND d.status = 'pending' AND d.expires_at > ?"; args.append(.int(now))
        case "expired": sql += " AND (d.status = 'expired' OR (d.status = 'pending' AND d.expires_at <= ?))"; args.append(.int(now))
        case let s?: sql += " AND d.status = ?"; args.append(.text(s))
        }
        sql += " ORDER BY d.id LIMIT ?"
        args.append(.int(Int64(limit + 1)))
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([String], Int64?) in
                var items: [String] = []
                var lastID: Int64 = 0
                var more = false
                try c.query(sql, args) { (r: Statement) throws(StoreError) in
                    if items.count == limit { more = true; return }
                    lastID = r.int(0)
                    var status = r.text(3) ?? ""
                    if status == "pending" && r.int(6) <= now { status = "expired" }
                    var w = JSONWriter()
                    w.beginObject()
                    w.key("message_id"); w.value(MessageID(micros: r.int(1), suffix: UInt32(truncatingIfNeeded: r.int(2))).description)
                    w.key("status"); w.value(status)
                    w.key("accepted_at"); w.value(rfc3339(millis: r.int(4)))
                    w.key("delivered_at"); w.value(r.optionalInt(5).map { rfc3339(millis: $0) })
                    w.key("expires_at"); w.value(rfc3339(millis: r.int(6)))
                    w.key("collapse_key"); w.value(r.text(7))
                    w.key("priority"); w.value(r.text(8))
                    w.key("via"); w.beginObject()
                    w.key("transport"); w.value(r.text(9))
                    w.key("target"); w.value(r.text(10))
                    w.key("topic"); w.null()
                    w.endObject()
                    w.key("data"); if let d = r.text(11) { w.raw(d) } else { w.null() }
                    w.key("notification"); if let n = r.text(12) { w.raw(n) } else { w.null() }
                    w.endObject()
                    items.append(w.string)
                }
                return (items, more ? lastID : nil)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// Long poll: returns as soon as the inbox holds at least `min` matching entries, or when
    /// `waitSeconds` have passed (with what there is).
    public func waitForInbox(_ token: String, status: String?, afterID: Int64, limit: Int, min: Int,
                             waitSeconds: Double) throws(ControlError) -> (items: [String], next: Int64?) {
        let deadline = monotonicNanos() + UInt64(max(0, waitSeconds) * 1e9)
        while true {
            let generation = currentGeneration()
            let page = try inbox(token, status: status, afterID: afterID, limit: limit)
            if page.items.count >= min || waitSeconds <= 0 { return page }
            if !waitForChange(after: generation, deadlineNanos: deadline) {
                return try inbox(token, status: status, afterID: afterID, limit: limit)
            }
        }
    }
}

/// A `messages` row as read back.
struct MessageRecordRow {
    var id: Int64, mid: Int64, suffix: Int64, multicastID: Int64?, senderID: String?, transport: String?, format: String?
    var acceptedAt: Int64, targetKind: String?, targetValue: String?, options: String, data: String?, notification: String?
    var status: String?, error: String?, errorDetail: String?, httpStatus: Int, raw: String?, firstDelivery: Int64, deliveryCount: Int

    init(_ r: Statement) {
        id = r.int(0); mid = r.int(1); suffix = r.int(2); multicastID = r.optionalInt(3); senderID = r.text(4)
        transport = r.text(5); format = r.text(6); acceptedAt = r.int(7); targetKind = r.text(8); targetValue = r.text(9)
        options = r.text(10) ?? "{}"; data = r.text(11); notification = r.text(12); status = r.text(13); error = r.text(14)
        errorDetail = r.text(15); httpStatus = Int(r.int(16)); raw = r.text(17); firstDelivery = r.int(18); deliveryCount = Int(r.int(19))
    }
}
