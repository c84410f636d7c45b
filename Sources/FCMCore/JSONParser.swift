// The strict RFC 8259 parser: entry points, containers, values and numbers.
// JSONParser+Strings.swift holds the string scanning and UTF-8 checks of the same `ByteParser`.
//
// Every request body goes through this parser, so it reads straight from a byte buffer with an
// index, builds each String from one validated UTF-8 slice, and keeps numbers as their source text.

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

/// A key hashed and compared by its UTF-8 bytes, for duplicate detection in large objects.
private struct KeyBytes: Hashable {
    let key: String

    static func == (lhs: KeyBytes, rhs: KeyBytes) -> Bool {
        sameUTF8(lhs.key, rhs.key)
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
        for member in members where sameUTF8(member.key, key) {
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
struct ByteParser {
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
    fileprivate mutating func parseKey(into container: inout OpenContainer) throws(JSONParseError) {
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
        try skipNumber()
        return JSONNumber(text: String(decoding: UnsafeBufferPointer(rebasing: input[start..<index]), as: UTF8.self))
    }

    /// Moves `index` past the number starting there (RFC 8259's grammar: no leading zeros, a
    /// digit after `.` and after the exponent's sign).
    mutating func skipNumber() throws(JSONParseError) {
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
