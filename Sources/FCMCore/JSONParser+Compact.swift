// A JSON object checked in one pass, with no tree built, and kept as its compact text: for a body
// a route keeps as text (an APNs payload is recorded as it came, not read member by member). The
// pass takes the common shape only and leaves every other document to `JSONParser.parse`: what
// it does take, the parser would accept, and its text is byte for byte what `appendJSONValue`
// makes of the parsed object (JSONParserCompactTests holds it to both). A body without
// whitespace between its tokens (as clients send them) is kept as it is, with no copy.

/// A JSON object's compact text, and whether one member path is present.
public struct CompactJSONObject: Sendable, Equatable {
    /// The object as `appendJSONValue` writes it: no whitespace, members in order, strings and
    /// numbers as they came.
    public let text: [UInt8]
    /// Whether the top-level member named by the probe's first key is an object that has a
    /// member named by its second (any value, `null` included).
    public let hasProbe: Bool
}

extension JSONParser {
    /// `bytes` as a compact JSON object, checked in one pass; nil when the pass does not take it:
    /// not an object, malformed, or of a shape only the parser handles (a `\/` or `\u` escape, a
    /// key with any escape, a noncharacter U+FFFE or U+FFFF, which the writer escapes; containers
    /// nested over 32 deep, more than 64 keys open at once). Parse those with `parse(_:)`.
    /// `probe`: two ASCII keys, the second looked for in the object under the first.
    public static func compactObject(_ bytes: [UInt8], probe: (StaticString, StaticString)) -> CompactJSONObject? {
        let read: (found: Bool, spaced: Bool)? = bytes.withUnsafeBufferPointer { buffer in
            withUnsafeTemporaryAllocation(of: (Int, Int).self, capacity: CompactPass.maxKeys) { keys in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: CompactPass.maxDepth + 1) { firstKey in
                    var parser = ByteParser(buffer, maxDepth: CompactPass.maxDepth)
                    return parser.checkObject(keys: keys, firstKey: firstKey, probe: probe)
                }
            }
        }
        guard let read else { return nil }
        return CompactJSONObject(text: read.spaced ? withoutWhitespace(bytes) : bytes, hasProbe: read.found)
    }

    /// A well-formed document's bytes less the whitespace between its tokens.
    static func withoutWhitespace(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inString = false, escaped = false
        for b in bytes {
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            } else if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
                continue
            } else if b == UInt8(ascii: "\"") {
                inString = true
            }
            out.append(b)
        }
        return out
    }
}

/// The limits of the one-pass reading.
private enum CompactPass {
    /// Containers open at once (a bit each in a 64-bit word; the parser allows 64).
    static let maxDepth = 32
    /// Keys of the open objects remembered for the duplicate check.
    static let maxKeys = 64
}

extension ByteParser {
    /// The pass of `JSONParser.compactObject` over an object: whether the probe's path was seen
    /// and whether any whitespace lies between tokens; nil when the pass does not take the input.
    /// `keys`: the open objects' keys as (start, end) offsets; `firstKey[d]`: where the keys of
    /// the object open at depth d begin among them (duplicates are looked for among its own).
    mutating func checkObject(keys: UnsafeMutableBufferPointer<(Int, Int)>, firstKey: UnsafeMutableBufferPointer<Int>,
                              probe: (StaticString, StaticString)) -> (found: Bool, spaced: Bool)? {
        skipWhitespace()
        guard index < end, input[index] == UInt8(ascii: "{") else { return nil }
        var spaced = index > 0
        // Bit d of `objects`: whether the container open at depth d (1-based) is an object.
        var objects: UInt64 = 0
        var depth = 0
        var keyCount = 0
        // Whether the value about to be read is the top-level member under the probe's first
        // key; the depth of that member's object while it is open (0: not open).
        var probeValue = false
        var probeDepth = 0
        var found = false
        value: while true {
            spaced = skipSpace() || spaced
            guard index < end else { return nil }
            let byte = input[index]
            let opensProbe = probeValue
            probeValue = false
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard depth < CompactPass.maxDepth else { return nil }
                index += 1
                depth += 1
                let isObject = byte == UInt8(ascii: "{")
                if isObject {
                    objects |= 1 << UInt64(depth)
                    firstKey[depth] = keyCount
                    if opensProbe { probeDepth = depth }
                } else {
                    objects &= ~(1 << UInt64(depth))
                }
                spaced = skipSpace() || spaced
                guard index < end else { return nil }
                if input[index] != (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    if isObject {
                        guard let key = member(keys: keys, keyCount: &keyCount, from: keyCount, spaced: &spaced) else { return nil }
                        if depth == 1 { probeValue = equals(key, probe.0) } else if depth == probeDepth, equals(key, probe.1) { found = true }
                    }
                    continue value
                }
                // Empty: closed below like any other container.
            case UInt8(ascii: "\""):
                guard let stop = stringEnd(allowingEscapes: true) else { return nil }
                index = stop
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                do throws(JSONParseError) { try skipNumber() } catch { return nil }
            case UInt8(ascii: "t"):
                do throws(JSONParseError) { try expectLiteral("true") } catch { return nil }
            case UInt8(ascii: "f"):
                do throws(JSONParseError) { try expectLiteral("false") } catch { return nil }
            case UInt8(ascii: "n"):
                do throws(JSONParseError) { try expectLiteral("null") } catch { return nil }
            default:
                return nil
            }
            // A value is complete (or a container empty): commas and closing brackets until
            // the next value.
            while depth > 0 {
                spaced = skipSpace() || spaced
                guard index < end else { return nil }
                let next = input[index]
                let inObject = objects & (1 << UInt64(depth)) != 0
                index += 1
                if next == UInt8(ascii: ",") {
                    if inObject {
                        spaced = skipSpace() || spaced
                        guard let key = member(keys: keys, keyCount: &keyCount, from: firstKey[depth], spaced: &spaced) else { return nil }
                        if depth == 1 { probeValue = equals(key, probe.0) } else if depth == probeDepth, equals(key, probe.1) { found = true }
                    }
                    continue value
                }
                guard next == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return nil }
                if inObject { keyCount = firstKey[depth] }
                if depth == probeDepth { probeDepth = 0 }
                depth -= 1
            }
            spaced = skipSpace() || spaced
            return index == end ? (found, spaced) : nil
        }
    }

    /// `skipWhitespace`, saying whether it skipped any.
    @inline(__always)
    private mutating func skipSpace() -> Bool {
        let at = index
        skipWhitespace()
        return index != at
    }

    /// Whether the input's bytes `key` (a range of offsets) spell `name`.
    private func equals(_ key: (Int, Int), _ name: StaticString) -> Bool {
        sameBytes(UnsafeBufferPointer(rebasing: input[key.0..<key.1]), UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    /// Reads `"key" :` at `index`: the key's bytes (offsets, quotes excluded), remembered in
    /// `keys`; nil for a duplicate among the open object's keys (from `from`), a key with an
    /// escape, more keys than the list holds, or no colon.
    private mutating func member(keys: UnsafeMutableBufferPointer<(Int, Int)>, keyCount: inout Int, from: Int,
                                 spaced: inout Bool) -> (Int, Int)? {
        guard index < end, input[index] == UInt8(ascii: "\""), keyCount < keys.count,
              let stop = stringEnd(allowingEscapes: false) else { return nil }
        let key = (index + 1, stop - 1)
        for k in from..<keyCount {
            let (c, d) = keys[k]
            if sameBytes(UnsafeBufferPointer(rebasing: input[key.0..<key.1]), UnsafeBufferPointer(rebasing: input[c..<d])) { return nil }
        }
        keys[keyCount] = key
        keyCount += 1
        index = stop
        spaced = skipSpace() || spaced
        guard index < end, input[index] == UInt8(ascii: ":") else { return nil }
        index += 1
        return key
    }

    /// The index after the closing quote of the string at `index`, or nil: malformed, or holding
    /// what the pass leaves to the parser (any escape when `allowingEscapes` is false; `\/` and
    /// `\u` always; a noncharacter U+FFFE or U+FFFF).
    private func stringEnd(allowingEscapes: Bool) -> Int? {
        var j = index + 1
        while true {
            j = skipPlainBytes(from: j)
            guard j < end else { return nil }
            let byte = input[j]
            if byte == UInt8(ascii: "\"") { return j + 1 }
            if byte >= 0x80 {
                guard let length = utf8SequenceLength(at: j) else { return nil }
                if length == 3, byte == 0xEF, input[j + 1] == 0xBF, input[j + 2] >= 0xBE { return nil }
                j += length
                continue
            }
            guard byte == UInt8(ascii: "\\"), allowingEscapes, j + 1 < end else { return nil }
            switch input[j + 1] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                 UInt8(ascii: "r"), UInt8(ascii: "t"):
                j += 2
            default:
                return nil
            }
        }
    }
}
