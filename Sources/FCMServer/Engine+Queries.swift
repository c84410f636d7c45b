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
            // The device's deliveries by its id; a deleted device's, and those of tokens that
            // never were devices, by the token kept on the row.
            q.token = (state.withLock { $0.tokenIndex[t] }, t)
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

/// What a waiting long poll compares to tell whether its device's inbox may have changed: per
/// device, the newest delivery decided for it, and how often its held deliveries were settled
/// (delivered when it came online, expired). One per device, dropped with the device.
struct InboxMark: Sendable, Equatable {
    /// Set as a send is decided, before its commit (the poll compares it with the newest
    /// delivery it found committed, so one in flight is looked for again after its commit).
    var newest: Int64 = 0
    /// Counted after the commit that settled them, so a poll that reads the count and then
    /// queries sees what was counted.
    var settled: UInt64 = 0

    mutating func delivered(_ id: Int64) {
        if id > newest { newest = id }
    }
}

extension Engine {
    /// A device's inbox entries, oldest first, after delivery row `afterID`; `next` is the cursor
    /// of the following page.
    public func inbox(_ token: String, status: String?, afterID: Int64, limit: Int) throws(ControlError) -> (items: [InboxEntry], next: Int64?) {
        let page = try inboxPage(token, status: status, afterID: afterID, limit: limit, newest: false)
        return (page.items, page.next)
    }

    /// `inbox`, and with `newest` the device's newest delivery committed (what a long poll has
    /// seen; 0 without).
    private func inboxPage(_ token: String, status: String?, afterID: Int64, limit: Int, newest: Bool = true) throws(ControlError)
        -> (items: [InboxEntry], next: Int64?, newest: Int64) {
        if let status, !inboxStatuses.contains(status) {
            throw .badRequest("status must be one of delivered, pending, expired, collapsed, dropped")
        }
        let found: (Int64, Platform)? = state.withLock { s in
            guard let id = s.tokenIndex[token], let device = s.devices[id] else { return nil }
            return (id, device.platform)
        }
        guard let (device, platform) = found else { throw .notFound("device '\(token)' does not exist") }
        let now = clock.nowMillis()
        do {
            return try store.read { (c: SQLiteConnection) throws(StoreError) -> ([InboxEntry], Int64?, Int64) in
                let rows = try c.inboxRows(device: device, after: afterID, status: status, now: now, limit: limit + 1)
                let committed = newest ? try c.newestDelivery(device: device) : 0
                let items = rows.prefix(limit).map { r in
                    // A held message past its TTL reads as expired before the sweep writes it so.
                    InboxEntry(row: r, status: r.status == "pending" && r.expiresAt <= now ? "expired" : r.status, platform: platform)
                }
                return (items, rows.count > limit ? items.last?.row.id : nil, committed)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// The device's mark (nil: no device has the token now).
    private func inboxMark(_ token: String) -> InboxMark? {
        state.withLock { s in s.tokenIndex[token].map { s.inboxMarks[$0] ?? InboxMark() } }
    }

    /// Held deliveries of `devices` took a new status and that is committed: long polls on
    /// them look again.
    func noteSettled(_ devices: [Int64]) {
        guard !devices.isEmpty else { return }
        state.withLock { s in
            for id in devices where s.devices[id] != nil { s.inboxMarks[id, default: InboxMark()].settled &+= 1 }
        }
        notifyChanged()
    }

    /// Long poll: answers as soon as the inbox holds at least `min` matching entries, or when
    /// `waitSeconds` have passed (with what there is). `reply` runs at once or later, on another
    /// thread; no thread waits meanwhile.
    public func waitForInbox(_ token: String, status: String?, afterID: Int64, limit: Int, min: Int, waitSeconds: Double,
                             reply: @escaping @Sendable (Result<(items: [InboxEntry], next: Int64?), ControlError>) -> Void) {
        // What the poll last saw: the mark is read before the query, so a change counted after
        // that read is looked at again.
        let mark = inboxMark(token) ?? InboxMark()
        let first: (items: [InboxEntry], next: Int64?, newest: Int64)
        do {
            first = try inboxPage(token, status: status, afterID: afterID, limit: limit, newest: waitSeconds > 0)
        } catch {
            return reply(.failure(error))
        }
        // A page holds at most `limit` entries: a `min` above it is met by a full page.
        let need = Swift.min(min, limit)
        if first.items.count >= need || waitSeconds <= 0 { return reply(.success((first.items, first.next))) }
        // Deliveries up to `afterID` are never on its pages, however new.
        let seen = Locked(InboxMark(newest: Swift.max(first.newest, afterID), settled: mark.settled))
        let deadline = monotonicNanos() + UInt64(waitSeconds * 1e9)
        longPolls.add(deadline: deadline) { [self] final in
            // Re-checked after every commit: only a poll whose device got a delivery or had one
            // settled since it last looked queries SQLite (hundreds of waiting polls each paging
            // through SQLite on every send took a core). A device gone is looked up (a 404).
            let now = inboxMark(token)
            if !final, let now, seen.withLock({ now.newest <= $0.newest && now.settled == $0.settled }) { return false }
            do throws(ControlError) {
                let page = try inboxPage(token, status: status, afterID: afterID, limit: limit)
                guard page.items.count >= need || final else {
                    seen.withLock { $0 = InboxMark(newest: Swift.max(page.newest, afterID), settled: now?.settled ?? 0) }
                    return false
                }
                reply(.success((page.items, page.next)))
            } catch {
                reply(.failure(error))
            }
            return true
        }
    }
}
