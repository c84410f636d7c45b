/// Topic names and condition expressions (docs/spec/fcm-legacy.md section 2). Pure: no state, no I/O.
public enum Topics {
    /// How a topic is addressed in a send's `to` and kept as a record's target: `/topics/{name}`.
    public static let prefix = "/topics/"

    /// `text` without the `/topics/` it may start with.
    public static func name(_ text: String) -> String {
        text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
    }

    /// Whether `name` (without `/topics/`) is a valid topic name: `[a-zA-Z0-9-_.~%]{1,900}`.
    public static func isValidName(_ name: String) -> Bool {
        var n = 0
        for b in name.utf8 {
            n += 1
            if n > 900 { return false }
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"), UInt8(ascii: "%"):
                continue
            default:
                return false
            }
        }
        return n > 0
    }

    /// The key topics are matched by: the seeds make topic matching case-insensitive.
    public static func key(_ name: String) -> String { name.lowercased() }
}

/// A parsed `condition`: `'a' in topics` terms joined by `&&` and `||`, with parentheses;
/// `&&` binds tighter than `||`.
public indirect enum Condition: Sendable, Equatable, CustomStringConvertible {
    case topic(String)
    case and(Condition, Condition)
    case or(Condition, Condition)

    /// The answer FCM gave for any malformed condition.
    public static let invalidMessage = "Invalid condition expression provided."

    /// Parses `text`, allowing at most `maxOperators` `&&`/`||` operators (the seeds: two).
    public static func parse(_ text: String, maxOperators: Int = 2) -> Condition? {
        var p = ConditionParser(Array(text.utf8))
        guard let c = p.parseOr(), p.atEnd, p.operators <= maxOperators else { return nil }
        return c
    }

    /// Whether a device subscribed to `topics` (topic keys, see `Topics.key`) matches.
    public func matches(_ topics: Set<String>) -> Bool {
        switch self {
        case .topic(let t): return topics.contains(Topics.key(t))
        case .and(let a, let b): return a.matches(topics) && b.matches(topics)
        case .or(let a, let b): return a.matches(topics) || b.matches(topics)
        }
    }

    /// Evaluates over subscriber sets: a topic is the set of its subscribers, `&&` intersects,
    /// `||` unites. This is how a send finds its recipients without looking at every device.
    public func evaluate<T: Hashable>(_ subscribers: (String) -> Set<T>) -> Set<T> {
        switch self {
        case .topic(let t): return subscribers(Topics.key(t))
        case .and(let a, let b): return a.evaluate(subscribers).intersection(b.evaluate(subscribers))
        case .or(let a, let b): return a.evaluate(subscribers).union(b.evaluate(subscribers))
        }
    }

    public var description: String {
        switch self {
        case .topic(let t): return "'\(t)' in topics"
        case .and(let a, let b): return "(\(a) && \(b))"
        case .or(let a, let b): return "(\(a) || \(b))"
        }
    }
}

/// Recursive descent over the condition's bytes.
struct ConditionParser {
    let b: [UInt8]
    var i = 0
    var operators = 0
    var depth = 0

    init(_ b: [UInt8]) { self.b = b }

    var atEnd: Bool {
        mutating get {
            skipSpace()
            return i == b.count
        }
    }

    mutating func skipSpace() {
        while i < b.count, b[i] == 32 || b[i] == 9 || b[i] == 10 || b[i] == 13 { i += 1 }
    }

    /// Takes `s` (ASCII) after optional blanks; letters match in any case, as the seeds say the
    /// condition is case-insensitive (`'a' IN Topics` is `'a' in topics`).
    mutating func eat(_ s: StaticString) -> Bool {
        skipSpace()
        guard hasPrefixIgnoringCase(b[i...], s) else { return false }
        i += s.utf8CodeUnitCount
        return true
    }

    mutating func parseOr() -> Condition? {
        guard var left = parseAnd() else { return nil }
        while eat("||") {
            operators += 1
            guard let right = parseAnd() else { return nil }
            left = .or(left, right)
        }
        return left
    }

    mutating func parseAnd() -> Condition? {
        guard var left = parseTerm() else { return nil }
        while eat("&&") {
            operators += 1
            guard let right = parseTerm() else { return nil }
            left = .and(left, right)
        }
        return left
    }

    mutating func parseTerm() -> Condition? {
        skipSpace()
        guard i < b.count else { return nil }
        if b[i] == UInt8(ascii: "(") {
            i += 1
            depth += 1
            guard depth <= 32, let inner = parseOr(), eat(")") else { return nil }
            depth -= 1
            return inner
        }
        let quote = b[i]
        guard quote == UInt8(ascii: "'") || quote == UInt8(ascii: "\"") else { return nil }
        i += 1
        let start = i
        while i < b.count, b[i] != quote { i += 1 }
        guard i < b.count else { return nil }
        let name = String(decoding: b[start..<i], as: UTF8.self)
        i += 1
        guard Topics.isValidName(name) else { return nil }
        // `in topics`, with at least one space between the words.
        skipSpace()
        guard eat("in"), i < b.count, b[i] == 32 || b[i] == 9 else { return nil }
        guard eat("topics") else { return nil }
        // `topics` must end the word (`'a' in topicsX` is not a term).
        if i < b.count, (b[i] >= 65 && b[i] <= 90) || (b[i] >= 97 && b[i] <= 122) || (b[i] >= 48 && b[i] <= 57) { return nil }
        return .topic(name)
    }
}
