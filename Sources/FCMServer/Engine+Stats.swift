import FCMCore
import FCMStore

/// Sends counted as they are decided (`GET /api/v1/stats`): the store's counts at start, then one
/// step per send under the state lock, so the numbers agree with the store after a restart and a
/// reset clears them with everything else.
struct SendStats: Sendable, Equatable {
    var counts = SendCounts()

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
    /// The counters, read from memory: constant work in the number of messages stored.
    public func stats() -> StatsSnapshot {
        state.withLock { s in
            StatsSnapshot(counts: s.stats.counts, pending: s.stored.values.reduce(0) { $0 + $1.count }, devices: s.devices.count)
        }
    }

    /// The counts the store holds, for the engine's start.
    static func loadSendStats(_ store: Store) throws(StoreError) -> SendStats {
        SendStats(counts: try store.read { (c: SQLiteConnection) throws(StoreError) -> SendCounts in try StoreLoader(c).sendCounts() })
    }
}
