/// ASCII case-insensitive prefix test on UTF-8 bytes; `prefix` is written in lower case
/// (header values and condition keywords are ASCII in practice).
/// Inlinable, so each caller gets a copy specialized for its collection (a generic call across
/// modules cost thousands of instructions a request).
@inlinable
public func hasPrefixIgnoringCase<C: Collection>(_ bytes: C, _ prefix: StaticString) -> Bool where C.Element == UInt8 {
    var it = bytes.makeIterator()
    for i in 0..<prefix.utf8CodeUnitCount {
        guard let b = it.next() else { return false }
        let lower = (b >= 65 && b <= 90) ? b | 0x20 : b
        if lower != prefix.utf8Start[i] { return false }
    }
    return true
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    public func trimmingSpaces() -> String {
        // Nothing to trim (the usual case) when neither end byte is a blank: a character that
        // is a blank ends with that byte.
        var s = Substring(self)
        if let f = s.utf8.first, f != 32 && f != 9, let l = s.utf8.last, l != 32 && l != 9 { return String(s) }
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
