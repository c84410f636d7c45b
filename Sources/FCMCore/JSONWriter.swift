// Compact JSON writing: serialization of a `JSONValue`, string escaping, and `JSONWriter` for
// responses written by hand on hot paths.

extension JSONValue {
    /// Compact serialization (no spaces), member order preserved.
    public func serialized() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        appendJSONValue(self, to: &out)
        return String(decoding: out, as: UTF8.self)
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

    /// Writes a comma first when needed, then `"k":` for a key written in the source, copied as it
    /// is: it must need no escaping (printable ASCII, no quote or backslash; checked in debug
    /// builds). Hand-written responses on hot paths use it to skip the escaping scan.
    public mutating func key(literal k: StaticString) {
        separate()
        let b = UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount)
        assert(b.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") },
               "a literal key needs no escaping")
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: b)
        bytes.append(UInt8(ascii: "\""))
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

    /// Writes the digits straight into the buffer so integers cost no String allocation: formed
    /// right to left in a fixed buffer on the stack, then copied in one append.
    private mutating func appendDecimal(_ i: Int64) {
        if i < 0 {
            bytes.append(UInt8(ascii: "-"))
        }
        var magnitude = i.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        withUnsafeMutableBytes(of: &digits) { buf in
            var at = buf.count
            repeat {
                at -= 1
                buf[at] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: buf[at...])
        }
    }
}
