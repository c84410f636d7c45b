import FCMCore
import Platform

/// Long polls waiting for something to change (inbox `wait`/`min`), answered without holding a
/// thread each: one thread re-checks the waiting polls after the changes that may satisfy them and
/// at their deadlines.
///
/// A poll watches one device. A change that names its devices (a send's commit, a client's
/// acknowledgement) re-checks only the polls of those devices; any other change (the control API,
/// the clock, a recovery) re-checks every poll. A poll whose device does not exist yet is
/// re-checked on every change. However many polls wait, and however costly their checks (a
/// `status` filter pages through the inbox in the store), the checks take at most a fifth of the
/// time: after a round of checks that took `t`, the next round that a change asks for starts no
/// sooner than `4t` later (a deadline is answered at once).
///
/// `@unchecked Sendable`: every stored property but `lock` is only touched under `lock`.
final class LongPolls: @unchecked Sendable {
    /// What a check found: the poll answered (satisfied, or `final`), or still waiting on a device
    /// (nil: one that does not exist yet).
    enum Check {
        case answered
        case waiting(device: Int64?)
    }

    /// A waiting poll. `check(final)` answers the poll when it is satisfied, or unconditionally
    /// when `final` (deadline passed or shutting down).
    struct Waiter {
        let id: Int
        let deadline: UInt64
        /// The device it waits on, as of its last check (nil: not checked yet, or no such device).
        var device: Int64?
        let check: @Sendable (_ final: Bool) -> Check
    }

    /// How much longer than a round of checks took the thread rests before the next one a change
    /// asks for.
    static let restFactor: UInt64 = 4

    private let lock = ConditionLock()
    private var waiters: [Waiter] = []
    /// A change that named no devices came since the last round: every poll is re-checked.
    private var changedAll = false
    /// The devices changes named since the last round.
    private var changedDevices: Set<Int64> = []
    /// A poll was added since the last round (it has no device yet, so the round checks it).
    private var added = false
    private var stopped = false
    private var nextID = 0
    private var started = false
    /// No round for a change before this (monotonic nanoseconds).
    private var restUntil: UInt64 = 0
    /// The polls the round under way is checking.
    private var checking: Set<Int> = []

    /// Adds a poll (after its caller found it not yet satisfied); it is checked once more in the
    /// next round for changes (at once, unless the polls rest), in case the change it waits for
    /// happened in between.
    func add(deadline: UInt64, check: @escaping @Sendable (_ final: Bool) -> Check) {
        let (stopping, needsThread) = lock.withLock { () -> (Bool, Bool) in
            if stopped { return (true, false) }
            nextID += 1
            waiters.append(Waiter(id: nextID, deadline: deadline, device: nil, check: check))
            added = true
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

    /// Something changed that may concern any poll: re-check them all.
    func poke() {
        let any = lock.withLock { () -> Bool in
            if !waiters.isEmpty { changedAll = true }
            return !waiters.isEmpty
        }
        if any { lock.broadcast() }
    }

    /// Something changed in these devices' inboxes only: re-check their polls (and those of
    /// devices not known yet). `devices` is not read when no poll waits.
    func poke<S: Sequence<Int64>>(devices: S) {
        let any = lock.withLock { () -> Bool in
            if waiters.isEmpty { return false }
            if !changedAll { changedDevices.formUnion(devices) }
            return true
        }
        if any { lock.broadcast() }
    }

    /// Answers every waiting poll with what there is, and refuses to wait from now on.
    func stop() {
        // Those a round is checking now are its to answer (once: a poll answered twice would
        // write two answers).
        let all = lock.withLock { () -> [Waiter] in
            stopped = true
            defer { waiters.removeAll { !checking.contains($0.id) } }
            return waiters.filter { !checking.contains($0.id) }
        }
        lock.broadcast()
        for w in all { _ = w.check(true) }
    }

    /// Whether a round taken now would check `w` for a change (not for its deadline).
    private func changed(_ w: Waiter) -> Bool {
        guard let device = w.device else { return true }
        return changedAll || changedDevices.contains(device)
    }

    private func run() {
        while true {
            // The polls to check this round, whether each is at its deadline, and whether the
            // round is one for changes.
            let due: ([(Waiter, Bool)], Bool)? = lock.withLock {
                while !stopped {
                    let now = monotonicNanos()
                    let changes = changedAll || added || !changedDevices.isEmpty
                    if changes && now >= restUntil { break }
                    if waiters.contains(where: { $0.deadline <= now }) { break }
                    var next = waiters.map(\.deadline).min() ?? now + 3_600_000_000_000
                    if changes { next = min(next, restUntil) }
                    lock.wait(untilMonotonicNanos: next)
                }
                if stopped { return nil }
                let now = monotonicNanos()
                // A round for deadlines only, while resting, leaves the changes for the next.
                let forChanges = now >= restUntil
                var picked: [(Waiter, Bool)] = []
                for w in waiters where w.deadline <= now || (forChanges && changed(w)) { picked.append((w, w.deadline <= now)) }
                if forChanges {
                    changedAll = false
                    added = false
                    changedDevices.removeAll(keepingCapacity: true)
                }
                checking = Set(picked.map(\.0.id))
                return (picked, forChanges)
            }
            guard let (due, forChanges) = due else { return }
            let start = monotonicNanos()
            var answered = Set<Int>()
            var devices: [Int: Int64?] = [:]
            for (w, final) in due {
                switch w.check(final) {
                case .answered: answered.insert(w.id)
                case .waiting(let device): devices[w.id] = device
                }
            }
            let end = monotonicNanos()
            let unanswered = lock.withLock { () -> [Waiter] in
                checking = []
                // Stopped meanwhile: what this round left waiting is answered now, by it.
                if stopped { return due.map(\.0).filter { !answered.contains($0.id) } }
                // Only a round for changes rests: deadlines keep coming, and rounds for them alone
                // would put changes off until the polls' deadlines.
                if forChanges { restUntil = end + (end - start) * Self.restFactor }
                if !answered.isEmpty { waiters.removeAll { answered.contains($0.id) } }
                for i in waiters.indices {
                    if let device = devices[waiters[i].id] { waiters[i].device = device }
                }
                return []
            }
            for w in unanswered { _ = w.check(true) }
        }
    }
}
