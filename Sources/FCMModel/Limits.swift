/// `--device-rate N/PERIOD`, `--topic-rate N/PERIOD`: at most N messages per PERIOD.
public struct RateLimit: Sendable, Equatable {
    package var count: Int
    package var periodMillis: Int64

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

/// How much history the store keeps (`--max-messages`, `--max-age`; docs/storage.md).
public struct StorageLimits: Sendable, Equatable {
    /// The most message records kept; nil: no limit.
    package var maxMessages: Int?
    /// Records accepted longer ago than this (mock clock) go; nil: no limit.
    package var maxAgeSeconds: Int64?

    public init(maxMessages: Int? = nil, maxAgeSeconds: Int64? = nil) {
        self.maxMessages = maxMessages
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// Neither limit is set: the store keeps everything until a reset.
    package var isUnlimited: Bool { maxMessages == nil && maxAgeSeconds == nil }

    /// The limits in words, for the start-up line.
    public var description: String {
        var parts: [String] = []
        if let n = maxMessages { parts.append("at most \(n) messages") }
        if let s = maxAgeSeconds { parts.append("none older than \(Self.duration(s))") }
        return parts.isEmpty ? "none: every message is kept until a reset (see --max-messages, --max-age)" : parts.joined(separator: ", ")
    }

    /// `7d`, `12h`, `15m` or `30s`: the largest unit that divides `seconds`.
    static func duration(_ seconds: Int64) -> String {
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}
