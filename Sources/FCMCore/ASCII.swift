/// ASCII case-insensitive prefix test on UTF-8 bytes; `prefix` is written in lower case
/// (header values and condition keywords are ASCII in practice).
public func hasPrefixIgnoringCase<C: Collection>(_ bytes: C, _ prefix: StaticString) -> Bool where C.Element == UInt8 {
    var it = bytes.makeIterator()
    for i in 0..<prefix.utf8CodeUnitCount {
        guard let b = it.next() else { return false }
        let lower = (b >= 65 && b <= 90) ? b | 0x20 : b
        if lower != prefix.utf8Start[i] { return false }
    }
    return true
}
