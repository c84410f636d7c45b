/// Each device's older delivery ids, kept on disk in chunks (`inbox_chunks`): the inbox index.
///
/// The engine keeps a device's newest delivery ids in memory and hands the oldest ones to the
/// store `InboxChunk.size` at a time, so what it holds is bounded by the devices, not by history.
/// A chunk is one row: the highest id it holds (its key), the device, and the ids themselves as
/// deltas in LEB128 varints (two or three bytes an id). One row per chunk, where a row or index
/// entry per delivery would dirty a page of a device-keyed B-tree for every recipient of a
/// multicast (measured: CPU per send up by a third, multicast throughput down by two thirds).
///
/// A device's chunks partition its spilled ids in order: chunk N holds ids after chunk N-1's last
/// and up to its own. Ids whose deliveries were pruned may stay in a chunk that still holds a live
/// one; readers skip ids without a row. A chunk goes when its last live delivery is pruned, with
/// its device, or at a reset.
public enum InboxChunk {
    /// Ids per chunk.
    public static let size = 64

    /// `ids` (ascending) as the first id, then each difference to the one before, in LEB128.
    public static func encode(_ ids: some Collection<Int64>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(ids.count * 3 + 8)
        var previous: Int64 = 0
        for id in ids {
            var v = UInt64(bitPattern: id &- previous)
            previous = id
            while v >= 0x80 {
                out.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            out.append(UInt8(v))
        }
        return out
    }

    /// The ids `encode` wrote; stops at a truncated varint (a damaged row loses its tail only).
    public static func decode(_ bytes: [UInt8]) -> [Int64] {
        var ids: [Int64] = []
        ids.reserveCapacity(bytes.count / 2)
        var previous: Int64 = 0, v: UInt64 = 0, shift: UInt64 = 0
        for b in bytes {
            guard shift < 64 else { return ids }
            v |= UInt64(b & 0x7f) << shift
            if b & 0x80 != 0 {
                shift += 7
                continue
            }
            previous = previous &+ Int64(bitPattern: v)
            ids.append(previous)
            v = 0
            shift = 0
        }
        return ids
    }
}

extension Writes {
    /// Stores device inbox chunks: each `ids` ascending, all after the device's previous chunk.
    public static func inboxChunks(_ chunks: [(device: Int64, ids: [Int64])]) -> WriteOp {
        { c in
            for chunk in chunks {
                guard let last = chunk.ids.last else { continue }
                try c.run("INSERT INTO inbox_chunks(last_id, device, ids) VALUES (?, ?, ?)",
                          [.int(last), .int(chunk.device), .blob(InboxChunk.encode(chunk.ids))])
            }
        }
    }
}

extension SQLiteConnection {
    /// The device's chunked delivery ids above `after` and up to `through`, ascending, until
    /// `body` returns false.
    public func inboxChunkIDs(device: Int64, after: Int64, through: Int64,
                              _ body: (Int64) throws(StoreError) -> Bool) throws(StoreError) {
        guard after < through else { return }
        let s = try statement("SELECT ids FROM inbox_chunks WHERE device = ? AND last_id > ? AND last_id <= ? ORDER BY last_id")
        defer { s.reset() }
        try s.bind([.int(device), .int(after), .int(through)])
        while try s.step() {
            for id in InboxChunk.decode(s.blob(0)) where id > after {
                guard try body(id) else { return }
            }
        }
    }

    /// The device's chunked delivery ids below `before` and up to `through`, newest first, until
    /// `body` returns false: the one chunk that may straddle `before`, then the older ones.
    public func inboxChunkIDsNewestFirst(device: Int64, before: Int64, through: Int64,
                                         _ body: (Int64) throws(StoreError) -> Bool) throws(StoreError) {
        guard through > 0 else { return }  // nothing chunked yet
        let straddling = try statement("""
            SELECT ids FROM inbox_chunks WHERE device = ? AND last_id >= ? AND last_id <= ? ORDER BY last_id LIMIT 1
            """)
        defer { straddling.reset() }
        try straddling.bind([.int(device), .int(before), .int(through)])
        if try straddling.step() {
            for id in InboxChunk.decode(straddling.blob(0)).reversed() where id < before {
                guard try body(id) else { return }
            }
        }
        let older = try statement("SELECT ids FROM inbox_chunks WHERE device = ? AND last_id < ? AND last_id <= ? ORDER BY last_id DESC")
        defer { older.reset() }
        try older.bind([.int(device), .int(before), .int(through)])
        while try older.step() {
            for id in InboxChunk.decode(older.blob(0)).reversed() {
                guard try body(id) else { return }
            }
        }
    }

    /// Every chunked delivery id of the device up to `through`, ascending.
    func allInboxChunkIDs(device: Int64, through: Int64 = Int64.max) throws(StoreError) -> [Int64] {
        var ids: [Int64] = []
        try inboxChunkIDs(device: device, after: Int64.min, through: through) { id in
            ids.append(id)
            return true
        }
        return ids
    }

    /// After deliveries were pruned (`gone`, as the prune's DELETE returned them): deletes each
    /// chunk that held one of them and now holds no delivery that still exists.
    func forgetPrunedChunks(_ gone: [(device: Int64, id: Int64)]) throws(StoreError) {
        var byDevice: [Int64: [Int64]] = [:]
        for g in gone { byDevice[g.device, default: []].append(g.id) }
        for (device, var ids) in byDevice {
            ids.sort()
            var i = 0
            while i < ids.count {
                var chunk: (last: Int64, ids: [Int64])?
                try query("SELECT last_id, ids FROM inbox_chunks WHERE device = ? AND last_id >= ? ORDER BY last_id LIMIT 1",
                          [.int(device), .int(ids[i])]) { (r: Statement) throws(StoreError) in
                    chunk = (r.int(0), InboxChunk.decode(r.blob(1)))
                }
                // Ids past the device's last chunk are in the engine's memory, not on disk.
                guard let chunk else { break }
                while i < ids.count && ids[i] <= chunk.last { i += 1 }
                var live = false
                for id in chunk.ids where try scalar("SELECT 1 FROM deliveries WHERE id = ?", [.int(id)]) != nil {
                    live = true
                    break
                }
                if !live { try run("DELETE FROM inbox_chunks WHERE last_id = ?", [.int(chunk.last)]) }
            }
        }
    }
}

extension StoreLoader {
    /// Each device with chunks: its id, its last chunk's last id, and how many ids its chunks hold
    /// (pruned ones included).
    public func inboxChunkSummary(_ row: (Int64, Int64, Int) -> Void) throws(StoreError) {
        try c.query("SELECT device, max(last_id), count(*) FROM inbox_chunks GROUP BY device") { (r: Statement) throws(StoreError) in
            row(r.int(0), r.int(1), Int(r.int(2)) * InboxChunk.size)
        }
    }
}
