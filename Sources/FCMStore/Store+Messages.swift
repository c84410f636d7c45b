/// The `messages` and `deliveries` tables: rows as written and read, and every statement on them.

/// One `messages` row. Its id is the first recipient's message-id stamp; its deliveries are the
/// rows `id ..< id + recipients`.
public struct MessageRow: Sendable {
    public var id: Int64
    public var suffix: UInt32
    public var multicastID: Int64?
    public var senderID: String?
    public var transport: String
    public var format: String
    public var acceptedAt: Int64
    public var targetKind: String
    /// Only for topic and condition targets; a token target's value is its recipient's token.
    public var targetValue: String?
    public var collapseKey: String?
    public var timeToLive: Int64
    public var restrictedPackageName: String?
    /// Bits: 1 content_available, 2 mutable_content, 4 delay_while_idle given, 8 its value.
    public var flags: Int64
    public var data: String?
    public var notification: String?
    public var priority: String
    public var status: String
    public var error: String?
    public var errorDetail: String?
    public var httpStatus: Int
    public var raw: String?
    public var recipients: Int
    /// The fault that fired on the whole request, if one did.
    public var fault: String?
    /// The `message_id` an XMPP client gave the message.
    public var clientMessageID: String?
    /// A v1 message's platform blocks as JSON (`{"android":…,"apns":…,"webpush":…,"fcm_options":…}`).
    public var platforms: String?
    /// The `name` a v1 send was answered (`projects/{project_id}/messages/{id}`).
    public var v1Name: String?
    /// What the app server got (status, content type, body: the plain form of RecordedExchange
    /// in FCMServer): with the row for an HTTP send, set afterwards for a refused or XMPP one.
    public var answer: String?
    /// The request headers that matter (`name\tvalue` lines, authorization masked); set with `answer`.
    public var headers: String?

    public init(id: Int64, suffix: UInt32, multicastID: Int64?, senderID: String?, transport: String, format: String,
                acceptedAt: Int64, targetKind: String, targetValue: String?, collapseKey: String?, timeToLive: Int64,
                restrictedPackageName: String?, flags: Int64, data: String?, notification: String?, priority: String,
                status: String, error: String?, errorDetail: String?, httpStatus: Int, raw: String?, recipients: Int,
                fault: String? = nil, clientMessageID: String? = nil, platforms: String? = nil, v1Name: String? = nil) {
        self.id = id; self.suffix = suffix; self.multicastID = multicastID; self.senderID = senderID
        self.transport = transport; self.format = format; self.acceptedAt = acceptedAt; self.targetKind = targetKind
        self.targetValue = targetValue; self.collapseKey = collapseKey; self.timeToLive = timeToLive
        self.restrictedPackageName = restrictedPackageName; self.flags = flags; self.data = data
        self.notification = notification; self.priority = priority; self.status = status; self.error = error
        self.errorDetail = errorDetail; self.httpStatus = httpStatus; self.raw = raw; self.recipients = recipients
        self.fault = fault; self.clientMessageID = clientMessageID; self.platforms = platforms; self.v1Name = v1Name
    }

    static let insertSQL = """
        INSERT INTO messages(id, suffix, multicast_id, sender_id, transport, format, accepted_at, target_kind,
          target_value, collapse_key, time_to_live, restricted_package_name, flags, data, notification, priority,
          status, error, error_detail, http_status, raw, recipients, fault, client_message_id, platforms, v1_name,
          answer, headers)
        VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
        """

    static let columns = """
        id, suffix, multicast_id, sender_id, transport, format, accepted_at, target_kind, target_value, collapse_key,
        time_to_live, restricted_package_name, flags, data, notification, priority, status, error, error_detail,
        http_status, raw, recipients, fault, client_message_id, platforms, v1_name, answer, headers
        """

    /// A row read back with `columns`.
    init(_ r: Statement) {
        self.init(id: r.int(0), suffix: UInt32(truncatingIfNeeded: r.int(1)), multicastID: r.optionalInt(2), senderID: r.text(3),
                  transport: r.text(4) ?? "", format: r.text(5) ?? "", acceptedAt: r.int(6), targetKind: r.text(7) ?? "",
                  targetValue: r.text(8), collapseKey: r.text(9), timeToLive: r.int(10), restrictedPackageName: r.text(11),
                  flags: r.int(12), data: r.text(13), notification: r.text(14), priority: r.text(15) ?? "", status: r.text(16) ?? "",
                  error: r.text(17), errorDetail: r.text(18), httpStatus: Int(r.int(19)), raw: r.text(20), recipients: Int(r.int(21)),
                  fault: r.text(22), clientMessageID: r.text(23), platforms: r.text(24), v1Name: r.text(25))
        answer = r.text(26)
        headers = r.text(27)
    }
}

/// One `deliveries` row: a message meeting one recipient. Its id is that recipient's message-id
/// stamp.
public struct DeliveryRow: Sendable {
    public var id: Int64
    public var message: Int64
    public var device: Int64?
    /// For recipients that are no device (malformed or rejected unknown tokens), and the token a
    /// sender named for a device that now has another (`canonical`).
    public var token: String?
    public var status: String
    public var error: String?
    public var canonical: Int64?
    public var deliveredAt: Int64?
    public var expiresAt: Int64
    /// The error fault that failed this recipient, if one did.
    public var fault: String?
    /// A real client's delivery written at once: its life on the connection (JSON).
    public var clientDelivery: String?

    public init(id: Int64, message: Int64, device: Int64?, token: String?, status: String, error: String?, canonical: Int64?,
                deliveredAt: Int64?, expiresAt: Int64, fault: String? = nil) {
        self.id = id; self.message = message; self.device = device; self.token = token; self.status = status
        self.error = error; self.canonical = canonical; self.deliveredAt = deliveredAt; self.expiresAt = expiresAt; self.fault = fault
    }

    static let insertSQL = """
        INSERT INTO deliveries(id, message, device, token, status, error, canonical, delivered_at, expires_at, fault, client_delivery)
        VALUES (?,?,?,?,?,?,?,?,?,?,?)
        """
}

/// What `GET /api/v1/messages` filters on, as the store applies it.
public struct MessageQuery: Sendable {
    /// Rows with an id below this (the cursor).
    public var before: Int64?
    /// Rows with an id at or above this (the lower end of a slice of the records).
    public var from: Int64?
    public var senderID: String?
    public var transport: String?
    public var clientMessageID: String?
    /// The `name` a v1 send was answered.
    public var v1Name: String?
    public var since: Int64?
    /// Accepted at or before this (milliseconds).
    public var until: Int64?
    /// The record's error, or any of its recipients' errors.
    public var error: String?
    /// `/topics/` and the topic's lowercased name: topic sends to it in any case.
    public var topicTarget: String?
    /// A token's messages: its device's delivery ids (those in its inbox chunks up to `chunked`,
    /// then `recent`), and the token kept on rows of recipients that were no device.
    public var token: (device: Int64?, chunked: Int64, recent: [Int64], token: String)? = nil
    /// The record's own status (`accepted`, `rejected`).
    public var recordStatus: String?
    /// A status any of its recipients has.
    public var recipientStatus: String?
    /// Words or phrases each found, ignoring ASCII case, in the data, the notification, the v1
    /// platform blocks as stored (JSON text: keys and values alike), or the record's error and
    /// its detail. Lowercase them first.
    public var text: [String] = []
    /// Sent to a device of this app (a recipient's), or restricted to this package name.
    public var app: String?
    /// Sent to a real client's device of this kind (its `client` link's `kind`), or `any`.
    public var clientKind: String?
    /// Records matching none of these (the page's `-prefix:value` terms): each its own query,
    /// whose filters are ANDed and then negated.
    public var excluded: [MessageQuery] = []
    public var limit: Int = 100
    public init() {}
}

/// One recipient of a record as read back.
public struct RecipientRow: Sendable {
    public var device: Int64?
    public var token: String?
    public var id: Int64
    public var status: String
    public var error: String?
    public var canonical: Int64?
    public var expiresAt: Int64
    public var fault: String?
    /// When the device got it (mock clock, milliseconds).
    public var deliveredAt: Int64?
    /// When the storage rules settled it (collapsed, dropped or expired; mock clock, ms).
    public var settledAt: Int64?
    /// A real client's delivery: its life on the connection (JSON), else nil.
    public var clientDelivery: String?
}

/// One inbox entry: a delivery with what its message says.
public struct InboxRow: Sendable {
    public var id: Int64
    public var suffix: UInt32
    public var status: String
    public var acceptedAt: Int64
    public var deliveredAt: Int64?
    public var expiresAt: Int64
    public var collapseKey: String?
    public var priority: String?
    public var transport: String?
    public var targetKind: String?
    public var data: String?
    public var notification: String?
    public var targetValue: String?
    /// What the effective payload is worked out from (with data, notification, collapse key and
    /// priority above): the message's TTL, option flags and v1 platform blocks.
    public var timeToLive: Int64 = 0
    public var flags: Int64 = 0
    public var platforms: String?
    /// The record's `error_detail`: why an accepted send could not reach the device (an
    /// `undeliverable` entry says so).
    public var errorDetail: String? = nil
    /// A real client's delivery: its life on the connection (JSON), else nil.
    public var clientDelivery: String? = nil
}

extension InboxRow {
    /// The entry a send's own rows make, as `inboxRow(_:)` would read it back once committed (the
    /// same columns of the same join): for what is written at once without a store read.
    public init(message m: MessageRow, delivery d: DeliveryRow) {
        self.init(id: d.id, suffix: m.suffix, status: d.status, acceptedAt: m.acceptedAt, deliveredAt: d.deliveredAt,
                  expiresAt: d.expiresAt, collapseKey: m.collapseKey, priority: m.priority, transport: m.transport,
                  targetKind: m.targetKind, data: m.data, notification: m.notification, targetValue: m.targetValue,
                  timeToLive: m.timeToLive, flags: m.flags, platforms: m.platforms, errorDetail: m.errorDetail,
                  clientDelivery: d.clientDelivery)
    }
}

extension SQLiteConnection {
    /// Message records, newest first (a device's deleted_messages notices are no record).
    public func messageRecords(_ q: MessageQuery) throws(StoreError) -> [MessageRow] {
        var (sql, args) = try messageWhere(q)
        sql = "SELECT \(MessageRow.columns) FROM messages WHERE " + sql + " ORDER BY id DESC LIMIT ?"
        args.append(.int(Int64(q.limit)))
        var rows: [MessageRow] = []
        try query(sql, args) { (r: Statement) throws(StoreError) in rows.append(MessageRow(r)) }
        return rows
    }

    /// The lower end of the slice of `count` records below `before` (nil: from the newest): the
    /// id of the `count`th record down, or nil when there are no more than `count` (the slice
    /// reaches the oldest). On the primary key: no record is read.
    public func messageSliceStart(before: Int64?, count: Int) throws(StoreError) -> Int64? {
        try scalar("SELECT id FROM messages WHERE id < ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                   [.int(before ?? Int64.max), .int(Int64(count - 1))])
    }

    /// How many records match `q` (its limit aside, within its `before` and `from`), counting no
    /// further than `cap`.
    public func messageCount(_ q: MessageQuery, cap: Int) throws(StoreError) -> Int {
        let (sql, args) = try messageWhere(q)
        return Int(try scalar("SELECT count(*) FROM (SELECT 1 FROM messages WHERE " + sql + " LIMIT ?)", args + [.int(Int64(cap))]) ?? 0)
    }

    /// The WHERE clause of `q` and its arguments: every value is bound, none spliced in.
    private func messageWhere(_ q: MessageQuery) throws(StoreError) -> (String, [SQLValue]) {
        var (sql, args) = try messageTerms(q)
        sql = "target_kind != 'deleted_messages'" + sql
        for x in q.excluded {
            let (terms, more) = try messageTerms(x)
            guard !terms.isEmpty else { continue }
            // A NULL column (no sender id, no error) makes a term NULL, not false: coalesce, so
            // NOT keeps those records.
            sql += " AND NOT coalesce((1" + terms + "), 0)"
            args += more
        }
        return (sql, args)
    }

    /// `q`'s filters as " AND …" terms (nothing for a query without filters).
    private func messageTerms(_ q: MessageQuery) throws(StoreError) -> (String, [SQLValue]) {
        var sql = ""
        var args: [SQLValue] = []
        if let v = q.before { sql += " AND id < ?"; args.append(.int(v)) }
        if let v = q.from { sql += " AND id >= ?"; args.append(.int(v)) }
        if let v = q.senderID { sql += " AND sender_id = ?"; args.append(.text(v)) }
        if let v = q.transport { sql += " AND transport = ?"; args.append(.text(v)) }
        if let v = q.clientMessageID { sql += " AND client_message_id = ?"; args.append(.text(v)) }
        if let v = q.v1Name { sql += " AND v1_name = ?"; args.append(.text(v)) }
        if let v = q.since { sql += " AND accepted_at >= ?"; args.append(.int(v)) }
        if let v = q.until { sql += " AND accepted_at <= ?"; args.append(.int(v)) }
        if let v = q.error {
            sql += " AND (error = ? OR EXISTS (SELECT 1 FROM deliveries d WHERE d.id >= messages.id"
                + " AND d.id < messages.id + messages.recipients AND d.error = ?))"
            args.append(.text(v)); args.append(.text(v))
        }
        if let v = q.topicTarget {
            // Names are ASCII, which is all SQLite's lower() folds.
            sql += " AND target_kind = 'topic' AND lower(target_value) = ?"
            args.append(.text(v))
        }
        if let (device, chunked, recent, token) = q.token {
            // A refused request that named the token has no delivery: its record's target finds it.
            sql += " AND id IN (SELECT message FROM deliveries WHERE id IN (SELECT value FROM json_each(?))"
                + " UNION SELECT message FROM deliveries WHERE token = ?"
                + " UNION SELECT id FROM messages WHERE status = 'rejected' AND target_kind = 'token' AND target_value = ?)"
            var ids = recent
            if let device { ids = try allInboxChunkIDs(device: device, through: chunked) + recent }
            args.append(.text("[" + ids.map(String.init).joined(separator: ",") + "]"))
            args.append(.text(token))
            args.append(.text(token))
        }
        if let v = q.recordStatus { sql += " AND status = ?"; args.append(.text(v)) }
        if let v = q.recipientStatus {
            sql += " AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id >= messages.id"
                + " AND d.id < messages.id + messages.recipients AND d.status = ?)"
            args.append(.text(v))
        }
        for word in q.text {
            // One text per record, so a phrase is not found across the boundary of two parts.
            sql += " AND instr(lower(coalesce(data, '') || char(10) || coalesce(notification, '') || char(10)"
                + " || coalesce(platforms, '') || char(10) || coalesce(error, '') || char(10) || coalesce(error_detail, '')), ?) > 0"
            args.append(.text(word))
        }
        if let v = q.app {
            sql += " AND (restricted_package_name = ? OR EXISTS (SELECT 1 FROM deliveries d JOIN devices v ON v.id = d.device"
                + " WHERE d.id >= messages.id AND d.id < messages.id + messages.recipients AND v.app = ?))"
            args.append(.text(v)); args.append(.text(v))
        }
        if let v = q.clientKind {
            // `any`: a real client's device of whatever kind.
            sql += " AND EXISTS (SELECT 1 FROM deliveries d JOIN devices v ON v.id = d.device"
                + " WHERE d.id >= messages.id AND d.id < messages.id + messages.recipients AND v.client IS NOT NULL"
                + " AND (? = 'any' OR json_extract(v.client, '$.kind') = ?))"
            args.append(.text(v)); args.append(.text(v))
        }
        return (sql, args)
    }

    /// A record's recipients by status as the page sums them up: `failed` for those with an
    /// error, `expired` for those held past their TTL at `now`, else the row's status. A range
    /// of the deliveries' primary key: the work is the record's recipients, whatever the store holds.
    public func recipientCounts(of m: MessageRow, now: Int64) throws(StoreError) -> [(String, Int64)] {
        var out: [(String, Int64)] = []
        guard m.recipients > 0 else { return out }
        try query("""
            SELECT CASE WHEN error IS NOT NULL THEN 'failed' WHEN status = 'pending' AND expires_at <= ? THEN 'expired'
              ELSE status END AS shown, count(*) FROM deliveries WHERE id >= ? AND id < ? GROUP BY shown ORDER BY shown
            """, [.int(now), .int(m.id), .int(m.id + Int64(m.recipients))]) { (r: Statement) throws(StoreError) in
            out.append((r.text(0) ?? "", r.int(1)))
        }
        return out
    }

    /// The record whose own id is `id`.
    public func messageRecord(id: Int64) throws(StoreError) -> MessageRow? {
        var row: MessageRow?
        try query("SELECT \(MessageRow.columns) FROM messages WHERE id = ?", [.int(id)]) { (r: Statement) throws(StoreError) in
            row = MessageRow(r)
        }
        return row
    }

    /// The record a delivery (a recipient's message id) belongs to.
    public func messageOfDelivery(_ id: Int64) throws(StoreError) -> Int64? {
        try scalar("SELECT message FROM deliveries WHERE id = ?", [.int(id)])
    }

    /// A record's recipients in order, at most `limit` (all when nil).
    public func recipients(of m: MessageRow, limit: Int?) throws(StoreError) -> [RecipientRow] {
        var out: [RecipientRow] = []
        guard m.recipients > 0 else { return out }
        try query("SELECT device, token, id, status, error, canonical, expires_at, fault, delivered_at, settled_at, client_delivery FROM deliveries WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                  [.int(m.id), .int(m.id + Int64(m.recipients)), .int(Int64(limit ?? -1))]) { (r: Statement) throws(StoreError) in
            out.append(RecipientRow(device: r.optionalInt(0), token: r.text(1), id: r.int(2), status: r.text(3) ?? "", error: r.text(4),
                                    canonical: r.optionalInt(5), expiresAt: r.int(6), fault: r.text(7),
                                    deliveredAt: r.optionalInt(8), settledAt: r.optionalInt(9), clientDelivery: r.text(10)))
        }
        return out
    }

    /// One delivery as an inbox entry.
    /// One delivery row's status and expiry only: what a status filter needs to pass over an
    /// entry without reading its message.
    func deliveryStatus(_ deliveryID: Int64) throws(StoreError) -> (status: String, expiresAt: Int64)? {
        let s = try statement("SELECT status, expires_at FROM deliveries WHERE id = ?")
        defer { s.reset() }
        try s.bind([.int(deliveryID)])
        guard try s.step() else { return nil }
        return (s.text(0) ?? "", s.int(1))
    }

    public func inboxRow(_ deliveryID: Int64) throws(StoreError) -> InboxRow? {
        var row: InboxRow?
        try query("""
            SELECT d.id, m.suffix, d.status, m.accepted_at, d.delivered_at, d.expires_at, m.collapse_key, m.priority,
              m.transport, m.target_kind, m.data, m.notification, m.target_value, m.time_to_live, m.flags, m.platforms,
              m.error_detail, d.client_delivery
            FROM deliveries d JOIN messages m ON m.id = d.message WHERE d.id = ?
            """, [.int(deliveryID)]) { (r: Statement) throws(StoreError) in
            row = InboxRow(id: r.int(0), suffix: UInt32(truncatingIfNeeded: r.int(1)), status: r.text(2) ?? "", acceptedAt: r.int(3),
                           deliveredAt: r.optionalInt(4), expiresAt: r.int(5), collapseKey: r.text(6), priority: r.text(7),
                           transport: r.text(8), targetKind: r.text(9), data: r.text(10), notification: r.text(11), targetValue: r.text(12),
                           timeToLive: r.int(13), flags: r.int(14), platforms: r.text(15), errorDetail: r.text(16),
                           clientDelivery: r.text(17))
        }
        return row
    }
}
