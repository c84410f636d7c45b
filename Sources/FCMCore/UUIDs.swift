import Synchronization

// UUIDs in canonical text form: checking a sender's (`apns-id`) and making the mock's own
// (`apns-id` when none was sent, `apns-unique-id`).

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

/// A new random UUID (version 4), lowercase, as APNs generates `apns-id`.
public func newUUID() -> String {
    // The version (4) and variant (10) bits set, as RFC 9562 has them.
    let high = nextUUIDBits() & ~0xF000 | 0x4000
    let low = nextUUIDBits() & ~(0xC << 60) | (0x8 << 60)
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

/// `newUUID`'s generator: SplitMix64, a counter from a start drawn from the system's generator,
/// each step mixed by a bijection. A send makes two ids (`apns-id`, `apns-unique-id`): drawn from
/// the system's generator they cost four `getrandom` calls a send. These ids name messages and
/// guard nothing (no token or key is made from them), and no two made by one process are alike.
private let uuidState = Atomic<UInt64>(SystemRandomNumberGenerator.seed())

private func nextUUIDBits() -> UInt64 {
    var z = uuidState.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

extension SystemRandomNumberGenerator {
    fileprivate static func seed() -> UInt64 {
        var rng = SystemRandomNumberGenerator()
        return rng.next()
    }
}
