public import FCMModel
public import FCMCore
import FCMStore
import Platform


extension InboxEntry {
    // What a client room writes of an entry, read without rendering it as JSON first.

    /// When it was accepted and when it expires (mock clock, ms).
    public var acceptedAtMillis: Int64 { row.acceptedAt }
    public var expiresAtMillis: Int64 { row.expiresAt }
    /// A `deleted_messages` notice, and how many messages it says were deleted.
    public var deletedMessages: Int64? { row.targetKind == "deleted_messages" ? Int64(row.targetValue ?? "") ?? 0 : nil }
    /// Sent through the Web Push endpoint, and its record's `webpush` block.
    public var isWebPush: Bool { row.transport == Transport.webpush.rawValue }
    public var webPushBlock: JSONObject? { row.platforms.flatMap(EffectivePayload.storedPlatforms)?.webpush }
    /// What the device received, in its platform's form (the entry's `effective`).
    public var effective: JSONObject? { Render.effective(row, platform: platform, blocks: blocks).objectValue }
}

/// Inbox statuses (docs/spec/control-api.md "Inbox entries").
/// The statuses a device's inbox entry can have, in the order error messages list them.
let inboxStatusList = ["delivered", "pending", "sent", "client_rejected", "expired", "collapsed", "dropped", "replaced",
                       "undecryptable", "undeliverable", "deleted"]
let inboxStatuses = Set(inboxStatusList)

extension Engine {
    /// Of the deliveries `ids`, those that ended without reaching their device (expired,
    /// collapsed, dropped, deleted, rejected by a real client, ...) or are no longer stored: none
    /// of them can be delivered from now on. Read from what is committed, so a delivery whose
    /// `delivered` is on its way is never among them.
    /// Read a slice at a time, commits going first between slices.
    public func deliveriesEndedUndelivered(_ ids: [Int64]) -> [Int64] {
        var ended: [Int64] = []
        var start = 0
        while start < ids.count {
            let slice = ids[start..<min(ids.count, start + 256)]
            start += slice.count
            ended += (try? store.readAfterCommits { (c: StoreReader) throws(StoreError) -> [Int64] in
                var found: [Int64] = []
                for id in slice {
                    switch try c.deliveryStatus(id)?.status {
                    case "pending", "sent", "delivered": break
                    default: found.append(id)
                    }
                }
                return found
            }) ?? []
        }
        return ended
    }

    /// Message records, newest first, as JSON texts; `next` is the cursor of the following page;
    /// `total` (when asked for) how many match, at most `MessageFilter.totalCap`.
    public func messageRecords(_ f: MessageFilter, limit: Int, before cursor: Int64?) throws(EngineError)
        -> (items: [MessageRecord], next: Int64?, total: Int?) {
        try expireDue()
        // The answer of a refused or XMPP send is kept on its record after it went out (an HTTP
        // send's comes with its record): let those land first.
        store.drain()
        var q = try messageQuery(f)
        q.excluded = try f.excluded.map { (x: MessageFilter) throws(EngineError) -> MessageQuery in try messageQuery(x) }
        // The records are searched a slice at a time, each in a read of its own, so a search that
        // passes over most of the store (words found nowhere, `not_text` found everywhere)
        // holds the store from sends no longer than a slice takes (`slice(of:below:)`).
        var items: [MessageRecord] = []
        var upper = cursor
        var lastID: Int64?
        var next: Int64?
        do {
            while true {
                let (found, last, start, full) = try store.readAfterCommits {
                    (c: StoreReader) throws(StoreError) -> ([MessageRecord], Int64?, Int64?, Bool) in
                    var part = try Self.slice(of: q, below: upper, c)
                    part.limit = limit + 1 - items.count
                    var rows = try c.messageRecords(part)
                    let full = items.count + rows.count > limit
                    if full { rows.removeLast() }
                    let now = clock.nowMillis()
                    return (try rows.map { (row: MessageRow) throws(StoreError) -> MessageRecord in
                        try record(row, c, now: now, recipientsLimit: f.recipientsLimit, counts: f.recipientCounts)
                    }, rows.last?.id, part.from, full)
                }
                items += found
                if let last { lastID = last }
                if full {
                    // A full page: the next one starts below its last record.
                    next = lastID
                    break
                }
                guard let start else { break }  // the slice reached the oldest record
                upper = start
            }
            // A first page with no next page is the whole answer: counted already.
            var total: Int?
            if let cap = f.totalCap {
                total = cursor == nil && next == nil ? min(items.count, cap) : try countRecords(q, cap: cap)
            }
            return (items, next, total)
        } catch {
            throw .internal(error.description)
        }
    }

    /// Records a search takes from the store in one read.
    static let searchSlice = 2_000

    /// `q` within the slice of `searchSlice` records below `upper` (nil: from the newest); its
    /// `from` is nil when the slice reaches the oldest. The whole of `q` when it names a token,
    /// kept or left out: its device's deliveries are gathered for every read of it, so once, not
    /// once a slice.
    private static func slice(of q: MessageQuery, below upper: Int64?, _ c: StoreReader) throws(StoreError) -> MessageQuery {
        var part = q
        part.before = upper
        guard q.token == nil && q.excluded.allSatisfy({ $0.token == nil }) else { return part }
        part.from = try c.messageSliceStart(before: upper, count: searchSlice)
        return part
    }

    /// How many records match `q` (its cursor aside), up to `cap`: a slice at a time, as the
    /// search.
    private func countRecords(_ q: MessageQuery, cap: Int) throws(StoreError) -> Int {
        var total = 0
        var upper: Int64?
        while total < cap {
            let (n, start) = try store.readAfterCommits { (c: StoreReader) throws(StoreError) -> (Int, Int64?) in
                let part = try Self.slice(of: q, below: upper, c)
                return (try c.messageCount(part, cap: cap - total), part.from)
            }
            total += n
            guard let start else { break }
            upper = start
        }
        return min(total, cap)
    }

    /// A filter as the store applies it (its cursor and limit aside).
    private func messageQuery(_ f: MessageFilter) throws(EngineError) -> MessageQuery {
        var q = MessageQuery()
        q.senderID = f.senderID
        q.transport = f.transport
        q.clientMessageID = f.xmppMessageID
        q.v1Name = f.v1Name
        q.since = f.sinceMillis
        q.until = f.untilMillis
        q.error = f.error
        q.app = f.app
        q.clientKind = f.clientKind
        // SQLite's lower() folds ASCII only: the words are folded the same way.
        q.text = f.text.map { String(decoding: $0.utf8.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }, as: UTF8.self) }
        // Topic names match case-insensitively, as sends match subscribers.
        q.topicTarget = f.topic.map { Topics.prefix + Topics.key($0) }
        if let t = f.token {
            // The device's deliveries come from the in-memory inbox index; deleted devices and
            // tokens that never were devices are found by the token kept on the row.
            q.token = tokenFilter(t)
        }
        if let st = f.status {
            switch st {
            case "accepted", "rejected": q.recordStatus = st
            case _ where inboxStatuses.contains(st) || st == "failed": q.recipientStatus = st
            default:
                throw .badRequest("status must be one of " + (["accepted", "rejected", "failed"] + inboxStatusList).joined(separator: ", "))
            }
        }
        return q
    }

    /// One message record by any message id it issued (a multicast's record answers for every
    /// recipient's id).
    public func messageRecord(_ id: String, recipientsLimit: Int? = nil, counts: Bool = false) throws(EngineError) -> MessageRecord {
        // A refused or XMPP send's answer is kept on its record after it went out: let it land first.
        store.drain()
        // A topic send's id is the number FCM answered; it is the record's own stamp.
        if let number = Int64(id), number > 0 {
            let found: MessageRecord?
            do {
                found = try store.read { (c: StoreReader) throws(StoreError) -> MessageRecord? in
                    try c.messageRecord(id: number).map { (r: MessageRow) throws(StoreError) -> MessageRecord in
                        try record(r, c, now: clock.nowMillis(), recipientsLimit: recipientsLimit, counts: counts)
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
            found = try store.read { (c: StoreReader) throws(StoreError) -> MessageRecord? in
                // A recipient's id is a delivery row id; a record without recipients (a send
                // refused as a whole) is found by its own id.
                let messageID = try c.messageOfDelivery(wanted.micros) ?? wanted.micros
                guard let row = try c.messageRecord(id: messageID), row.suffix == wanted.suffix else { return nil }
                return try record(row, c, now: now, recipientsLimit: recipientsLimit, counts: counts)
            }
        } catch {
            throw .internal(error.description)
        }
        guard let found else { throw .notFound("message '\(id)' does not exist") }
        return found
    }

    private func record(_ m: MessageRow, _ c: StoreReader, now: Int64, recipientsLimit: Int? = nil,
                        counts: Bool = false) throws(StoreError) -> MessageRecord {
        var recipients = try c.recipients(of: m, limit: recipientsLimit)
        // A held message past its TTL reads as expired before the sweep writes it so.
        for i in recipients.indices where recipients[i].status == "pending" && recipients[i].expiresAt <= now {
            recipients[i].status = "expired"
        }
        let tokens = self.tokens(for: recipients.flatMap { [$0.device, $0.canonical].compactMap { $0 } })
        var out = MessageRecord(row: m, recipients: recipients, tokens: tokens, recipientsLimit: recipientsLimit,
                                blocks: rooms.recordBlocks)
        out.clientDevices = clientDevices(among: recipients.lazy.compactMap(\.device))
        if counts { out.recipientCounts = try c.recipientCounts(of: m, now: now) }
        return out
    }
}
