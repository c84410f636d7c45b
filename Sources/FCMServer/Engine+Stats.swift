import FCMCore
import FCMStore

/// Sends counted as they are decided (`GET /api/v1/stats`): one step per send under the state
/// lock, plus what the store held at start, read from it the first time the counts are asked for
/// (not at start: that read is a pass over every message), so the numbers agree with the store
/// after a restart and a reset clears them with everything else.
struct SendStats: Sendable, Equatable {
    /// The sends decided since start (or the last reset).
    var counts = SendCounts()
    /// The store's sends from before start, the rows with ids up to `floor`; nil until read.
    var before: SendCounts?
    var floor: Int64 = 0

    /// Counting from an empty store, or one whose ids go up to `floor` (read when first asked).
    init(floor: Int64 = 0) {
        self.floor = floor
        before = floor == 0 ? SendCounts() : nil
    }

    /// Everything counted.
    var total: SendCounts {
        guard let before else { return counts }
        var sum = before
        sum.accepted += counts.accepted
        sum.rejected += counts.rejected
        for (code, n) in counts.errors { sum.errors[code, default: 0] += n }
        return sum
    }

    /// A send the send path decided: its record, and its recipients' rows.
    mutating func count(_ message: MessageRow, rows: [DeliveryRow]) {
        for r in rows {
            if let e = r.error { counts.errors[e, default: 0] += 1 }
        }
        count(status: message.status, error: message.recipients == 0 ? message.error : nil)
    }

    /// A record's status, and the error of a record refused before it had a recipient.
    mutating func count(status: String, error: String?) {
        switch status {
        case "accepted": counts.accepted += 1
        case "rejected": counts.rejected += 1
        default: break
        }
        if let error { counts.errors[error, default: 0] += 1 }
    }
}

/// What `GET /api/v1/stats` answers (the XMPP connections are the listener's to count).
public struct StatsSnapshot: Sendable {
    public var counts: SendCounts
    /// Deliveries held for offline devices.
    public var pending: Int
    public var devices: Int
}

extension Engine {
    /// The counters, read from memory: constant work in the number of messages stored, but for
    /// the first call after a start on a store with sends, which counts those once.
    public func stats() throws(StoreError) -> StatsSnapshot {
        while let floor = state.withLock({ $0.stats.before == nil ? $0.stats.floor : nil }) {
            let before = try store.read { (c: SQLiteConnection) throws(StoreError) -> SendCounts in
                try StoreLoader(c).sendCounts(upTo: floor)
            }
            // A reset in the meantime has set `before` (to nothing) already: it wins. A failed
            // write in the meantime moved the floor (Engine+Recovery.swift): count again.
            state.withLock { s in if s.stats.before == nil && s.stats.floor == floor { s.stats.before = before } }
        }
        return state.withLock { s in
            StatsSnapshot(counts: s.stats.total, pending: s.stored.values.reduce(0) { $0 + $1.count }, devices: s.devices.count)
        }
    }
}
