/// What `GET /api/v1/stats` starts from after a restart: the sends the store holds, counted once.
/// The engine then counts sends as it decides them, so the endpoint never scans the store.
public struct SendCounts: Sendable, Equatable {
    /// Message records by status (`deleted_messages` notices are the mock's own, not sends).
    public var accepted: Int64 = 0
    public var rejected: Int64 = 0
    /// Errors by code: every recipient that failed, plus each record refused before it had a
    /// recipient (a 400 or 401 for the whole request, a topic send that failed).
    public var errors: [String: Int64] = [:]

    public init(accepted: Int64 = 0, rejected: Int64 = 0, errors: [String: Int64] = [:]) {
        self.accepted = accepted
        self.rejected = rejected
        self.errors = errors
    }
}

extension StoreLoader {
    /// The send counts the store holds (three aggregates, each one pass over its table; run once
    /// at start).
    public func sendCounts() throws(StoreError) -> SendCounts {
        var counts = SendCounts()
        try c.query("SELECT status, count(*) FROM messages WHERE target_kind <> ? GROUP BY status", [.text("deleted_messages")]) {
            (r: Statement) throws(StoreError) in
            switch r.text(0) {
            case "accepted": counts.accepted += r.int(1)
            case "rejected": counts.rejected += r.int(1)
            default: break
            }
        }
        try c.query("SELECT error, count(*) FROM deliveries WHERE error IS NOT NULL GROUP BY error") { (r: Statement) throws(StoreError) in
            counts.errors[r.text(0) ?? "", default: 0] += r.int(1)
        }
        try c.query("""
            SELECT error, count(*) FROM messages WHERE status = ? AND recipients = 0 AND error IS NOT NULL GROUP BY error
            """, [.text("rejected")]) { (r: Statement) throws(StoreError) in
            counts.errors[r.text(0) ?? "", default: 0] += r.int(1)
        }
        return counts
    }
}
