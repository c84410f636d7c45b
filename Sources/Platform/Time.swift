#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

import Synchronization

/// Monotonic time in nanoseconds, for deadlines that must not move with the wall clock.
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}


/// Real wall-clock time in microseconds since the epoch.
public func wallClockMicros() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}

/// The mock's clock: real time plus an offset that tests move forward (control API `/clock`).
///
/// It lives here, not in FCMCore, because it is state that every thread reads (an atomic
/// offset over the real clock), and FCMCore holds only pure rules on the standard library: they
/// take times as plain numbers (`rfc3339(millis:)`, `MessageIDAllocator.reserve(_:nowMicros:)`)
/// from whoever owns a clock.
///
/// Every timestamp the mock shows (accepted, delivered, expires) is on this clock, so a test that
/// advances it sees TTLs run out without sleeping.
public final class MockClock: Sendable {
    private let offsetMicros = Atomic<Int64>(0)
    private let source: @Sendable () -> Int64

    /// A clock over `source` (real time unless a test injects its own).
    public init(source: @escaping @Sendable () -> Int64 = wallClockMicros) {
        self.source = source
    }

    /// Now, in microseconds since the epoch.
    public func nowMicros() -> Int64 { source() + offsetMicros.load(ordering: .relaxed) }

    /// Now, in milliseconds since the epoch.
    public func nowMillis() -> Int64 { nowMicros() / 1000 }

    /// How far the clock runs ahead of real time, in whole seconds.
    public var offsetSeconds: Int64 { offsetMicros.load(ordering: .relaxed) / 1_000_000 }

    /// Moves the clock forward by `seconds` (never back: messages already expired stay expired).
    public func advance(seconds: Int64) {
        offsetMicros.wrappingAdd(seconds * 1_000_000, ordering: .relaxed)
    }

    /// Returns to real time.
    public func reset() { offsetMicros.store(0, ordering: .relaxed) }
}
