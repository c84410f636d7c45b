// UUIDs in canonical text form: checking a sender's (`apns-id`) and writing the mock's own
// (`apns-id` when none was sent, `apns-unique-id`) from random bits the caller draws.

/// Whether `s` is a UUID in canonical text form, 8-4-4-4-12 hexadecimal digits, either case.
public func isCanonicalUUID(_ s: String) -> Bool {
    let b = Array(s.utf8)
    guard b.count == 36 else { return false }
    for (i, c) in b.enumerated() {
        if i == 8 || i == 13 || i == 18 || i == 23 {
            if c != UInt8(ascii: "-") { return false }
        } else if !isHexDigit(c) {
            return false
        }
    }
    return true
}

/// The canonical text of a version-4 UUID (lowercase, as APNs generates `apns-id`) made of 128
/// random bits, `high` then `low`: the version (4) and variant (10) bits are set over them, as
/// RFC 9562 has them. The bits come from the caller (Platform's `RandomBits`): this module
/// keeps no state.
public func uuidString(high: UInt64, low: UInt64) -> String {
    let high = high & ~0xF000 | 0x4000
    let low = low & ~(0xC << 60) | (0x8 << 60)
    return String(unsafeUninitializedCapacity: 36) { out in
        let hex: StaticString = "0123456789abcdef"
        var at = 0
        for i in 0..<16 {
            if i == 4 || i == 6 || i == 8 || i == 10 {
                out[at] = UInt8(ascii: "-")
                at += 1
            }
            let byte = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(56 - 8 * (i % 8)))
            out[at] = hex.utf8Start[Int(byte >> 4)]
            out[at + 1] = hex.utf8Start[Int(byte & 15)]
            at += 2
        }
        return at
    }
}
