// String literals for the JSON parser (JSONParser.swift): the fast scan for plain bytes, escapes,
// surrogate pairs and the UTF-8 well-formedness check.

extension ByteParser {
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
}
