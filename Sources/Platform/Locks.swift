#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutex with a condition variable, for the few places that must block a thread until
/// something happens (group commit followers, long-poll waiters).
///
/// `@unchecked Sendable` is safe because the only state is the pthread mutex and condition,
/// which exist to be shared between threads; they live in heap memory this object owns, so their
/// addresses never move. Callers keep their own state inside `withLock`.
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// A new unlocked lock; the condition waits on the monotonic clock.
    public init() {
        var mattr = pthread_mutexattr_t()
        pthread_mutexattr_init(&mattr)
        pthread_mutexattr_settype(&mattr, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &mattr)
        pthread_mutexattr_destroy(&mattr)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the mutex.
    public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a broadcast; call only inside `withLock`. Spurious wake-ups happen: loop on the
    /// real condition.
    public func wait() {
        pthread_cond_wait(cond, mutex)
    }

    /// Waits for a broadcast until `deadline` (monotonic nanoseconds, see `monotonicNanos()`);
    /// returns false on time-out. Call only inside `withLock`.
    @discardableResult
    public func wait(untilMonotonicNanos deadline: UInt64) -> Bool {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) == 0
    }

    /// Wakes every waiter. May be called with or without the mutex held.
    public func broadcast() {
        pthread_cond_broadcast(cond)
    }
}

/// A closure to keep under a lock (`Locked`, `Mutex`) and read out again and again.
///
/// A bare closure (or a tuple holding one) read through `withLock`'s `inout` value comes back
/// wrapped in two more reabstraction thunks, which are written back into the lock on every read
/// (swiftlang/swift#91348): each read costs memory for good, and after some hundred thousand
/// reads calling it overflows the stack. Inside a struct the closure is stored as it is.
public struct Handler<Input, Output>: Sendable {
    public let call: @Sendable (Input) -> Output
    public init(_ call: @escaping @Sendable (Input) -> Output) { self.call = call }
}

/// A value guarded by a plain pthread mutex (glibc's adaptive kind: it spins briefly before
/// sleeping).
///
/// Used instead of `Synchronization.Mutex` on the send path: on Linux that one is a
/// priority-inheritance futex whose contended path always enters the kernel, which measured at a
/// third of the throughput under 32 concurrent senders on two cores.
///
/// `@unchecked Sendable` is safe because the value is only reached inside `withLock`, which holds
/// the mutex, and `Value` itself is Sendable.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    /// Guards `value`.
    public init(_ value: Value) {
        self.value = value
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
