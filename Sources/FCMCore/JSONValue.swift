// JSON values for the FCM mock: a parsed document (`JSONValue`, `JSONNumber`, `JSONObject`) and
// its accessors. JSONParser.swift reads them from bytes (strict RFC 8259); JSONWriter.swift
// writes them back as compact text.
//
// Deliberately Foundation-free. Numbers keep their source text so that huge or fractional values
// are never silently rounded.

// MARK: - Values

/// A parsed JSON document or any part of one.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// A JSON number kept as its source text, so huge values and int/float are told apart exactly.
public struct JSONNumber: Sendable, Equatable, Hashable {
    /// The number exactly as written in the source, e.g. `"-12"`, `"1.50"`, `"1e30"`.
    public let text: String

    /// Wraps `text` without checking it; the caller promises it follows the JSON number
    /// grammar, because the writer emits it verbatim. Use `init?(validating:)` otherwise.
    public init(text: String) {
        self.text = text
    }

    /// Creates the number whose text is the decimal form of `value`.
    public init(_ value: Int64) {
        self.text = String(value)
    }

    /// Creates the number whose text is the decimal form of `value`.
    public init(_ value: Int) {
        self.text = String(value)
    }

    /// Creates a number from text only if the text is exactly one JSON number (no whitespace).
    public init?(validating text: String) {
        // Every JSON number starts with '-' or a digit and ends with a digit, which also
        // rules out the surrounding whitespace the document parser would accept.
        guard let first = text.utf8.first, first == UInt8(ascii: "-") || isDigit(first),
              let last = text.utf8.last, isDigit(last),
              case .number(let number)? = try? JSONParser.parse(text, maxDepth: 0)
        else { return nil }
        self = number
    }

    /// True when the text has no fraction or exponent part (`"1.0"` and `"1e2"` are not integers).
    public var isInteger: Bool {
        !text.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
    }

    /// The exact value when `isInteger` and it fits in `Int64`, else nil.
    public var int64: Int64? {
        guard isInteger else { return nil }
        var result: Int64 = 0
        var negative = false
        var sawDigit = false
        var first = true
        for byte in text.utf8 {
            defer { first = false }
            if first && byte == UInt8(ascii: "-") {
                negative = true
                continue
            }
            guard isDigit(byte) else { return nil }
            sawDigit = true
            let digit = Int64(byte &- UInt8(ascii: "0"))
            let (shifted, o1) = result.multipliedReportingOverflow(by: 10)
            // Accumulating negative values on the negative side lets Int64.min parse.
            let (next, o2) = negative
                ? shifted.subtractingReportingOverflow(digit)
                : shifted.addingReportingOverflow(digit)
            if o1 || o2 { return nil }
            result = next
        }
        return sawDigit ? result : nil
    }

    /// The nearest `Double` (infinite for out-of-range magnitudes such as `1e400`).
    public var double: Double? {
        Double(text)
    }
}

/// An object that keeps member order and rejects duplicate keys at parse time.
///
/// Equality compares members in order, matching how the object was written.
/// Keys are compared by their UTF-8 bytes (as JSON and Java do), not by Swift's
/// Unicode canonical equivalence, so `"é"` precomposed and decomposed are different keys.
public struct JSONObject: Sendable, Equatable {
    /// One key/value pair of an object.
    public struct Member: Sendable, Equatable {
        /// The decoded member name.
        public var key: String
        /// The member's value.
        public var value: JSONValue

        /// Creates a member.
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The members in source (or insertion) order, with unique keys.
    public private(set) var members: [Member]

    /// Creates an empty object.
    public init() {
        members = []
    }

    /// Creates an object from pairs in order; a repeated key replaces the earlier value in place,
    /// so the keys stay unique.
    public init(_ members: [(String, JSONValue)]) {
        self.members = []
        self.members.reserveCapacity(members.count)
        for (key, value) in members {
            self[key] = value
        }
    }

    /// An empty object with room for `capacity` members.
    init(capacity: Int) {
        members = []
        members.reserveCapacity(capacity)
    }

    /// The parser has already proven the keys unique, so it skips the re-check.
    public init(uniqueMembers: [Member]) {
        members = uniqueMembers
    }

    /// The value for `key`; setting replaces in place or appends, and setting nil removes.
    public subscript(key: String) -> JSONValue? {
        get {
            guard let index = index(forKey: key) else { return nil }
            return members[index].value
        }
        set {
            if let index = index(forKey: key) {
                if let newValue {
                    members[index].value = newValue
                } else {
                    members.remove(at: index)
                }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    /// The position of `key` in `members`, if present.
    public func index(forKey key: String) -> Int? {
        members.firstIndex { sameUTF8($0.key, key) }
    }

    /// The keys in order.
    public var keys: [String] {
        members.map(\.key)
    }

    /// The number of members.
    public var count: Int {
        members.count
    }
}

// MARK: - Byte helpers (shared with the parser)

@inline(__always)
@inlinable
public func isDigit(_ byte: UInt8) -> Bool {
    byte &- UInt8(ascii: "0") < 10
}

// MARK: - Accessors

extension JSONValue {
    /// The string payload, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object payload, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The boolean payload, if this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number payload, if this is a number.
    public var numberValue: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// True for JSON `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// A short name of the JSON type for error messages: "null","boolean","number","string","array","object".
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}
