/// What `GET /api/v1/stats` adds for the sends a store held at start, counted once, in the
/// background right after start. The engine counts later sends as it decides them.
public struct SendCounts: Sendable, Equatable {
    /// Message records by status (`deleted_messages` notices are the mock's own, not sends).
    public var accepted: Int64 = 0
    public var rejected: Int64 = 0
    /// Errors by code: every recipient that failed, plus each record refused before it had a
    /// recipient (a 400 or 401 for the whole request, a topic send that failed).
    public var errors: [String: Int64] = [:]
    /// Sends and errors (counted as above) by the second they were accepted at (mock clock,
    /// seconds since the epoch): only the last hour's, for the chart's history.
    public var seconds: [Int64: SecondCount] = [:]

    public init(accepted: Int64 = 0, rejected: Int64 = 0, errors: [String: Int64] = [:]) {
        self.accepted = accepted
        self.rejected = rejected
        self.errors = errors
    }
}

/// The sends accepted or refused in one second, and the errors among them.
public struct SecondCount: Sendable, Equatable {
    public var sends: Int64 = 0
    public var errors: Int64 = 0
    public init(sends: Int64 = 0, errors: Int64 = 0) { self.sends = sends; self.errors = errors }
}

extension Store {
    /// The send counts of the rows with ids up to `floor` (what the store held at start), read in
    /// one transaction on a connection of its own: the pass takes about a quarter of a second for
    /// 400,000 messages, and in WAL mode neither the writer nor the main connection's readers wait
    /// for it (on the main connection every send's commit would). A `:memory:` store has no file
    /// another connection could open: it reads on the main connection (such a store held
    /// nothing at start; only a failed write's recovery asks it to count).
    /// `secondsSince`: the seconds counted from that time on (mock clock, milliseconds).
    public func sendCounts(upTo floor: Int64, secondsSince: Int64 = .max) throws(StoreError) -> SendCounts {
        if path == ":memory:" {
            return try readSQL { (c: SQLiteConnection) throws(StoreError) -> SendCounts in
                try StoreLoader(c).sendCounts(upTo: floor, secondsSince: secondsSince)
            }
        }
        // Read only (a count that runs late, the server stopping, never creates a file), and a
        // small page cache: the pass reads every page once.
        let c = try SQLiteConnection(path: path, readOnly: true)
        try c.execute("PRAGMA busy_timeout=5000; PRAGMA cache_size=-256")
        try c.execute("BEGIN")
        defer { try? c.execute("COMMIT") }
        return try StoreLoader(c).sendCounts(upTo: floor, secondsSince: secondsSince)
    }
}

extension StoreLoader {
    /// The send counts of the rows with ids up to `floor`: one pass over those messages, one over
    /// their deliveries (in one read transaction, the caller's, they are one snapshot).
    public func sendCounts(upTo floor: Int64, secondsSince: Int64 = .max) throws(StoreError) -> SendCounts {
        var counts = SendCounts()
        try c.query("""
            SELECT status, CASE WHEN recipients = 0 THEN error END AS refused, count(*) FROM messages
            WHERE id <= ? AND target_kind <> ? GROUP BY status, refused
            """, [.int(floor), .text("deleted_messages")]) { (r: Statement) throws(StoreError) in
            switch r.text(0) {
            case "accepted": counts.accepted += r.int(2)
            case "rejected": counts.rejected += r.int(2)
            default: break
            }
            if let code = r.text(1) { counts.errors[code, default: 0] += r.int(2) }
        }
        try c.query("SELECT error, count(*) FROM deliveries WHERE id <= ? AND error IS NOT NULL GROUP BY error",
                    [.int(floor)]) { (r: Statement) throws(StoreError) in
            counts.errors[r.text(0) ?? "", default: 0] += r.int(1)
        }
        guard secondsSince < .max else { return counts }
        // The last hour by second. Ids are microsecond stamps of the mock clock that never run
        // behind it, so a record accepted since `secondsSince` has an id at or above it times
        // 1000: a range of the primary keys (the last hour's rows only, whatever the store holds).
        let fromID = secondsSince.multipliedReportingOverflow(by: 1000)
        let first: Int64 = fromID.overflow ? (secondsSince < 0 ? 0 : .max) : max(0, fromID.partialValue)
        try c.query("""
            SELECT accepted_at / 1000 AS second, count(*), sum(recipients = 0 AND error IS NOT NULL) FROM messages
            WHERE id >= ? AND id <= ? AND accepted_at >= ? AND target_kind <> ? GROUP BY second
            """, [.int(first), .int(floor), .int(secondsSince), .text("deleted_messages")]) { (r: Statement) throws(StoreError) in
            counts.seconds[r.int(0), default: SecondCount()].sends += r.int(1)
            counts.seconds[r.int(0), default: SecondCount()].errors += r.int(2)
        }
        try c.query("""
            SELECT m.accepted_at / 1000 AS second, count(*) FROM deliveries d JOIN messages m ON m.id = d.message
            WHERE d.id >= ? AND d.id <= ? AND d.error IS NOT NULL AND m.accepted_at >= ? GROUP BY second
            """, [.int(first), .int(floor), .int(secondsSince)]) { (r: Statement) throws(StoreError) in
            counts.seconds[r.int(0), default: SecondCount()].errors += r.int(1)
        }
        return counts
    }
}
