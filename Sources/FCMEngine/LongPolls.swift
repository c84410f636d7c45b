import FCMCore
import Platform

/// Long polls waiting for something to change (inbox `wait`/`min`), answered without holding a
/// thread each: one thread re-checks the waiting polls after every change and at their deadlines.
///
/// `@unchecked Sendable`: `waiters`, `dirty`, `stopped` and `nextID` are only touched under `lock`.
final class LongPolls: @unchecked Sendable {
    /// A waiting poll. `check(final)` answers the poll and returns true when it is satisfied, or
    /// unconditionally when `final` (deadline passed or shutting down).
    struct Waiter {
        let id: Int
        let deadline: UInt64
        let check: @Sendable (_ final: Bool) -> Bool
    }

    private let lock = ConditionLock()
    private var waiters: [Waiter] = []
    private var dirty = false
    private var stopped = false
    private var nextID = 0
    private var started = false

    /// Adds a poll (after its caller found it not yet satisfied); it is checked once more at once,
    /// in case the change it waits for happened in between.
    func add(deadline: UInt64, check: @escaping @Sendable (_ final: Bool) -> Bool) {
        let (stopping, needsThread) = lock.withLock { () -> (Bool, Bool) in
            if stopped { return (true, false) }
            nextID += 1
            waiters.append(Waiter(id: nextID, deadline: deadline, check: check))
            dirty = true
            defer { started = true }
            return (false, !started)
        }
        if stopping {
            _ = check(true)
            return
        }
        if needsThread { spawnThread { [self] in run() } }
        lock.broadcast()
    }

    /// Something changed: re-check every waiting poll.
    func poke() {
        let any = lock.withLock { () -> Bool in
            if !waiters.isEmpty { dirty = true }
            return !waiters.isEmpty
        }
        if any { lock.broadcast() }
    }

    /// Answers every waiting poll with what there is, and refuses to wait from now on.
    func stop() {
        let all = lock.withLock { () -> [Waiter] in
            stopped = true
            defer { waiters.removeAll() }
            return waiters
        }
        lock.broadcast()
        for w in all { _ = w.check(true) }
    }

    private func run() {
        while true {
            let snapshot: [Waiter]? = lock.withLock {
                while !stopped {
                    let now = monotonicNanos()
                    if dirty || waiters.contains(where: { $0.deadline <= now }) { break }
                    let next = waiters.map(\.deadline).min() ?? now + 3_600_000_000_000
                    lock.wait(untilMonotonicNanos: next)
                }
                if stopped { return nil }
                dirty = false
                return waiters
            }
            guard let snapshot else { return }
            let now = monotonicNanos()
            var answered = Set<Int>()
            for w in snapshot where w.check(w.deadline <= now) { answered.insert(w.id) }
            if !answered.isEmpty {
                lock.withLock { waiters.removeAll { answered.contains($0.id) } }
            }
        }
    }
}
