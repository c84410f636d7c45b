import Dispatch
import FCMCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A unit of work for the group committer: runs inside the shared write transaction.
public typealias WriteOp = @Sendable (SQLiteConnection) throws -> Void

/// The only owner of the SQLite connection: serialized reads, and writes by group commit.
///
/// A request's writes are answered only after they are committed. Committing each request on its
/// own would cap throughput at the commit rate, so concurrent requests share transactions by
/// leader/follower: a request that finds no commit running leads: it commits every batch queued
/// so far in one transaction, wakes exactly the requests it committed, and hands the lead to the
/// oldest request queued meanwhile. A leader never sleeps; a follower first yields a few times
/// (the commit is usually done by then) and otherwise sleeps once and is woken once (no
/// broadcast, no extra writer thread to wake on two cores).
///
/// WAL checkpoints stay SQLite's automatic ones (PASSIVE, every 1000 pages), run by the leader
/// after its commit: a checkpointer on another connection starves under continuous writes (the
/// log never gets fully copied back, so it is never restarted and grows without bound).
///
/// `@unchecked Sendable` is safe because each mutable part is reached under one lock:
/// `connection` only inside `connectionLock`; `pending`, `leaderActive`, `closed` and every
/// ticket's state only inside `queue`.
public final class Store: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let connectionLock = ConditionLock()
    private let queue = ConditionLock()
    private var pending: [Ticket] = []
    private var leaderActive = false
    private var closed = false
    /// How many times a follower yields the processor, checking whether its batch was committed,
    /// before it sleeps. A commit takes tens of microseconds; yielding that long costs less than a
    /// sleep and a wake-up, which on two cores measured at a third more sends per second.
    private let spinLimit = 32
    /// The path it was opened with (`:memory:` for a throwaway store).
    public let path: String
    /// The journal mode SQLite reports (`wal` for files, `memory` for `:memory:`).
    public let journalMode: String

    /// A batch of writes submitted together; `wait(for:)` blocks until it is committed.
    ///
    /// `@unchecked Sendable`: `ops` is immutable; the rest is only touched under the store's
    /// `queue` lock (the semaphore is itself thread-safe).
    public final class Ticket: @unchecked Sendable {
        let ops: [WriteOp]
        var done = false
        var outcome: StoreError?
        /// Its thread sleeps on `wake`.
        var sleeping = false
        /// It was handed the lead: its thread commits the next batch.
        var leads = false
        let wake = DispatchSemaphore(value: 0)
        /// Set with `done` or `leads`, readable without the lock (for the brief spin before sleeping).
        let settled = Atomic<Bool>(false)
        init(ops: [WriteOp]) { self.ops = ops }
    }

    /// Opens the store at `path` (a file, created when missing, or `:memory:`), sets WAL and runs
    /// pending migrations.
    public init(path: String) throws(StoreError) {
        let conn = try SQLiteConnection(path: path)
        try conn.execute("PRAGMA busy_timeout=5000")
        let mode = try conn.scalarText("PRAGMA journal_mode=WAL") ?? ""
        if path != ":memory:" && mode.lowercased() != "wal" {
            throw StoreError(code: 0, message: "could not switch the journal to WAL (got \(mode))", sql: nil)
        }
        // NORMAL in WAL mode: a commit survives a crash of the process (kill -9); only a power
        // loss can take the last transactions back, which a test mock need not survive.
        try conn.execute("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY")
        try Migrations.run(on: conn)
        self.path = path
        self.journalMode = mode.lowercased()
        self.connection = conn
    }

    /// Runs `body` with the connection, serialized with every other use.
    public func read<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connectionLock.withLock { () throws(StoreError) -> T in try body(connection) }
    }

    /// Queues `ops` for the next group commit and returns at once; ordering between submissions
    /// is the order of the calls, so callers that hold their own lock while submitting get their
    /// writes applied in the order they decided them.
    public func submit(_ ops: [WriteOp]) -> Ticket {
        let t = Ticket(ops: ops)
        queue.withLock {
            if closed {
                t.done = true
                t.outcome = StoreError(code: 0, message: "the store is closed", sql: nil)
            } else {
                pending.append(t)
            }
        }
        return t
    }

    /// Blocks until `ticket` is committed (leading the commit when nobody is); throws when the
    /// transaction that carried it failed.
    public func wait(for ticket: Ticket) throws(StoreError) {
        var spun = false
        while true {
            enum Next { case finished, lead, sleep, spin }
            let next: Next = queue.withLock {
                if ticket.done { return .finished }
                if ticket.leads || !leaderActive {
                    ticket.leads = false
                    leaderActive = true
                    return .lead
                }
                if !spun { return .spin }
                ticket.sleeping = true
                return .sleep
            }
            switch next {
            case .finished:
                if let e = queue.withLock({ ticket.outcome }) { throw e }
                return
            case .lead:
                lead()
            case .sleep:
                ticket.wake.wait()
            case .spin:
                var n = 0
                while n < spinLimit && !ticket.settled.load(ordering: .acquiring) {
                    sched_yield()
                    n += 1
                }
                spun = true
            }
        }
    }

    /// Submits and waits: the common case of one request's writes.
    public func write(_ ops: [WriteOp]) throws(StoreError) {
        try wait(for: submit(ops))
    }

    /// Commits everything queued, wakes whom it committed, hands the lead on.
    private func lead() {
        let batch: [Ticket] = queue.withLock {
            let b = pending
            pending.removeAll(keepingCapacity: true)
            return b
        }
        let results = commit(batch)
        var toWake: [Ticket] = []
        queue.withLock {
            for (t, r) in zip(batch, results) {
                t.done = true
                t.outcome = r
                t.settled.store(true, ordering: .releasing)
                if t.sleeping { toWake.append(t) }
            }
            if let heir = pending.first {
                // Leadership passes to the oldest request queued during this commit; it may not
                // be waiting yet, in which case it finds `leads` set when it calls wait.
                heir.leads = true
                heir.settled.store(true, ordering: .releasing)
                if heir.sleeping {
                    heir.sleeping = false
                    toWake.append(heir)
                }
            } else {
                leaderActive = false
            }
            for t in toWake { t.sleeping = false }
        }
        for t in toWake { t.wake.signal() }
    }

    /// Commits `batch` in one transaction; returns each ticket's failure (nil: committed).
    private func commit(_ batch: [Ticket]) -> [StoreError?] {
        guard !batch.isEmpty else { return [] }
        let failure: StoreError? = connectionLock.withLock {
            do {
                try connection.execute("BEGIN IMMEDIATE")
                for t in batch {
                    for op in t.ops { try op(connection) }
                }
                try connection.execute("COMMIT")
                return nil
            } catch {
                try? connection.execute("ROLLBACK")
                return error as? StoreError ?? StoreError(code: 0, message: "\(error)", sql: nil)
            }
        }
        guard let failure else { return batch.map { _ in nil } }
        // One bad ticket must not fail its neighbours: retry each on its own.
        if batch.count > 1 { return batch.flatMap { commit([$0]) } }
        return [failure]
    }

    /// Commits what is queued, refuses later writes, and writes the WAL back into the main file,
    /// so the file alone is complete.
    public func close() {
        let last = submit([])
        try? wait(for: last)
        queue.withLock { closed = true }
        _ = try? read { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }
}
