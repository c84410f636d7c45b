import Synchronization

/// Fast random bits for ids that name things and guard nothing (APNs's `apns-id` and
/// `apns-unique-id`: no token or key is made from them): SplitMix64, a counter from a start
/// drawn once from the system's generator, each step mixed by a bijection. An APNs send makes
/// two ids; drawn from the system's generator they cost four `getrandom` calls a send. No two
/// values drawn by one process are alike.
public enum RandomBits {
    private static let state = Atomic<UInt64>({ var rng = SystemRandomNumberGenerator(); return rng.next() }())

    /// The next 64 bits.
    public static func next() -> UInt64 {
        var z = state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
