import FCMModel
import FCMCore

/// Sliding windows of recent sends per key (device id or topic). Part of the engine's state.
struct RateWindows: Sendable {
    var hits: [String: [Int64]] = [:]

    /// Records a send at `now` unless `limit` is already reached within its period.
    mutating func admit(_ key: String, now: Int64, limit: RateLimit) -> Bool {
        var h = hits[key] ?? []
        let from = now - limit.periodMillis
        if let firstKept = h.firstIndex(where: { $0 > from }) { h.removeFirst(firstKept) } else { h.removeAll() }
        guard h.count < limit.count else {
            hits[key] = h
            return false
        }
        h.append(now)
        hits[key] = h
        return true
    }
}
