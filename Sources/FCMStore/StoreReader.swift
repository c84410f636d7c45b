/// What the engine may read from the store: typed rows, never SQL. `Store.read` hands one out
/// for the length of a read, so everything read through it is one consistent state; the
/// statements are the connection's own (Store+Messages.swift, Store+Inbox.swift,
/// Store+Load.swift).
public struct StoreReader {
    private let c: SQLiteConnection

    init(_ c: SQLiteConnection) { self.c = c }

    /// Start-up: the whole state, resource by resource.
    public var loader: StoreLoader { StoreLoader(c) }

    /// Message rows matching `q`, newest first.
    public func messageRecords(_ q: MessageQuery) throws(StoreError) -> [MessageRow] { try c.messageRecords(q) }

    /// Where the slice of `count` records below `before` starts (nil: at the oldest).
    public func messageSliceStart(before: Int64?, count: Int) throws(StoreError) -> Int64? {
        try c.messageSliceStart(before: before, count: count)
    }

    /// How many rows match `q`, counted up to `cap`.
    public func messageCount(_ q: MessageQuery, cap: Int) throws(StoreError) -> Int { try c.messageCount(q, cap: cap) }

    /// A message's recipients by status (a held one past its TTL as expired at `now`).
    public func recipientCounts(of m: MessageRow, now: Int64) throws(StoreError) -> [(String, Int64)] {
        try c.recipientCounts(of: m, now: now)
    }

    /// One message row by its id.
    public func messageRecord(id: Int64) throws(StoreError) -> MessageRow? { try c.messageRecord(id: id) }

    /// The message a delivery row belongs to.
    public func messageOfDelivery(_ id: Int64) throws(StoreError) -> Int64? { try c.messageOfDelivery(id) }

    /// A message's recipients (the first `limit` when given).
    public func recipients(of m: MessageRow, limit: Int?) throws(StoreError) -> [RecipientRow] { try c.recipients(of: m, limit: limit) }

    /// One delivery's status and expiry (nothing of its message).
    public func deliveryStatus(_ deliveryID: Int64) throws(StoreError) -> (status: String, expiresAt: Int64)? {
        try c.deliveryStatus(deliveryID)
    }

    /// One inbox entry's row by its delivery id.
    public func inboxRow(_ deliveryID: Int64) throws(StoreError) -> InboxRow? { try c.inboxRow(deliveryID) }

    /// A device's chunked delivery ids above `after` and up to `through`, ascending, until `body`
    /// returns false.
    public func inboxChunkIDs(device: Int64, after: Int64, through: Int64,
                              _ body: (Int64) throws(StoreError) -> Bool) throws(StoreError) {
        try c.inboxChunkIDs(device: device, after: after, through: through, body)
    }

    /// The same below `before`, newest first.
    public func inboxChunkIDsNewestFirst(device: Int64, before: Int64, through: Int64,
                                         _ body: (Int64) throws(StoreError) -> Bool) throws(StoreError) {
        try c.inboxChunkIDsNewestFirst(device: device, before: before, through: through, body)
    }
}
