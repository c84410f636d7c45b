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
    /// Accepted at or before this time.
    public var untilMillis: Int64?
    /// The record's error or a recipient's (`NotRegistered`, `UNREGISTERED`, `Fault` …).
    public var error: String?
    /// The `message_id` an XMPP client gave its message.
    public var xmppMessageID: String?
    /// The `name` a v1 send was answered (`projects/{project_id}/messages/{id}`).
    public var v1Name: String?
    /// `recipients=N`: at most N recipients per record (the first N), with `recipients_total`.
    public var recipientsLimit: Int?
    public init() {}
}

/// A message record as the store holds it: its row, its recipients (the first
/// `recipientsLimit` when given) with the tokens of the devices they name.
public struct MessageRecord: Sendable {
    public let row: MessageRow
    public let recipients: [RecipientRow]
    public let tokens: [Int64: String]
    public let recipientsLimit: Int?
}

/// One inbox entry: the delivery and its message, and its status as of now (a held message past
/// its TTL reads as expired before the sweep writes it so).
public struct InboxEntry: Sendable {
    public let row: InboxRow
    public let status: String
    /// The device's platform, whose form the entry's `effective` payload takes.
    public let platform: Platform
}

/// Inbox statuses (docs/spec/control-api.md "Inbox entries").
let inboxStatuses: Set<String> = ["delivered", "pending", "expired", "collapsed", "dropped"]

extension Engine {
    /// Message records, newest first, as JSON texts; `next` is the cursor of the following page.
    public func messageRecords(_ f: MessageFilter, limit: Int, before cursor: Int64?) throws(ControlError) -> (items: [MessageRecord], next: Int64?) {
        try expireDue()
        // The answer of a refused or XMPP send is kept on its record after it went out (an HTTP
        // send's comes with its record): let those land first.
        store.drain()
        var q = MessageQuery()
        q.before = cursor
        q.senderID = f.senderID
        q.transport = f.transport
        q.clientMessageID = f.xmppMessageID
        q.v1Name = f.v1Name
        q.since = f.sinceMillis
        q.until = f.untilMillis
        q.error = f.error
        // Topic names match case-insensitively, as sends match subscribers.
        q.topicTarget = f.topic.map { "/topics/" + Topics.key($0) }
        if let t = f.token {
            // The device's deliveries come from the in-memory inbox index; deleted devices and
            // tokens that never were devices are found by the token kept on the row.
            q.token = (state.withLock { s in s.tokenIndex[t].flatMap { s.inbox[$0] } ?? [] }, t)
        }
        if let st = f.status {
            switch st {
            case "accepted", "rejected": q.recordStatus = st
            case _ where inboxStatuses.contains(st) || st == "failed": q.recipientStatus = st
            default:
                throw .badRequest("status must be one of accepted, rejected, failed, delivered, pending, expired, collapsed, dropped")
            }
        }
        q.limit = limit + 1
        let now = clock.nowMillis()
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([MessageRecord], Int64?) in
                var rows = try c.messageRecords(q)
                var next: Int64?
                if rows.count > limit {
                    rows.removeLast()
                    next = rows.last?.id
                }
                return (try rows.map { (row: MessageRow) throws(StoreError) -> MessageRecord in
                    try record(row, c, now: now, recipientsLimit: f.recipientsLimit)
                }, next)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// One message record by any message id it issued (a multicast's record answers for every
    /// recipient's id).
    public func messageRecord(_ id: String, recipientsLimit: Int? = nil) throws(ControlError) -> MessageRecord {
        // A refused or XMPP send's answer is kept on its record after it went out: let it land first.
        store.drain()
        // A topic send's id is the number FCM answered; it is the record's own stamp.
        if let number = Int64(id), number > 0 {
            let found: MessageRecord?
            do {
                found = try store.read { (c: SQLiteConnection) throws(StoreError) -> MessageRecord? in
                    try c.messageRecord(id: number).map { (r: MessageRow) throws(StoreError) -> MessageRecord in
                        try record(r, c, now: clock.nowMillis(), recipientsLimit: recipientsLimit)
                    }
                }
            } catch {
                throw .internal(error.description)
            }
            guard let found else { throw .notFound("message '\(id)' does not exist") }
            return found
        }
        guard let wanted = MessageID(id) else { throw .notFound("message '\(id)' does not exist") }
        let now = clock.nowMillis()
        let found: MessageRecord?
        do {
            found = try store.read { (c: SQLiteConnection) throws(StoreError) -> MessageRecord? in
                // A recipient's id is a delivery row id; a record without recipients (400, 401)
                // is found by its own id.
                let messageID = try c.messageOfDelivery(wanted.micros) ?? wanted.micros
                guard let row = try c.messageRecord(id: messageID), row.suffix == wanted.suffix else { return nil }
                return try record(row, c, now: now, recipientsLimit: recipientsLimit)
            }
        } catch {
            throw .internal(error.description)
        }
        guard let found else { throw .notFound("message '\(id)' does not exist") }
        return found
    }

    private func record(_ m: MessageRow, _ c: SQLiteConnection, now: Int64, recipientsLimit: Int? = nil) throws(StoreError) -> MessageRecord {
        var recipients = try c.recipients(of: m, limit: recipientsLimit)
        // A held message past its TTL reads as expired before the sweep writes it so.
        for i in recipients.indices where recipients[i].status == "pending" && recipients[i].expiresAt <= now {
            recipients[i].status = "expired"
        }
        let tokens = self.tokens(for: recipients.flatMap { [$0.device, $0.canonical].compactMap { $0 } })
        return MessageRecord(row: m, recipients: recipients, tokens: tokens, recipientsLimit: recipientsLimit)
    }
}

extension Engine {
    /// A device's inbox entries, oldest first, after delivery row `afterID`.
    public func inbox(_ token: String, status: String?, afterID: Int64, limit: Int) throws(ControlError) -> (items: [InboxEntry], next: Int64?) {
        if let status, !inboxStatuses.contains(status) {
            throw .badRequest("status must be one of delivered, pending, expired, collapsed, dropped")
        }
        let found: ([Int64], Platform)? = state.withLock { s in
            guard let id = s.tokenIndex[token], let device = s.devices[id] else { return nil }
            let all = s.inbox[id] ?? []
            return (Array(all[Self.firstAfter(afterID, in: all)...]), device.platform)
        }
        guard let (candidates, platform) = found else { throw .notFound("device '\(token)' does not exist") }
        let now = clock.nowMillis()
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([InboxEntry], Int64?) in
                var items: [InboxEntry] = []
                var lastID: Int64 = 0
                for id in candidates {
                    guard let r = try c.inboxRow(id), inboxStatuses.contains(r.status) else { continue }
                    // A held message past its TTL reads as expired before the sweep writes it so.
                    let st = r.status == "pending" && r.expiresAt <= now ? "expired" : r.status
                    if let status, status != st { continue }
                    if items.count == limit { return (items, lastID) }
                    lastID = r.id
                    items.append(InboxEntry(row: r, status: st, platform: platform))
                }
                return (items, nil)
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

    /// Long poll: answers as soon as the inbox holds at least `min` matching entries, or when
    /// `waitSeconds` have passed (with what there is). `reply` runs at once or later, on another
    /// thread; no thread waits meanwhile.
    public func waitForInbox(_ token: String, status: String?, afterID: Int64, limit: Int, min: Int, waitSeconds: Double,
                             reply: @escaping @Sendable (Result<(items: [InboxEntry], next: Int64?), ControlError>) -> Void) {
        let first: (items: [InboxEntry], next: Int64?)
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
