import Dispatch
import Glibc
import Platform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A unit of work for the group committer: runs inside the shared write transaction.
public typealias WriteOp = @Sendable (SQLiteConnection) throws -> Void

/// The only owner of the SQLite connection: serialized reads, and writes by group commit.
///
/// A request's writes are answered only after they are committed. Committing each request on its
/// own would cap throughput at the commit rate, so every batch queued while the previous
/// transaction ran is committed together, then each ticket is completed: its completion runs (the
/// HTTP layer answers the request from there) or the thread waiting for it wakes. One batch is
/// committed at a time (`committing`), by whichever thread comes first: a caller that asks to
/// (`commitQueued`, and every `wait`), which then answers its own request and those queued
/// with it without handing them to another thread and back (a sequential client's send cost two
/// thread switches), or the writer thread, which takes what callers leave queued.
///
/// A write that fails stops the batch there: the tickets before it stay committed, it and every
/// ticket after it in the batch fail with its error (they were submitted after it, so their
/// owner decided them on a state that included the failed change). The failure handler
/// (`onWriteFailure`) then runs on the committing thread before anything else is committed, and may
/// fail every ticket still queued, so the owner can bring its memory back to what the store
/// holds (see the engine's `recover(after:)`).
///
/// WAL checkpoints, whose disk flush stalled every request for milliseconds (a fifth of the
/// throughput), run on their own thread and connection (PASSIVE, never blocking the writer).
/// Under continuous writes such a checkpointer can never copy back the frames appended while it
/// runs, so the log would never restart; the writer's own automatic checkpoint stays as a
/// backstop at 64 MiB of log, and then finds most frames already copied.
///
/// `@unchecked Sendable` is safe because each mutable part is reached under one lock:
/// `connection` only inside `connectionLock`, `pending`/`stopping`/`committer` only inside
/// `queue`; a ticket's outcome is written by its committer before it signals or completes it.
public final class Store: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let connectionLock = ConditionLock()
    /// Commits waiting for `connectionLock` (`readAfterCommits`).
    private let commitsWaiting = Atomic<Int>(0)
    private let queue = ConditionLock()
    private var pending: [Ticket] = []
    private var stopping = false
    /// The thread committing a batch now (the writer or a caller of `commitQueued`), if any.
    private var committer: pthread_t?
    private var committing: Bool { committer != nil }
    private let writerDone = DispatchSemaphore(value: 0)
    private let checkpointer: Checkpointer?
    /// The running count of message records and the tables resets set aside (`Store+Prune.swift`).
    let history = StoreHistory()
    /// The schema version this build migrates a store to.
    public static var schemaVersion: Int { Migrations.steps.count }
    /// The path it was opened with (`:memory:` for a throwaway store).
    public let path: String
    /// The journal mode SQLite reports (`wal` for files, `memory` for `:memory:`).
    public let journalMode: String
    /// Whether the writer hands each commit's log frames to the kernel in one write (a file store,
    /// through `BufferedLogVFS`).
    public var bufferedLog: Bool { connection.hasBufferedLog }
    /// Why writes fail (nil: the last commit with writes succeeded), and who is told when that
    /// changes (see `observeHealth`).
    private let health = Mutex<(failure: StoreError?, observer: Handler<StoreError?, Void>?)>((nil, nil))
    /// Called after a write failed (see `onWriteFailure`).
    private let failureHandler = Mutex<FailureHandlerBox?>(nil)

    /// What runs on the committing thread after a ticket's writes failed, before anything else
    /// is committed: `error` is that ticket's failure; `failQueued` fails every ticket queued at
    /// the moment it is called, with the same error (their completions and waiters are told once
    /// the handler has returned, so the handler may call it while holding a lock they take).
    public typealias FailureHandler = @Sendable (_ error: StoreError, _ failQueued: () -> Void) -> Void
    /// Kept in a struct, as `Handler` keeps a closure (see there for why).
    private struct FailureHandlerBox: Sendable { let call: FailureHandler }

    /// A batch of writes submitted together.
    ///
    /// `@unchecked Sendable`: `ops` and `completion` are immutable; the rest is reached under
    /// `state`'s lock. A semaphore is made only for a caller that waits (most tickets complete
    /// through `completion`, and creating one per send showed in profiles).
    public final class Ticket: @unchecked Sendable {
        let ops: [WriteOp]
        let completion: (@Sendable (StoreError?) -> Void)?
        struct State {
            var finished = false
            var outcome: StoreError?
            var waiter: DispatchSemaphore?
        }
        let state = Mutex<State>(State())
        init(ops: [WriteOp], completion: (@Sendable (StoreError?) -> Void)?) {
            self.ops = ops
            self.completion = completion
        }
    }

    /// Opens the store at `path` (a file, created when missing, or `:memory:`), sets WAL, runs
    /// pending migrations and starts the writer.
    ///
    /// `maxPageCount` caps the file at that many pages (SQLite's `max_page_count`; never below what
    /// it already holds): a test aid that makes the store fill up like a full disk.
    public init(path: String, maxPageCount: Int? = nil) throws(StoreError) {
        let conn = try SQLiteConnection(path: path, bufferedLog: path != ":memory:")
        try conn.execute("PRAGMA busy_timeout=5000")
        // A new file gets 2 KiB pages (an existing one keeps its own): a send's commit rewrites
        // the last page of each table it appends to, so half-size pages halve what the log
        // takes per send (9.8 -> 5.7 KB one by one, 8.9 -> 4.6 KB under load). Pair-wise, 8
        // rounds: p99 under load 8.0-10.1 -> 6.3-8.8 ms, sequential p50 65 -> 60 µs; CPU per
        // send, multicasts and the file's size unchanged (1 KiB pages: 8% larger, multicasts
        // 5% dearer).
        if path != ":memory:" { try conn.execute("PRAGMA page_size=2048") }
        let mode = try conn.scalarText("PRAGMA journal_mode=WAL") ?? ""
        if path != ":memory:" && mode.lowercased() != "wal" {
            throw StoreError(code: 0, message: "could not switch the journal to WAL (got \(mode))", sql: nil)
        }
        // NORMAL in WAL mode: a commit survives a crash of the process (kill -9); only a power
        // loss can take the last transactions back, which a test mock need not survive. Through
        // the buffering VFS the connection runs at FULL, which there keeps what NORMAL keeps (see
        // `SQLiteConnection.init`). A 1 MiB page cache instead of 2: sends append (a few hot
        // pages), and the bench's RSS after 100,000 messages went 30.1 -> 29.0 MB with
        // multicasts and CPU per send unchanged.
        if !conn.hasBufferedLog { try conn.execute("PRAGMA synchronous=NORMAL") }
        try conn.execute("PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-1024")
        try Migrations.run(on: conn)
        let inMemory = path == ":memory:"
        if !inMemory { try conn.execute("PRAGMA wal_autocheckpoint=16384") }
        if let maxPageCount { try conn.execute("PRAGMA max_page_count=\(max(1, maxPageCount))") }
        self.path = path
        self.journalMode = mode.lowercased()
        self.connection = conn
        self.checkpointer = inMemory ? nil : try Checkpointer(path: path)
        spawnThread { [self] in runWriter() }
    }

    /// Runs `body` with a typed read view of the connection (rows in, no SQL), serialized with
    /// every other use: what `body` reads is one consistent state.
    public func read<T: Sendable>(_ body: (StoreReader) throws(StoreError) -> T) throws(StoreError) -> T {
        try connectionLock.withLock { () throws(StoreError) -> T in try body(StoreReader(connection)) }
    }

    /// `read`, for one of a series of reads (a search a slice at a time): commits waiting for the
    /// connection go first. The lock favours the thread that just let it go, so a reader taking
    /// it again at once would keep them out for the whole series. Waits at most
    /// `commitsFirstMillis` for them.
    public func readAfterCommits<T: Sendable>(_ body: (StoreReader) throws(StoreError) -> T) throws(StoreError) -> T {
        let until = monotonicNanos() + Self.commitsFirstMillis * 1_000_000
        while commitsWaiting.load(ordering: .acquiring) > 0 && monotonicNanos() < until { sched_yield() }
        return try read(body)
    }

    static let commitsFirstMillis: UInt64 = 5

    /// Frees the connection's cached pages, after a load that filled the cache with pages the
    /// send path does not need (a large fixture's device rows: 1 MB of a 10,000-device file's).
    public func releaseCachedPages() {
        connectionLock.withLock { connection.releaseCachedPages() }
    }

    /// Runs `body` with the connection itself (the store's own code and its tests).
    func readSQL<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connectionLock.withLock { () throws(StoreError) -> T in try body(connection) }
    }

    /// Queues `ops` for the next group commit and returns at once; `completion`, when given, runs
    /// once they are committed (or failed), on the thread that commits them: the writer, or a
    /// caller of `commitQueued` or `wait`. Ordering between submissions is the order of the calls,
    /// so callers that hold their own lock while submitting get their writes applied in the order
    /// they decided them.
    ///
    /// `wakeWriter: false` leaves the writer thread asleep: the caller promises to call
    /// `commitQueued()` once it holds no lock (it then commits on its own thread, unless a commit
    /// is running, whose committer hands what is queued on). A send answered that way costs no
    /// thread switch.
    @discardableResult
    public func submit(_ ops: [WriteOp], wakeWriter: Bool = true, completion: (@Sendable (StoreError?) -> Void)? = nil) -> Ticket {
        let t = Ticket(ops: ops, completion: completion)
        let accepted = queue.withLock { () -> Bool in
            guard !stopping else { return false }
            pending.append(t)
            // Not only for the first in the queue: an acknowledgement queued without waking the
            // writer may be ahead of this one.
            if wakeWriter && !committing { queue.broadcast() }
            return true
        }
        if !accepted { finish(t, StoreError(code: 0, message: "the store is closed", sql: nil)) }
        return t
    }

    /// Commits everything queued on the calling thread, unless a commit is running (its committer
    /// then passes the queue on to the writer). Call it holding no lock: completions run here.
    public func commitQueued() {
        let batch: [Ticket]? = queue.withLock {
            guard !committing, !pending.isEmpty else { return nil }
            committer = pthread_self()
            let b = pending
            pending.removeAll(keepingCapacity: true)
            return b
        }
        guard let batch else { return }
        process(batch)
        queue.withLock {
            committer = nil
            if !pending.isEmpty || stopping { queue.broadcast() }
        }
    }

    /// Whether the calling thread is committing a batch (in a ticket's completion, say): a wait
    /// for another ticket there would never end, since nothing else commits until it returns.
    public var isCommittingHere: Bool {
        queue.withLock { committer.map { pthread_equal($0, pthread_self()) != 0 } == true }
    }

    /// Blocks until `ticket` is committed; throws when the transaction that carried it failed.
    public func wait(for ticket: Ticket) throws(StoreError) {
        commitQueued()
        let sem: DispatchSemaphore? = ticket.state.withLock { s in
            if s.finished { return nil }
            let w = s.waiter ?? DispatchSemaphore(value: 0)
            s.waiter = w
            return w
        }
        if let sem {
            sem.wait()
            sem.signal()  // another waiter on the same ticket returns at once
        }
        if let e = ticket.state.withLock({ $0.outcome }) { throw e }
    }

    /// Submits and waits: the common case of one caller's writes.
    public func write(_ ops: [WriteOp]) throws(StoreError) {
        try wait(for: submit(ops))
    }

    private func finish(_ t: Ticket, _ outcome: StoreError?) {
        let waiter = t.state.withLock { s -> DispatchSemaphore? in
            s.finished = true
            s.outcome = outcome
            return s.waiter
        }
        waiter?.signal()
        t.completion?(outcome)
    }

    /// The writer thread: commits what callers leave queued (those that submit with
    /// `wakeWriter: false` commit on their own thread when no commit is running).
    private func runWriter() {
        while true {
            let batch: [Ticket]? = queue.withLock {
                while committing || (pending.isEmpty && !stopping) { queue.wait() }
                if pending.isEmpty { return nil }
                committer = pthread_self()
                let b = pending
                pending.removeAll(keepingCapacity: true)
                return b
            }
            guard let batch else {
                writerDone.signal()
                return
            }
            process(batch)
            queue.withLock { committer = nil }
        }
    }

    /// Commits `batch` and completes its tickets; runs with `committing` set, so one batch at a
    /// time, in submission order, whichever thread commits it.
    private func process(_ batch: [Ticket]) {
        let (results, stop) = commit(batch)
        noteHealth(batch, results)
        guard let stop, let handler = failureHandler.withLock({ $0 })?.call else {
            for (t, r) in zip(batch, results) { finish(t, r) }
            checkpointer?.nudge()
            return
        }
        for (t, r) in zip(batch, results) where r == nil { finish(t, nil) }
        var dropped: [Ticket] = []
        handler(stop) {
            queue.withLock {
                dropped += pending
                pending.removeAll(keepingCapacity: true)
            }
        }
        for (t, r) in zip(batch, results) where r != nil { finish(t, r) }
        for t in dropped { finish(t, stop) }
        checkpointer?.nudge()
    }

    /// Calls `handler` after every failed write (see `FailureHandler`); without one, a failure
    /// fails only the rest of its batch.
    public func onWriteFailure(_ handler: @escaping FailureHandler) {
        failureHandler.withLock { $0 = FailureHandlerBox(call: handler) }
    }

    /// Commits `batch` in one transaction. When that fails, commits each ticket on its own, in
    /// order, up to the first that fails: that one and every later one get its error (they were
    /// decided after it). Returns each ticket's failure (nil: committed) and the failure that
    /// stopped the batch, if one did. A ticket without writes (`drain`) never stops a batch.
    private func commit(_ batch: [Ticket]) -> (results: [StoreError?], stop: StoreError?) {
        guard let failure = transact(batch) else { return (batch.map { _ in nil }, nil) }
        if batch.count == 1 { return ([failure], batch[0].ops.isEmpty ? nil : failure) }
        var results: [StoreError?] = []
        results.reserveCapacity(batch.count)
        var stop: StoreError?
        for t in batch {
            if let stop {
                results.append(stop)
                continue
            }
            let r = transact([t])
            results.append(r)
            if let r, !t.ops.isEmpty { stop = r }
        }
        return (results, stop)
    }

    /// Runs the tickets' writes in one transaction; returns why it failed (rolled back), or nil.
    private func transact(_ tickets: [Ticket]) -> StoreError? {
        commitsWaiting.add(1, ordering: .releasing)
        return connectionLock.withLock {
            commitsWaiting.subtract(1, ordering: .releasing)
            do {
                // Prepared once and held (`execute` would parse them again for every batch).
                try connection.run(.begin)
                for t in tickets {
                    for op in t.ops { try op(connection) }
                }
                try connection.run(.commit)
                return nil
            } catch {
                try? connection.execute("ROLLBACK")
                return error as? StoreError ?? StoreError(code: 0, message: "\(error)", sql: nil)
            }
        }
    }

    /// Why the store cannot write now (nil: the last commit that wrote succeeded).
    public var failure: StoreError? { health.withLock { $0.failure } }

    /// Calls `observer` on the committing thread each time writes start failing (with the reason) and
    /// when a commit succeeds again (nil): once per change, not once per failed commit.
    public func observeHealth(_ observer: @escaping @Sendable (StoreError?) -> Void) {
        health.withLock { $0.observer = Handler(observer) }
    }

    /// Updates `failure` from a batch's outcomes: a failure of the storage (disk full, I/O error,
    /// read-only or damaged file) starts a failing spell; a committed write ends it. A ticket
    /// refused for its own reasons (a constraint) and empty tickets (`drain`) say nothing. A
    /// batch stops at its first failure, so a storage failure in it is the last write tried: it
    /// wins over the commits before it.
    private func noteHealth(_ batch: [Ticket], _ results: [StoreError?]) {
        var failed: StoreError?
        var wrote = false
        for (t, r) in zip(batch, results) where !t.ops.isEmpty {
            if let r {
                if failed == nil && Self.isStorageFailure(r) { failed = r }
            } else {
                wrote = true
            }
        }
        guard failed != nil || wrote else { return }
        let now: StoreError? = failed
        let tell = health.withLock { h -> (@Sendable (StoreError?) -> Void)? in
            let changed = (h.failure == nil) != (now == nil)
            h.failure = now
            return changed ? h.observer?.call : nil
        }
        tell?(now)
    }

    /// Whether `e` says the storage cannot take writes (as opposed to one bad statement).
    static func isStorageFailure(_ e: StoreError) -> Bool {
        switch e.code & 0xff {
        case 7, 8, 10, 11, 13, 14, 26: return true  // NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB
        default: return false
        }
    }

    /// Returns once everything queued before the call is committed (its completions have run).
    public func drain() {
        try? wait(for: submit([]))
    }

    /// Commits what is queued, stops the writer, refuses later writes, and writes the WAL back
    /// into the main file, so the file alone is complete.
    public func close() {
        let already = queue.withLock { () -> Bool in
            defer { stopping = true }
            return stopping
        }
        guard !already else { return }
        queue.broadcast()
        writerDone.wait()
        checkpointer?.stop()
        _ = try? readSQL { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }
}

/// Runs PASSIVE WAL checkpoints on its own connection and thread, so the disk flush they need is
/// not on the writer's path.
///
/// `@unchecked Sendable`: `connection` is used only by the task's thread (and `stop()` waits for
/// that thread to end); `dirty` is atomic (set on every commit, so no lock); `task` is set once, in
/// `init`.
final class Checkpointer: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let dirty = Atomic<Bool>(false)
    private var task: PeriodicTask?

    init(path: String) throws(StoreError) {
        connection = try SQLiteConnection(path: path)
        try connection.execute("PRAGMA busy_timeout=5000; PRAGMA synchronous=NORMAL")
        // Every 50 ms at most: the log stays small, and each pass has enough to copy that its
        // flush is worth it.
        task = PeriodicTask(everyMillis: 50) { [self] in  // a cycle until stop(), as the thread held it before
            if dirty.exchange(false, ordering: .acquiringAndReleasing) {
                try? connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
            }
        }
    }

    /// Something was committed: checkpoint soon.
    func nudge() {
        dirty.store(true, ordering: .releasing)
    }

    func stop() {
        task?.stop()
    }
}


extension StoreError {
    /// SQLite's own words for the failure (`database or disk is full`), without the SQL.
    public var reason: String { message.isEmpty ? "SQLite error \(code)" : message }
}
