import FCMCore

/// `--device-rate N/PERIOD`, `--topic-rate N/PERIOD`: at most N messages per PERIOD.
public struct RateLimit: Sendable, Equatable {
    var count: Int
    var periodMillis: Int64

    /// Parses `N/PERIOD`, PERIOD being `500ms`, `10s`, `1m`, `1h` or plain seconds (`N/60`).
    public static func parse(_ text: String) -> RateLimit? {
        let parts = text.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let n = Int(parts[0]), n >= 1 else { return nil }
        let (p, unit) = splitUnit(parts[1], [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)])
        guard let v = Int64(p.isEmpty ? "1" : String(p)), v >= 1 else { return nil }
        return RateLimit(count: n, periodMillis: v * (unit ?? 1000))
    }
}

/// A duration's number and the size of its unit: the first of `units` whose suffix `text` ends
/// with (list `ms` before `s`), or nil for a bare number. `--device-rate` periods and `--max-age`.
public func splitUnit(_ text: Substring, _ units: [(suffix: String, size: Int64)]) -> (number: Substring, size: Int64?) {
    for u in units where text.hasSuffix(u.suffix) { return (text.dropLast(u.suffix.count), u.size) }
    return (text, nil)
}

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
