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
    /// The send counts the store holds: one pass over the messages, one over the deliveries (run
    /// once at start; about a quarter of a second for 400,000 of each).
    public func sendCounts() throws(StoreError) -> SendCounts {
        var counts = SendCounts()
        try c.query("""
            SELECT status, CASE WHEN recipients = 0 THEN error END AS refused, count(*) FROM messages
            WHERE target_kind <> ? GROUP BY status, refused
            """, [.text("deleted_messages")]) { (r: Statement) throws(StoreError) in
            switch r.text(0) {
            case "accepted": counts.accepted += r.int(2)
            case "rejected": counts.rejected += r.int(2)
            default: break
            }
            if let code = r.text(1) { counts.errors[code, default: 0] += r.int(2) }
        }
        try c.query("SELECT error, count(*) FROM deliveries WHERE error IS NOT NULL GROUP BY error") { (r: Statement) throws(StoreError) in
            counts.errors[r.text(0) ?? "", default: 0] += r.int(1)
        }
        return counts
    }
}
