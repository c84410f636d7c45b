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

extension String {
    /// The text cut to at most `maxBytes` UTF-8 bytes, between characters (the whole text when
    /// it fits).
    public func utf8Prefix(_ maxBytes: Int) -> String {
        guard utf8.count > maxBytes else { return self }
        var out = ""
        for ch in self {
            if out.utf8.count + ch.utf8.count > maxBytes { break }
            out.append(ch)
        }
        return out
    }
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

/// Whether two strings have the same UTF-8 bytes: eight at a time where both are contiguous
/// (native and small strings are). Not `String`'s `==`, which compares by canonical equivalence
/// and, for a string not known to be ASCII or NFC (as the header values nghttp2 hands over),
/// costs tens of instructions a byte; JSON compares member names by code points, too.
public func sameUTF8(_ a: String, _ b: String) -> Bool {
    guard a.utf8.count == b.utf8.count else { return false }
    let same = a.utf8.withContiguousStorageIfAvailable { x in
        b.utf8.withContiguousStorageIfAvailable { y in sameBytes(x, y) }
    }
    if let same, let same { return same }
    return a.utf8.elementsEqual(b.utf8)
}

/// Whether two buffers hold the same bytes, compared eight at a time.
public func sameBytes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
    guard x.count == y.count else { return false }
    guard let p = UnsafeRawPointer(x.baseAddress), let q = UnsafeRawPointer(y.baseAddress) else { return true }
    let n = x.count
    var i = 0
    while i &+ 8 <= n {
        if p.loadUnaligned(fromByteOffset: i, as: UInt64.self) != q.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
        i &+= 8
    }
    while i < n {
        if p.load(fromByteOffset: i, as: UInt8.self) != q.load(fromByteOffset: i, as: UInt8.self) { return false }
        i &+= 1
    }
    return true
}

/// Whether the bytes `name` spell `lowercase` (which has no upper-case letters) in ASCII,
/// either case.
// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func equalsLowercaseASCII(_ name: UnsafeBufferPointer<UInt8>, _ lowercase: String) -> Bool {
    guard name.count == lowercase.utf8.count else { return false }
    return lowercase.utf8.withContiguousStorageIfAvailable { equalsLowercaseASCII(name, $0) }
        ?? Array(lowercase.utf8).withUnsafeBufferPointer { equalsLowercaseASCII(name, $0) }
}

/// The comparison itself, over the bytes of both.
@usableFromInline
func equalsLowercaseASCII(_ name: UnsafeBufferPointer<UInt8>, _ lowercase: UnsafeBufferPointer<UInt8>) -> Bool {
    guard name.count == lowercase.count else { return false }
    for i in 0..<name.count {
        let b = name[i]
        if (b >= 0x41 && b <= 0x5A ? b | 0x20 : b) != lowercase[i] { return false }
    }
    return true
}

/// Whether header name `name` is `lowercase` (no upper-case letters) in ASCII, either case:
/// compared over the bytes of both, with no iteration of a `String`.
// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func nameIs(_ name: String, _ lowercase: StaticString) -> Bool {
    let l = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
    guard name.utf8.count == l.count else { return false }
    return name.utf8.withContiguousStorageIfAvailable { equalsLowercaseASCII($0, l) }
        ?? Array(name.utf8).withUnsafeBufferPointer { equalsLowercaseASCII($0, l) }
}

/// `equalsLowercaseASCII` on a string's bytes (read in place when they are contiguous).
// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func equalsLowercaseASCII(_ name: String, _ lowercase: String) -> Bool {
    guard name.utf8.count == lowercase.utf8.count else { return false }
    return name.utf8.withContiguousStorageIfAvailable { equalsLowercaseASCII($0, lowercase) }
        ?? Array(name.utf8).withUnsafeBufferPointer { equalsLowercaseASCII($0, lowercase) }
}

/// `s.lowercased()`, without a copy when `s` has no upper-case ASCII letter and no non-ASCII byte.
// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func lowercasedIfNeeded(_ s: String) -> String {
    let lower = s.utf8.withContiguousStorageIfAvailable { !$0.contains { ($0 >= 0x41 && $0 <= 0x5A) || $0 >= 0x80 } }
    return lower == true ? s : s.lowercased()
}

/// Whether every byte is ASCII.
// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for b in bytes where b >= 0x80 { return false }
    return true
}

// Inlinable: called on every request from the rooms, across a module boundary.
@inlinable
public func isHexDigit(_ c: UInt8) -> Bool {
    (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
}

/// A header value quoted for a message, cut at 64 characters (APNs and Web Push refusals).
public func quoted(_ s: String) -> String {
    "\"" + (s.count > 64 ? String(s.prefix(64)) + "…" : s) + "\""
}
