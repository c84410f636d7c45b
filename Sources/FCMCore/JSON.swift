// Strict RFC 8259 JSON parsing and compact JSON writing for the FCM mock.
//
// Deliberately Foundation-free: every request body goes through this parser, so it
// reads straight from a byte buffer with an index, builds each String from one
// validated UTF-8 slice, and keeps numbers as their source text so that huge or
// fractional values are never silently rounded.

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

    /// The parser has already proven the keys unique, so it skips the re-check.
    init(uniqueMembers: [Member]) {
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
        members.firstIndex { utf8Equal($0.key, key) }
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

// MARK: - Errors

/// Why and where a JSON text was rejected.
public struct JSONParseError: Error, Sendable, Equatable {
    /// The category of the problem.
    public enum Kind: Sendable, Equatable {
        case invalidUTF8, unexpectedEnd, unexpectedCharacter, duplicateKey(String), tooDeep,
             trailingData, invalidEscape, invalidNumber, controlCharacterInString, loneSurrogate
    }

    /// The category of the problem.
    public let kind: Kind
    /// The byte offset in the input where the problem was found.
    public let offset: Int
    /// What `message` names: the offending character, the bad byte in hex, or the depth limit.
    let detail: String

    init(kind: Kind, offset: Int, detail: String = "") {
        self.kind = kind
        self.offset = offset
        self.detail = detail
    }

    /// A one-line description in the style of the Java json-simple parser the real service used
    /// (the server prefixes it with `JSON_PARSING_ERROR: `).
    public var message: String {
        switch kind {
        case .unexpectedEnd:
            return "Unexpected token END OF FILE at position \(offset)."
        case .unexpectedCharacter, .trailingData, .invalidNumber, .invalidEscape, .controlCharacterInString:
            return "Unexpected character (\(detail)) at position \(offset)."
        case .invalidUTF8:
            return "Invalid UTF-8 byte \(detail) at position \(offset)."
        case .duplicateKey(let key):
            var quoted: [UInt8] = []
            appendJSONString(key, to: &quoted)
            return "Duplicate key \(String(decoding: quoted, as: UTF8.self)) at position \(offset)."
        case .tooDeep:
            return "Nesting deeper than \(detail) at position \(offset)."
        case .loneSurrogate:
            return "Unpaired surrogate at position \(offset)."
        }
    }
}

// MARK: - Parser

/// Entry points of the strict RFC 8259 parser.
public enum JSONParser {
    /// Parses exactly one JSON value (any type at top level) surrounded by optional whitespace.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in
            var parser = ByteParser(buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses exactly one JSON value (any type at top level) surrounded by optional whitespace.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try bytes.withMemoryRebound(to: UInt8.self) { (buffer) throws(JSONParseError) -> JSONValue in
            var parser = ByteParser(buffer, maxDepth: maxDepth)
            return try parser.parseDocument()
        }
    }

    /// Parses exactly one JSON value (any type at top level) surrounded by optional whitespace.
    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        var text = text
        // String.withUTF8 only rethrows untyped errors, so the typed error travels in a Result.
        let result = text.withUTF8 { buffer -> Result<JSONValue, JSONParseError> in
            var parser = ByteParser(buffer, maxDepth: maxDepth)
            do throws(JSONParseError) {
                return .success(try parser.parseDocument())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

@inline(__always)
private func isDigit(_ byte: UInt8) -> Bool {
    byte &- UInt8(ascii: "0") < 10
}

/// JSON compares member names by code points; Swift's `==` on String uses canonical
/// equivalence, which would merge distinct keys. Canonically different strings are never
/// byte-equal, so the fast `==` (a memcmp for ASCII) rejects almost every pair first.
@inline(__always)
private func utf8Equal(_ a: String, _ b: String) -> Bool {
    a == b && a.utf8.elementsEqual(b.utf8)
}

/// A key hashed and compared by its UTF-8 bytes, for duplicate detection in large objects.
private struct KeyBytes: Hashable {
    let key: String

    static func == (lhs: KeyBytes, rhs: KeyBytes) -> Bool {
        utf8Equal(lhs.key, rhs.key)
    }

    func hash(into hasher: inout Hasher) {
        var key = key
        key.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// An array or object whose closing bracket has not been reached yet.
private struct OpenContainer {
    let isObject: Bool
    var elements: [JSONValue] = []
    var members: [JSONObject.Member] = []
    /// The key whose value is being parsed.
    var pendingKey = ""
    /// Built once an object grows large, so duplicate checks stay linear overall
    /// instead of quadratic on hostile input.
    var keySet: Set<KeyBytes>?

    init(isObject: Bool) {
        self.isObject = isObject
        // Sized for typical FCM bodies (the top-level object has 5-10 members), so most
        // containers never regrow.
        if isObject {
            members.reserveCapacity(8)
        } else {
            elements.reserveCapacity(4)
        }
    }

    static let linearScanLimit = 16

    /// Records `key` and reports whether it was already present.
    mutating func insertKey(_ key: String) -> Bool {
        if keySet != nil {
            return keySet?.insert(KeyBytes(key: key)).inserted == false
        }
        for member in members where utf8Equal(member.key, key) {
            return true
        }
        if members.count >= Self.linearScanLimit {
            var set = Set<KeyBytes>(minimumCapacity: members.count * 2)
            for member in members {
                set.insert(KeyBytes(key: member.key))
            }
            set.insert(KeyBytes(key: key))
            keySet = set
        }
        return false
    }
}

/// The parser state for one document. It lives only inside a `withUnsafeBufferPointer`
/// scope, so holding the raw buffer is safe.
private struct ByteParser {
    let input: UnsafeBufferPointer<UInt8>
    let end: Int
    let maxDepth: Int
    var index = 0
    /// Reused across strings that contain escapes, so decoding them allocates once per document.
    var scratch: [UInt8] = []

    init(_ input: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.input = input
        self.end = input.count
        self.maxDepth = max(0, maxDepth)
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue()
        skipWhitespace()
        if index < end {
            throw failure(.trailingData, at: index)
        }
        return value
    }

    // Iterative rather than recursive so that no maxDepth a caller picks can overflow the stack.
    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        var stack: [OpenContainer] = []
        stack.reserveCapacity(4)  // an FCM body nests two or three deep: one allocation
        var value: JSONValue
        nextValue: while true {
            skipWhitespace()
            guard index < end else { throw endOfInput() }
            switch input[index] {
            case UInt8(ascii: "{"):
                guard stack.count < maxDepth else { throw tooDeep(at: index) }
                index += 1
                skipWhitespace()
                guard index < end else { throw endOfInput() }
                if input[index] == UInt8(ascii: "}") {
                    index += 1
                    value = .object(JSONObject())
                } else {
                    var container = OpenContainer(isObject: true)
                    try parseKey(into: &container)
                    stack.append(container)
                    continue nextValue
                }
            case UInt8(ascii: "["):
                guard stack.count < maxDepth else { throw tooDeep(at: index) }
                index += 1
                skipWhitespace()
                guard index < end else { throw endOfInput() }
                if input[index] == UInt8(ascii: "]") {
                    index += 1
                    value = .array([])
                } else {
                    stack.append(OpenContainer(isObject: false))
                    continue nextValue
                }
            case UInt8(ascii: "\""):
                value = .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = .number(try parseNumber())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw failure(.unexpectedCharacter, at: index)
            }

            // A value is complete: hand it to its container, closing every container
            // whose terminator follows, until a comma asks for the next value.
            while let top = stack.indices.last {
                skipWhitespace()
                guard index < end else { throw endOfInput() }
                let byte = input[index]
                if stack[top].isObject {
                    stack[top].members.append(JSONObject.Member(key: stack[top].pendingKey, value: value))
                    if byte == UInt8(ascii: ",") {
                        index += 1
                        skipWhitespace()
                        try parseKey(into: &stack[top])
                        continue nextValue
                    }
                    if byte == UInt8(ascii: "}") {
                        index += 1
                        value = .object(JSONObject(uniqueMembers: stack.removeLast().members))
                        continue
                    }
                } else {
                    stack[top].elements.append(value)
                    if byte == UInt8(ascii: ",") {
                        index += 1
                        continue nextValue
                    }
                    if byte == UInt8(ascii: "]") {
                        index += 1
                        value = .array(stack.removeLast().elements)
                        continue
                    }
                }
                throw failure(.unexpectedCharacter, at: index)
            }
            return value
        }
    }

    /// Parses `"key" :` with `index` at the opening quote (whitespace already skipped).
    mutating func parseKey(into container: inout OpenContainer) throws(JSONParseError) {
        guard index < end else { throw endOfInput() }
        guard input[index] == UInt8(ascii: "\"") else { throw failure(.unexpectedCharacter, at: index) }
        let keyOffset = index
        let key = try parseString()
        if container.insertKey(key) {
            throw JSONParseError(kind: .duplicateKey(key), offset: keyOffset)
        }
        skipWhitespace()
        guard index < end else { throw endOfInput() }
        guard input[index] == UInt8(ascii: ":") else { throw failure(.unexpectedCharacter, at: index) }
        index += 1
        container.pendingKey = key
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < end {
            let byte = input[index]
            // Everything above space is significant, so one compare settles the common case.
            if byte > 0x20 { return }
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
            index += 1
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let bytes = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for k in 0..<count {
            guard index + k < end else { throw endOfInput() }
            if input[index + k] != bytes[k] {
                throw failure(.unexpectedCharacter, at: index + k)
            }
        }
        index += count
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = index
        if input[index] == UInt8(ascii: "-") {
            index += 1
        }
        guard index < end else { throw endOfInput() }
        let first = input[index]
        if first == UInt8(ascii: "0") {
            index += 1
            // RFC 8259 forbids leading zeros; "01" is one bad number, not "0" then junk.
            if index < end && isDigit(input[index]) {
                throw failure(.invalidNumber, at: index)
            }
        } else if isDigit(first) {
            skipDigits()
        } else {
            throw failure(.invalidNumber, at: index)
        }
        if index < end && input[index] == UInt8(ascii: ".") {
            index += 1
            try requireDigit()
            skipDigits()
        }
        if index < end && (input[index] | 0x20) == UInt8(ascii: "e") {
            index += 1
            if index < end && (input[index] == UInt8(ascii: "+") || input[index] == UInt8(ascii: "-")) {
                index += 1
            }
            try requireDigit()
            skipDigits()
        }
        return JSONNumber(text: String(decoding: UnsafeBufferPointer(rebasing: input[start..<index]), as: UTF8.self))
    }

    @inline(__always)
    mutating func skipDigits() {
        while index < end && isDigit(input[index]) {
            index += 1
        }
    }

    @inline(__always)
    func requireDigit() throws(JSONParseError) {
        guard index < end else { throw endOfInput() }
        guard isDigit(input[index]) else { throw failure(.invalidNumber, at: index) }
    }

    /// Parses a string literal with `index` at its opening quote and leaves `index` after the
    /// closing quote. Strings without escapes become one String straight from the input slice.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = index + 1
        var j = start
        var runStart = start
        var escaped = false
        while true {
            j = skipPlainBytes(from: j)
            guard j < end else { throw endOfInput() }
            let byte = input[j]
            if byte == UInt8(ascii: "\"") {
                break
            }
            if byte >= 0x80 {
                guard let length = utf8SequenceLength(at: j) else { throw invalidUTF8(at: j) }
                j += length
                continue
            }
            if byte < 0x20 {
                throw failure(.controlCharacterInString, at: j)
            }
            // Only a backslash is left.
            if !escaped {
                escaped = true
                scratch.removeAll(keepingCapacity: true)
            }
            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[runStart..<j]))
            j = try decodeEscape(at: j)
            runStart = j
        }
        index = j + 1
        if !escaped {
            return String(decoding: UnsafeBufferPointer(rebasing: input[start..<j]), as: UTF8.self)
        }
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[runStart..<j]))
        return String(decoding: scratch, as: UTF8.self)
    }

    /// Returns the first index at or after `from` holding a quote, backslash, control byte or
    /// non-ASCII byte. Checks eight bytes per step because long tokens dominate FCM bodies.
    @inline(__always)
    func skipPlainBytes(from: Int) -> Int {
        var j = from
        if let base = input.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while j &+ 8 <= end {
                let word = raw.loadUnaligned(fromByteOffset: j, as: UInt64.self)
                let quotes = word ^ (ones &* 0x22)
                let backslashes = word ^ (ones &* 0x5C)
                // Classic "has zero byte" / "has byte below n" tricks: exact as a yes/no answer.
                let special = ((quotes &- ones) & ~quotes)
                    | ((backslashes &- ones) & ~backslashes)
                    | ((word &- ones &* 0x20) & ~word)
                    | word
                if special & highs != 0 { break }
                j &+= 8
            }
        }
        while j < end {
            let byte = input[j]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 {
                break
            }
            j += 1
        }
        return j
    }

    /// Decodes the escape whose backslash is at `j` into `scratch`; returns the index after it.
    mutating func decodeEscape(at j: Int) throws(JSONParseError) -> Int {
        let k = j + 1
        guard k < end else { throw endOfInput() }
        let simple: UInt8
        switch input[k] {
        case UInt8(ascii: "\""): simple = 0x22
        case UInt8(ascii: "\\"): simple = 0x5C
        case UInt8(ascii: "/"): simple = 0x2F
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"):
            let unit = try hex4(at: k + 1)
            var next = k + 5
            var scalar = unit
            if unit >= 0xD800 && unit <= 0xDBFF {
                guard next < end else { throw endOfInput() }
                guard input[next] == UInt8(ascii: "\\") else { throw loneSurrogate(at: j) }
                guard next + 1 < end else { throw endOfInput() }
                guard input[next + 1] == UInt8(ascii: "u") else { throw loneSurrogate(at: j) }
                let low = try hex4(at: next + 2)
                guard low >= 0xDC00 && low <= 0xDFFF else { throw loneSurrogate(at: j) }
                scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                next += 6
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw loneSurrogate(at: j)
            }
            appendUTF8(scalar)
            return next
        default:
            throw failure(.invalidEscape, at: k)
        }
        scratch.append(simple)
        return k + 1
    }

    func hex4(at start: Int) throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for k in start..<start + 4 {
            guard k < end else { throw endOfInput() }
            let byte = input[k]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure(.invalidEscape, at: k)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(truncatingIfNeeded: scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(truncatingIfNeeded: 0xC0 | scalar >> 6))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(truncatingIfNeeded: 0xE0 | scalar >> 12))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(truncatingIfNeeded: 0xF0 | scalar >> 18))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F))
        }
    }

    /// The length of the well-formed UTF-8 sequence starting at `j` (a byte >= 0x80), or nil.
    /// Follows Unicode table 3-7: no overlongs, no UTF-16 surrogates, nothing above U+10FFFF.
    func utf8SequenceLength(at j: Int) -> Int? {
        let lead = input[j]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return nil
        }
        guard j + length <= end else { return nil }
        let second = input[j + 1]
        guard second >= low && second <= high else { return nil }
        for k in j + 2..<j + length where input[k] & 0xC0 != 0x80 {
            return nil
        }
        return length
    }

    // MARK: Error construction (cold paths)

    func endOfInput() -> JSONParseError {
        JSONParseError(kind: .unexpectedEnd, offset: end)
    }

    @inline(never)
    func invalidUTF8(at j: Int) -> JSONParseError {
        JSONParseError(kind: .invalidUTF8, offset: j, detail: "0x" + hexDigits(UInt32(input[j]), width: 2))
    }

    @inline(never)
    func tooDeep(at j: Int) -> JSONParseError {
        JSONParseError(kind: .tooDeep, offset: j, detail: String(maxDepth))
    }

    @inline(never)
    func loneSurrogate(at j: Int) -> JSONParseError {
        JSONParseError(kind: .loneSurrogate, offset: j)
    }

    /// An error naming the character at `j`; a malformed UTF-8 sequence there is reported as
    /// such instead, since there is no character to name.
    @inline(never)
    func failure(_ kind: JSONParseError.Kind, at j: Int) -> JSONParseError {
        guard j < end else { return endOfInput() }
        let lead = input[j]
        guard lead >= 0x80 else {
            return JSONParseError(kind: kind, offset: j, detail: displayForm(of: UInt32(lead)))
        }
        guard let length = utf8SequenceLength(at: j) else { return invalidUTF8(at: j) }
        var scalar = UInt32(lead) & (0xFF >> (length + 1))
        for k in j + 1..<j + length {
            scalar = scalar << 6 | UInt32(input[k] & 0x3F)
        }
        return JSONParseError(kind: kind, offset: j, detail: displayForm(of: scalar))
    }
}

/// How an offending character appears in messages: itself when visible, `\uXXXX` otherwise,
/// so invisible characters such as a BOM or NBSP can still be seen in a log line.
private func displayForm(of value: UInt32) -> String {
    guard let scalar = Unicode.Scalar(value) else { return "\\u" + hexDigits(value, width: 4) }
    let visible: Bool
    if value < 0x80 {
        visible = value >= 0x20 && value < 0x7F
    } else {
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator,
             .privateUse, .surrogate, .unassigned, .nonspacingMark, .spacingMark, .enclosingMark:
            visible = false
        default:
            visible = true
        }
    }
    if visible {
        return String(Character(scalar))
    }
    if value < 0x10000 {
        return "\\u" + hexDigits(value, width: 4)
    }
    let offsetValue = value - 0x10000
    return "\\u" + hexDigits(0xD800 + (offsetValue >> 10), width: 4)
        + "\\u" + hexDigits(0xDC00 + (offsetValue & 0x3FF), width: 4)
}

private func hexDigits(_ value: UInt32, width: Int) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

// MARK: - Accessors and serialization

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

    /// Compact serialization (no spaces), member order preserved.
    public func serialized() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        appendJSONValue(self, to: &out)
        return String(decoding: out, as: UTF8.self)
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

/// Appends the compact JSON text of `value` to `out`.
public func appendJSONValue(_ value: JSONValue, to out: inout [UInt8]) {
    switch value {
    case .null:
        appendASCII("null", to: &out)
    case .bool(let flag):
        appendASCII(flag ? "true" : "false", to: &out)
    case .number(let number):
        out.append(contentsOf: number.text.utf8)
    case .string(let string):
        appendJSONString(string, to: &out)
    case .array(let elements):
        out.append(UInt8(ascii: "["))
        for (position, element) in elements.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONValue(element, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    case .object(let object):
        out.append(UInt8(ascii: "{"))
        for (position, member) in object.members.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(member.key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSONValue(member.value, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

@inline(__always)
private func appendASCII(_ literal: StaticString, to out: inout [UInt8]) {
    out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
}

/// Appends the JSON string literal for `s` (with quotes) to `out`.
public func appendJSONString(_ s: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var s = s
    s.withUTF8 { utf8 in
        // Copy unescaped runs in bulk; only quote, backslash, C0 controls and the noncharacters
        // U+FFFE and U+FFFF need escaping. Those two are valid JSON raw but not allowed anywhere
        // in an XML document, and this JSON also travels inside XMPP stanzas.
        var runStart = 0
        var j = 0
        while j < utf8.count {
            let byte = utf8[j]
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") && byte != 0xEF {
                j += 1
                continue
            }
            let nonchar = byte == 0xEF && j + 2 < utf8.count && utf8[j + 1] == 0xBF && utf8[j + 2] >= 0xBE
            if byte == 0xEF && !nonchar {
                j += 1
                continue
            }
            if runStart < j {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<j]))
            }
            out.append(UInt8(ascii: "\\"))
            if nonchar {
                appendASCII(utf8[j + 2] == 0xBE ? "uFFFE" : "uFFFF", to: &out)
                j += 3
                runStart = j
                continue
            }
            j += 1
            runStart = j
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            default:
                let hex: StaticString = "0123456789ABCDEF"
                appendASCII("u00", to: &out)
                out.append(hex.utf8Start[Int(byte >> 4)])
                out.append(hex.utf8Start[Int(byte & 0x0F)])
            }
        }
        if runStart < utf8.count {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
    }
    out.append(UInt8(ascii: "\""))
}

// MARK: - Writer

/// Builds compact JSON text by appending; used for hand-written responses on hot paths.
///
/// Commas are inserted automatically. One flag is enough to place them: a closed
/// container is itself a finished element of its parent, so after `endObject()` or
/// `endArray()` the parent always needs a comma before its next element.
public struct JSONWriter: Sendable {
    /// The UTF-8 JSON text written so far.
    public private(set) var bytes: [UInt8]
    /// True when the next element (key or array value) must be preceded by a comma.
    private var needsComma = false

    /// Creates an empty writer.
    public init() {
        bytes = []
        bytes.reserveCapacity(256)
    }

    /// Creates an empty writer whose buffer can hold `capacity` bytes before growing.
    public init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The JSON text written so far.
    public var string: String {
        String(decoding: bytes, as: UTF8.self)
    }

    @inline(__always)
    private mutating func separate() {
        if needsComma {
            bytes.append(UInt8(ascii: ","))
        }
    }

    /// Opens an object.
    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    /// Closes the innermost object.
    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// Opens an array.
    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    /// Closes the innermost array.
    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes a comma first when needed, then `"k":`.
    public mutating func key(_ k: String) {
        separate()
        appendJSONString(k, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes a string value, or `null` for nil.
    public mutating func value(_ s: String?) {
        separate()
        if let s {
            appendJSONString(s, to: &bytes)
        } else {
            appendASCII("null", to: &bytes)
        }
        needsComma = true
    }

    /// Writes an integer value.
    public mutating func value(_ i: Int64) {
        separate()
        appendDecimal(i)
        needsComma = true
    }

    /// Writes an integer value.
    public mutating func value(_ i: Int) {
        value(Int64(i))
    }

    /// Writes `true` or `false`.
    public mutating func value(_ b: Bool) {
        separate()
        appendASCII(b ? "true" : "false", to: &bytes)
        needsComma = true
    }

    /// Writes any JSON value in compact form.
    public mutating func value(_ v: JSONValue) {
        separate()
        appendJSONValue(v, to: &bytes)
        needsComma = true
    }

    /// Writes `null`.
    public mutating func null() {
        separate()
        appendASCII("null", to: &bytes)
        needsComma = true
    }

    /// Writes an already-serialized JSON value verbatim.
    public mutating func raw(_ json: String) {
        separate()
        bytes.append(contentsOf: json.utf8)
        needsComma = true
    }

    /// Writes the digits straight into the buffer so integers cost no String allocation.
    private mutating func appendDecimal(_ i: Int64) {
        if i < 0 {
            bytes.append(UInt8(ascii: "-"))
        }
        var magnitude = i.magnitude
        var digitCount = 1
        var probe = magnitude
        while probe >= 10 {
            probe /= 10
            digitCount += 1
        }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digitCount))
        var position = start + digitCount - 1
        repeat {
            bytes[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
            position -= 1
        } while magnitude > 0
    }
}
