/// Bounded history: the running count of message records, the oldest records as the pruner sees
/// them, deleting them in small batches, and a reset that sets the history tables aside in O(1)
/// for the pruner to empty later. docs/storage.md says what is kept.
import CSQLite
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// The history's bookkeeping, so that neither health nor the pruner ever counts the table.
///
/// Its state changes only under the store's connection lock (the pruner's reads and writes, and a
/// reset's write, all hold it), so a count never mixes the tables from before and after a reset.
final class StoreHistory: Sendable {
    struct State {
        /// Message records in the store, as of the last refresh and the deletions since.
        var messages: Int64 = 0
        /// The highest record id counted: the rows above it are new at the next refresh.
        var watermark: Int64 = 0
        /// Count from scratch at the next refresh (at start, and after a reset swapped the tables).
        var recount = true
        /// The tables resets set aside, still to be emptied (nil: read them from the schema).
        var leftovers: [String]?
        /// `page_count * page_size` of a `:memory:` store, as of the last refresh.
        var memoryBytes: Int64 = 0
    }

    let state = Locked(State())
}

/// One message record's place among the message-id stamps: the record and its deliveries are the
/// stamps `id ..< end` (`end` is `id` plus its recipients, at least one).
public struct MessageSpan: Sendable, Equatable {
    public var id: Int64
    public var end: Int64
    /// When it was accepted (mock clock, milliseconds).
    public var acceptedAt: Int64
    /// Whether a device still holds one of its deliveries (pending, not yet delivered or settled).
    public var held: Bool

    public init(id: Int64, end: Int64, acceptedAt: Int64, held: Bool) {
        self.id = id; self.end = end; self.acceptedAt = acceptedAt; self.held = held
    }
}

extension Store {
    /// Below this many pages in use, a reset deletes the history where it is (a few milliseconds,
    /// and the pages are free at once); above, it sets the tables aside (see `resetHistory`).
    static let inPlaceResetPages: Int64 = 2048

    /// What a device holding a delivery means, in SQL: pending for a device that exists (a deleted
    /// device's pending rows will never be delivered). Rowid ranges only: `NOT INDEXED` keeps the
    /// planner off the pending index, whose scan would cost as much as every held message.
    private static let heldSQL = """
        SELECT DISTINCT message FROM deliveries NOT INDEXED
        WHERE id >= ? AND id < ? AND status = 'pending' AND device IS NOT NULL
        """

    /// Message records in the store (with the mock's own `deleted_messages` notices), as of the
    /// pruner's last pass: a number kept up to date, never a count of the table.
    public var messageCount: Int64 { history.state.withLock { $0.messages } }

    /// The store's size in bytes: the file and its write-ahead log, or for `:memory:` its pages
    /// (`page_count * page_size`, as of the pruner's last pass).
    public var sizeBytes: Int64 {
        if path == ":memory:" { return history.state.withLock { $0.memoryBytes } }
        return Self.fileBytes(path) + Self.fileBytes(path + "-wal")
    }

    private static func fileBytes(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// Brings `messageCount` up to date by counting the records above the watermark (the ones
    /// added since the last call: ids only grow); the whole table at start and after a reset.
    public func refreshHistory() throws(StoreError) {
        let memory = path == ":memory:"
        try readSQL { (c: SQLiteConnection) throws(StoreError) in
            let (recount, mark) = history.state.withLock { ($0.recount, $0.watermark) }
            var n: Int64 = 0
            var top: Int64?
            let sql = recount ? "SELECT count(*), max(id) FROM messages" : "SELECT count(*), max(id) FROM messages WHERE id > ?"
            try c.query(sql, recount ? [] : [.int(mark)]) { (r: Statement) throws(StoreError) in
                n = r.int(0)
                top = r.optionalInt(1)
            }
            let bytes = memory ? (try c.scalar("PRAGMA page_count") ?? 0) * (try c.scalar("PRAGMA page_size") ?? 0) : 0
            history.state.withLock { s in
                s.messages = recount ? n : s.messages + n
                s.recount = false
                if let top { s.watermark = max(s.watermark, top) }
                s.memoryBytes = bytes
            }
        }
    }

    /// The oldest message records from id `start` on, up to the last refresh's watermark: at most
    /// `limit`, and no more whose recipients add up past `maxRows` (one at least), each marked
    /// held or not.
    public func oldestMessages(from start: Int64, limit: Int, maxRows: Int) throws(StoreError) -> [MessageSpan] {
        try readSQL { (c: SQLiteConnection) throws(StoreError) -> [MessageSpan] in
            let mark = history.state.withLock { $0.watermark }
            var spans: [MessageSpan] = []
            var rows = 0
            var full = false
            try c.query("SELECT id, recipients, accepted_at FROM messages WHERE id >= ? AND id <= ? ORDER BY id LIMIT ?",
                        [.int(start), .int(mark), .int(Int64(limit))]) { (r: Statement) throws(StoreError) in
                guard !full else { return }
                let n = Int(max(r.int(1), 0))
                if !spans.isEmpty && rows + n > maxRows {
                    full = true
                    return
                }
                rows += n
                spans.append(MessageSpan(id: r.int(0), end: r.int(0) + Int64(max(n, 1)), acceptedAt: r.int(2), held: false))
            }
            guard let first = spans.first, let last = spans.last else { return [] }
            var held = Set<Int64>()
            try c.query(Self.heldSQL, [.int(first.id), .int(last.end)]) { (r: Statement) throws(StoreError) in held.insert(r.int(0)) }
            if !held.isEmpty {
                for i in spans.indices where held.contains(spans[i].id) { spans[i].held = true }
            }
            return spans
        }
    }

    /// Whether each of `spans` is still held by a device; nil for one no longer stored.
    public func stillHeld(_ spans: [MessageSpan]) throws(StoreError) -> [Bool?] {
        try readSQL { (c: SQLiteConnection) throws(StoreError) -> [Bool?] in
            var out: [Bool?] = []
            out.reserveCapacity(spans.count)
            for s in spans {
                guard try c.scalar("SELECT 1 FROM messages WHERE id = ?", [.int(s.id)]) != nil else {
                    out.append(nil)
                    continue
                }
                var held = false
                try c.query(Self.heldSQL, [.int(s.id), .int(s.end)]) { (_: Statement) throws(StoreError) in held = true }
                out.append(held)
            }
            return out
        }
    }

    /// Deletes the message records and deliveries whose stamps fall in `runs` (a run may start
    /// before its first record: deliveries left there belong to no record), in one write through
    /// the writer queue, and waits for it. Returns the deleted deliveries that named a device
    /// (device, delivery id), for the engine's inbox index.
    @discardableResult
    public func deleteHistory(_ runs: [Range<Int64>]) throws(StoreError) -> [(device: Int64, id: Int64)] {
        guard !runs.isEmpty else { return [] }
        let outcome = Locked<(messages: Int64, gone: [(device: Int64, id: Int64)])>((0, []))
        try write([{ c in
            var messages: Int64 = 0
            var gone: [(device: Int64, id: Int64)] = []
            for r in runs {
                let range: [SQLValue] = [.int(r.lowerBound), .int(r.upperBound)]
                try c.query("DELETE FROM deliveries WHERE id >= ? AND id < ? RETURNING device, id", range) { (row: Statement) throws(StoreError) in
                    if !row.isNull(0) { gone.append((row.int(0), row.int(1))) }
                }
                try c.run("DELETE FROM messages WHERE id >= ? AND id < ?", range)
                messages += Int64(sqlite3_changes64(c.db))
            }
            try c.forgetPrunedChunks(gone)
            // Set, not added: a batch that failed is tried again on its own, running this again.
            outcome.withLock { $0 = (messages, gone) }
        }])
        let (messages, gone) = outcome.withLock { $0 }
        history.state.withLock { $0.messages = max(0, $0.messages - messages) }
        return gone
    }

    /// A reset's write for the history (with `Writes.reset` for the rest): afterwards no message
    /// or delivery is visible, and the next refresh counts from scratch.
    ///
    /// A small store deletes in place. A large one would hold the writer for as long as SQLite
    /// takes to free every page (half a second for 190,000 messages and 700,000 deliveries), so
    /// its tables are renamed aside (`gone_N_messages`, `gone_N_deliveries`) and made again, empty,
    /// from the schema's own SQL: work in the size of the schema, not of the rows. An index name
    /// can be used once only and SQLite cannot rename an index, so a small index (a partial one
    /// over fewer than `smallIndexRows` rows, such as the pending deliveries') is dropped and made
    /// again at once, while a large one (dropping 700,000 entries takes 100 ms) stays with the
    /// table set aside, shrinks as its rows go, and is made again on the new table when that one
    /// is dropped. The pruner empties the tables set aside in small batches (`emptyLeftovers`).
    /// When the new tables cannot be made (a full store has no page for them), it deletes in
    /// place after all.
    public func resetHistory() -> WriteOp {
        { [history] c in
            // The chunks are a small fraction of the deliveries: deleted in place.
            try c.execute("DELETE FROM inbox_chunks")
            let used = (try c.scalar("PRAGMA page_count") ?? 0) - (try c.scalar("PRAGMA freelist_count") ?? 0)
            let setAside = used > Self.inPlaceResetPages ? try Self.setHistoryAside(c) : false
            if !setAside {
                // Unconditional DELETEs take SQLite's truncate path, without visiting rows.
                try c.execute("DELETE FROM deliveries; DELETE FROM messages")
            }
            history.state.withLock { s in
                s.recount = true
                s.leftovers = nil
            }
        }
    }

    /// Renames the history tables aside and makes them again; false when SQLite refused and the
    /// transaction is still open (nothing changed).
    private static func setHistoryAside(_ c: SQLiteConnection) throws(StoreError) -> Bool {
        var tables: [String] = []
        var indexes: [(name: String, sql: String)] = []
        try c.query("""
            SELECT type, name, sql FROM sqlite_schema
            WHERE tbl_name IN ('messages', 'deliveries') AND type IN ('table', 'index') AND sql IS NOT NULL
            """) { (r: Statement) throws(StoreError) in
            guard let name = r.text(1), let sql = r.text(2) else { return }
            if r.text(0) == "table" { tables.append(sql) } else { indexes.append((name, sql)) }
        }
        // Small indexes are made again now; the others follow their table (see above).
        var small: [(name: String, sql: String)] = []
        for i in indexes where try isSmall(i.sql, c) { small.append(i) }
        indexes = small
        let generation = (try leftoverTables(c).compactMap(leftoverGeneration).max() ?? 0) + 1
        try c.execute("SAVEPOINT set_history_aside")
        do {
            // The SQL run here is the schema's own (read above), and names this code made.
            for i in indexes { try c.execute("DROP INDEX \(quoted(i.name))") }
            try c.execute("ALTER TABLE messages RENAME TO \(quoted("gone_\(generation)_messages"))")
            try c.execute("ALTER TABLE deliveries RENAME TO \(quoted("gone_\(generation)_deliveries"))")
            for t in tables { try c.execute(t) }
            for i in indexes { try c.execute(i.sql) }
            try c.execute("RELEASE set_history_aside")
            return true
        } catch {
            guard sqlite3_get_autocommit(c.db) == 0 else { throw error }
            try c.execute("ROLLBACK TO set_history_aside; RELEASE set_history_aside")
            return false
        }
    }

    /// A partial index over fewer rows than this is dropped and made again inside a reset.
    static let smallIndexRows = 10_000

    /// Whether the index `sql` makes (on messages or deliveries) is partial and covers fewer
    /// than `smallIndexRows` rows: counted through its own predicate, at most that many.
    private static func isSmall(_ sql: String, _ c: SQLiteConnection) throws(StoreError) -> Bool {
        let upper = Array(sql.uppercased().utf8)
        let on = Array(" ON ".utf8), whereWord = Array(" WHERE ".utf8)
        guard sql.utf8.count == upper.count, let onAt = firstOffset(of: on, in: upper),
              let whereAt = firstOffset(of: whereWord, in: upper) else { return false }
        let afterOn = String(decoding: Array(sql.utf8)[(onAt + on.count)...], as: UTF8.self)
        let table = afterOn.hasPrefix("messages") || afterOn.hasPrefix("\"messages\"") ? "messages" : "deliveries"
        let predicate = String(decoding: Array(sql.utf8)[(whereAt + whereWord.count)...], as: UTF8.self)
        // The predicate is the schema's own SQL (read from sqlite_schema), not anyone's input.
        let n = try c.scalar("SELECT count(*) FROM (SELECT 1 FROM \(table) WHERE \(predicate) LIMIT \(smallIndexRows))") ?? 0
        return n < Int64(smallIndexRows)
    }

    private static func firstOffset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
        return nil
    }

    /// Deletes up to `rows` rows of a table a reset set aside, and drops the table once it is
    /// empty, in one write through the writer queue; false when no such table is left.
    public func emptyLeftovers(rows: Int) throws(StoreError) -> Bool {
        let next = try readSQL { (c: SQLiteConnection) throws(StoreError) -> String? in
            if let known = history.state.withLock({ $0.leftovers }) { return known.first }
            let found = try Self.leftoverTables(c)
            history.state.withLock { $0.leftovers = found }
            return found.first
        }
        guard let name = next else { return false }
        let table = Self.quoted(name)
        try write([{ [history] c in
            try c.execute("DELETE FROM \(table) WHERE rowid IN (SELECT rowid FROM \(table) LIMIT \(max(1, rows)))")
            guard sqlite3_changes64(c.db) == 0 else { return }
            // Empty: its whole-table indexes (empty too) go with it, and are made on the live table.
            var indexes: [(name: String, sql: String)] = []
            try c.query("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                        [.text(name)]) { (r: Statement) throws(StoreError) in
                if let n = r.text(0), let sql = r.text(1) { indexes.append((n, sql)) }
            }
            try c.execute("DROP TABLE \(table)")
            let live = name.hasSuffix("_messages") ? "messages" : "deliveries"
            for i in indexes {
                // The rename wrote the table into the index's SQL as the quoted new name.
                let sql = i.sql.replacing(table, with: live)
                guard sql != i.sql, try c.scalar("SELECT 1 FROM sqlite_schema WHERE name = ?", [.text(i.name)]) == nil else { continue }
                try c.execute(sql)
            }
            history.state.withLock { $0.leftovers = nil }
        }])
        return true
    }

    /// The tables resets set aside, oldest first. Only names of the form this code makes are
    /// taken (they are spliced into SQL as identifiers).
    private static func leftoverTables(_ c: SQLiteConnection) throws(StoreError) -> [String] {
        var names: [(Int, String)] = []
        try c.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'gone_*'") { (r: Statement) throws(StoreError) in
            if let name = r.text(0), let g = leftoverGeneration(name) { names.append((g, name)) }
        }
        return names.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.1)
    }

    /// N of `gone_N_messages` or `gone_N_deliveries`; nil for any other name.
    static func leftoverGeneration(_ name: String) -> Int? {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "gone", parts[2] == "messages" || parts[2] == "deliveries",
              !parts[1].isEmpty, parts[1].count <= 9, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(parts[1])
    }

    /// An identifier in double quotes (a quote inside doubled).
    private static func quoted(_ name: String) -> String {
        var out = "\""
        for ch in name {
            if ch == "\"" { out += "\"\"" } else { out.append(ch) }
        }
        return out + "\""
    }
}

extension Writes {
    /// Forgets upstream messages (the pruner's, for acked and nacked ones past the limits).
    public static func deleteUpstream(_ ids: [String]) -> WriteOp {
        { c in try each(c, "DELETE FROM upstream WHERE id = ?", ids.lazy.map { [.text($0)] }) }
    }
}
