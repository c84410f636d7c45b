import FCMCore
import Synchronization

/// State of the multicast-id generator: seeded once from the system's random source, then
/// advanced without a system call per send (ids must look random, not be secret).
private let multicastState = Atomic<UInt64>(UInt64.random(in: 0...UInt64.max))

/// A fresh multicast id: a positive 63-bit number with 19 digits, as real ones had.
func newMulticastID() -> Int64 {
    // splitmix64 over an atomic counter: distinct states give distinct, well-spread outputs.
    multicastID(mixing: multicastState.wrappingAdd(0x9e37_79b9_7f4a_7c15, ordering: .relaxed).newValue)
}
