public import FCMModel
import FCMCore
import FCMStore
import Platform

/// One device's inbox index: its delivery ids, ascending. The oldest live in the store's inbox
/// chunks (`Store+Inbox.swift`), up to `chunkedThrough`; memory holds only the ids after it, so
/// what the engine keeps is bounded by the devices, not by history.
///
/// Once `recent` holds a full chunk past what is already on its way, the oldest `InboxChunk.size`
/// ids are queued for the store, in the same commit batch as the send that filled them. They stay
/// in `recent` until that commit succeeded (a reader never misses them: before, it finds them
/// here; after, in the store, below `chunkedThrough`). One batch of chunks is on its way at a
/// time.
///
/// Every device has one (10,000 in the bench), so it is kept small: 32 bytes, and `recent` grows
/// by half its size, not by doubling (a device holding 10 ids had room for 16).
struct DeviceInbox: Sendable {
    var recent: [Int64] = []
    /// The last id of the device's last stored chunk (0: none).
    var chunkedThrough: Int64 = 0
    /// How many ids the stored chunks hold, pruned ones included (an upper bound for counts).
    var chunkedCount = 0
    /// `inFlight`, 0 for none (ids are positive): an optional would take 16 bytes.
    private var inFlightLast: Int64 = 0

    init(chunkedThrough: Int64 = 0, chunkedCount: Int = 0) {
        self.chunkedThrough = chunkedThrough
        self.chunkedCount = chunkedCount
    }

    /// The last id of the chunk being committed, if one is.
    var inFlight: Int64? {
        get { inFlightLast == 0 ? nil : inFlightLast }
        set { inFlightLast = newValue ?? 0 }
    }

    /// Adds the newest id; true when a full chunk waits to be stored.
    mutating func append(_ id: Int64) -> Bool {
        if recent.count == recent.capacity { recent.reserveCapacity(Swift.max(4, recent.count + recent.count / 2)) }
        recent.append(id)
        return inFlightLast == 0 && recent.count >= InboxChunk.size
    }

    /// The ids after `afterID` still in memory.
    func recent(after afterID: Int64) -> ArraySlice<Int64> {
        recent[DeviceInbox.firstAfter(afterID, in: recent)...]
    }

    /// At least how many ids the inbox holds after `afterID` (exactly, when none of them is
    /// chunked).
    func countBound(after afterID: Int64) -> Int {
        recent(after: afterID).count + (afterID < chunkedThrough ? chunkedCount : 0)
    }

    /// The position of the first entry of the ascending `ids` greater than `afterID`.
    static func firstAfter(_ afterID: Int64, in ids: [Int64]) -> Int {
        var lo = 0, hi = ids.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ids[mid] <= afterID { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The full chunks `recent` holds beyond the ones in flight (none while some are), oldest
    /// first; marks them in flight.
    mutating func nextChunks() -> [[Int64]] {
        guard inFlight == nil, recent.count >= InboxChunk.size else { return [] }
        var chunks: [[Int64]] = []
        var start = 0
        while recent.count - start >= InboxChunk.size {
            chunks.append(Array(recent[start..<start + InboxChunk.size]))
            start += InboxChunk.size
        }
        inFlight = chunks.last?.last
        return chunks
    }

    /// The `count` chunks ending at `last` were committed: their ids leave memory.
    mutating func chunksStored(through last: Int64, count: Int) {
        guard inFlight == last else { return }
        inFlight = nil
        recent.removeFirst(DeviceInbox.firstAfter(last, in: recent))
        // A store from before chunks loaded every id here: give that room back.
        if recent.capacity > 4 * InboxChunk.size {
            var fresh: [Int64] = []
            fresh.reserveCapacity(Swift.max(recent.count, InboxChunk.size))
            fresh.append(contentsOf: recent)
            recent = fresh
        }
        chunkedThrough = max(chunkedThrough, last)
        chunkedCount += count * InboxChunk.size
    }

    /// Takes pruned ids (ascending) out of memory; those already chunked only lower the count.
    mutating func forget(_ ids: [Int64]) {
        var read = 0, write = 0, j = 0
        // Both ascending, the pruned ones mostly at the front: compact that front, then close
        // the gap once.
        while read < recent.count && j < ids.count {
            if recent[read] == ids[j] {
                read += 1
                j += 1
            } else if recent[read] > ids[j] {
                j += 1
            } else {
                recent[write] = recent[read]
                write += 1
                read += 1
            }
        }
        if write < read { recent.removeSubrange(write..<read) }
        chunkedCount = max(0, chunkedCount - DeviceInbox.firstAfter(chunkedThrough, in: ids))
    }
}

extension EngineState {
    /// Adds a delivery to its device's inbox index; true when the device now has a full chunk
    /// to store (`Engine.queueInboxChunks`).
    mutating func addToInbox(device: Int64, id: Int64) -> Bool {
        inbox[device, default: DeviceInbox()].append(id)
    }

    /// The full chunks of the given devices' inboxes not yet on their way to the store.
    mutating func fullInboxChunks(of devices: some Sequence<Int64>) -> [(device: Int64, chunks: [[Int64]])] {
        var out: [(device: Int64, chunks: [[Int64]])] = []
        for d in devices {
            guard let chunks = inbox[d]?.nextChunks(), !chunks.isEmpty else { continue }
            out.append((d, chunks))
        }
        return out
    }
}

extension Engine {
    /// Queues the full chunks of `devices`' inboxes (called under the state lock, right after
    /// the writes that filled them, so they commit in the same batch); once committed their ids
    /// leave memory. A failed commit leaves them in memory: the next delivery to the device
    /// queues them again (and the state is read back from the store anyway:
    /// `Engine+Recovery.swift`).
    @discardableResult
    func queueInboxChunks(of devices: some Sequence<Int64>, state s: inout EngineState) -> Bool {
        let full = s.fullInboxChunks(of: devices)
        guard !full.isEmpty else { return false }
        let rows = full.flatMap { f in f.chunks.map { (device: f.device, ids: $0) } }
        _ = submit([Writes.inboxChunks(rows)], wakeWriter: false) { [self] error in
            guard error == nil else { return }
            state.withLock { s in
                for f in full {
                    guard let last = f.chunks.last?.last else { continue }
                    s.inbox[f.device]?.chunksStored(through: last, count: f.chunks.count)
                }
            }
        }
        return true
    }

    /// At a start: a store from before chunks holds every delivery in memory; chunks them all.
    func chunkLoadedInboxes() {
        if state.withLock({ s in queueInboxChunks(of: Array(s.inbox.keys), state: &s) }) { store.drain() }
    }

    /// The message-list filter for a token: its device's chunked ids up to where memory starts,
    /// and the ids in memory.
    func tokenFilter(_ token: String) -> (device: Int64?, chunked: Int64, recent: [Int64], token: String) {
        state.withLock { s in
            guard let id = s.tokenIndex[token] else { return (nil, 0, [], token) }
            let entry = s.inbox[id] ?? DeviceInbox()
            return (id, entry.chunkedThrough, entry.recent, token)
        }
    }
}

extension Engine {
    /// A device's inbox entries, oldest first, after delivery row `afterID`; or newest first
    /// (`newestFirst`), before delivery row `afterID` (0: from the newest).
    public func inbox(_ token: String, status: String?, afterID: Int64, limit: Int,
                      newestFirst: Bool = false) throws(EngineError) -> (items: [InboxEntry], next: Int64?) {
        if let status, !inboxStatuses.contains(status) {
            throw .badRequest("status must be one of " + inboxStatusList.joined(separator: ", "))
        }
        let (device, index, platform, realClient) = try inboxIndex(of: token)
        let now = clock.nowMillis()
        do {
            return try store.read { (c: StoreReader) throws(StoreError) -> ([InboxEntry], Int64?) in
                var items: [InboxEntry] = []
                var lastID: Int64 = 0
                var next: Int64?
                // False once the page is full (`next` then says where the following one starts).
                func take(_ id: Int64) throws(StoreError) -> Bool {
                    // Under a status filter, an entry of another status is passed over on its
                    // delivery row alone (a fifth of the cost of reading its message too).
                    if let status {
                        guard let d = try c.deliveryStatus(id), Self.inboxStatus(d.status, expiresAt: d.expiresAt, now: now) == status else {
                            return true
                        }
                    }
                    guard let r = try c.inboxRow(id), let st = Self.inboxStatus(of: r, now: now) else { return true }
                    if let status, status != st { return true }
                    if items.count == limit {
                        next = lastID
                        return false
                    }
                    lastID = r.id
                    var entry = InboxEntry(row: r, status: st, platform: platform, blocks: rooms.recordBlocks)
                    entry.realClient = realClient
                    items.append(entry)
                    return true
                }
                if newestFirst {
                    // Memory first (the newest), then the chunks, newest first.
                    let before = afterID == 0 ? Int64.max : afterID
                    for id in index.recent.reversed() where id < before {
                        guard try take(id) else { break }
                    }
                    if next == nil {
                        try c.inboxChunkIDsNewestFirst(device: device, before: before, through: index.chunkedThrough, take)
                    }
                    return (items, next)
                }
                // Chunks first (up to where memory starts, as of the lock above), then memory.
                try c.inboxChunkIDs(device: device, after: afterID, through: index.chunkedThrough, take)
                if next == nil {
                    for id in index.recent(after: afterID) {
                        guard try take(id) else { break }
                    }
                }
                return (items, next)
            }
        } catch {
            throw .internal(error.description)
        }
    }

    /// One entry of a device's inbox, by its message id. It is looked for where the device's
    /// inbox index keeps it (memory, or the one stored chunk that would hold it), never by paging
    /// through the inbox: the same cost with ten entries as with a million. A message id that is
    /// not one of the device's entries (another device's, malformed, pruned) is `notFound`.
    public func inboxEntry(_ token: String, messageID: String) throws(EngineError) -> InboxEntry {
        let (device, index, platform, realClient) = try inboxIndex(of: token)
        let missing = EngineError.notFound("message '\(messageID)' is not in the inbox of device '\(token)'")
        guard let wanted = MessageID(messageID) else { throw missing }
        let id = wanted.micros
        let now = clock.nowMillis()
        let entry: InboxEntry?
        do {
            entry = try store.read { (c: StoreReader) throws(StoreError) -> InboxEntry? in
                // In memory (ids after the stored chunks, as of the lock above), else in the
                // first chunk that ends at or after it.
                let i = DeviceInbox.firstAfter(id - 1, in: index.recent)
                var held = i < index.recent.count && index.recent[i] == id
                if !held {
                    try c.inboxChunkIDs(device: device, after: id - 1, through: index.chunkedThrough) { first in
                        held = first == id
                        return false
                    }
                }
                guard held, let r = try c.inboxRow(id), r.suffix == wanted.suffix, let st = Self.inboxStatus(of: r, now: now) else { return nil }
                var entry = InboxEntry(row: r, status: st, platform: platform, blocks: rooms.recordBlocks)
                entry.realClient = realClient
                return entry
            }
        } catch {
            throw .internal(error.description)
        }
        guard let entry else { throw missing }
        return entry
    }

    /// The device of `token`, a copy of its inbox index and its platform, as of now; `notFound`
    /// for an unknown token.
    private func inboxIndex(of token: String) throws(EngineError) -> (device: Int64, index: DeviceInbox, platform: Platform, realClient: Bool) {
        let found: (Int64, DeviceInbox, Platform, Bool)? = state.withLock { s in
            guard let id = s.tokenIndex[token], let device = s.devices[id] else { return nil }
            return (id, s.inbox[id] ?? DeviceInbox(), device.platform, device.client != nil)
        }
        guard let found else { throw .notFound("device '\(token)' does not exist") }
        return found
    }

    /// The status an inbox entry shows for delivery row `r`, nil for a row that is not an inbox
    /// entry (a failed recipient). A held message past its TTL reads as expired before the
    /// sweep writes it so.
    private static func inboxStatus(of r: InboxRow, now: Int64) -> String? {
        inboxStatus(r.status, expiresAt: r.expiresAt, now: now)
    }

    private static func inboxStatus(_ status: String, expiresAt: Int64, now: Int64) -> String? {
        guard inboxStatuses.contains(status) else { return nil }
        return status == "pending" && expiresAt <= now ? "expired" : status
    }

    /// The device of `token` and at least how many deliveries its inbox holds after `afterID`,
    /// whatever their status (at least as many as any page can show); nil for an unknown device.
    private func inboxCount(_ token: String, afterID: Int64) -> (device: Int64, count: Int)? {
        state.withLock { s in
            guard let id = s.tokenIndex[token] else { return nil }
            return (id, (s.inbox[id] ?? DeviceInbox()).countBound(after: afterID))
        }
    }

    /// Long poll: answers as soon as the inbox holds at least `min` matching entries, or when
    /// `waitSeconds` have passed (with what there is). `reply` runs at once or later, on another
    /// thread; no thread waits meanwhile.
    ///
    /// A device that does not exist yet is waited for like an empty inbox (a token registers on
    /// its first send, which may be the one awaited); if it still does not exist when the wait
    /// ends, the answer is an empty page, or `notFound` under `--unknown-tokens reject` (nothing would
    /// have made it but the control API).
    public func waitForInbox(_ token: String, status: String?, afterID: Int64, limit: Int, min: Int, waitSeconds: Double,
                             reply: @escaping @Sendable (Result<(items: [InboxEntry], next: Int64?), EngineError>) -> Void) {
        // A page holds at most `limit` entries: a `min` above it is met by a full page.
        let need = Swift.min(min, limit)
        do {
            let first = try inbox(token, status: status, afterID: afterID, limit: limit)
            if first.items.count >= need || waitSeconds <= 0 { return reply(.success(first)) }
        } catch {
            guard error.code == .notFound, waitSeconds > 0 else { return reply(.failure(error)) }
        }
        let deadline = monotonicNanos() + UInt64(waitSeconds * 1e9)
        longPolls.add(deadline: deadline) { [self] final -> LongPolls.Check in
            // Re-checked after the changes to its device: the in-memory count rules most checks
            // out without a query (hundreds of waiting polls each paging through SQLite on every
            // send took a core).
            guard let (device, n) = inboxCount(token, afterID: afterID) else {
                guard final else { return .waiting(device: nil) }
                if unknownTokens == .register {
                    reply(.success((items: [], next: nil)))
                } else {
                    reply(.failure(.notFound("device '\(token)' does not exist")))
                }
                return .answered
            }
            if !final, n < need { return .waiting(device: device) }
            do throws(EngineError) {
                let page = try inbox(token, status: status, afterID: afterID, limit: limit)
                guard page.items.count >= need || final else { return .waiting(device: device) }
                reply(.success(page))
            } catch {
                reply(.failure(error))
            }
            return .answered
        }
    }
}
