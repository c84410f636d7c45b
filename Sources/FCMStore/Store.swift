import FCMCore
import Synchronization

/// A unit of work for the group committer: runs inside the shared write transaction.
public typealias WriteOp = @Sendable (SQLiteConnection) throws -> Void

/// The only owner of the SQLite connection: serialized reads, and writes by group commit.
///
/// A request's writes are answered only after they are committed. Committing each request on its
/// own would cap throughput at the commit rate, so concurrent requests' writes share one
/// transaction: the first waiter to find no commit running becomes the leader, takes every
/// queued batch, commits them together and wakes the rest (the classic leader/follower scheme;
/// no dedicated thread, so an idle store costs nothing).
public final class Store: Sendable {
    private let connection: Mutex<SQLiteConnection>
    private let queue = ConditionLock()
    private let state = Mutex<QueueState>(QueueState())
    /// The path it was opened with (`:memory:` for a throwaway store).
    public let path: String
    /// The journal mode SQLite reports (`wal` for files, `memory` for `:memory:`).
    public let journalMode: String

    /// A batch of writes submitted together; `wait(for:)` blocks until it is committed.
    public final class Ticket: Sendable {
        let ops: [WriteOp]
        let outcome = Mutex<Outcome>(.pending)
        enum Outcome { case pending, committed, failed(StoreError) }
        init(ops: [WriteOp]) { self.ops = ops }
    }

    private struct QueueState: ~Copyable {
        var pending: [Ticket] = []
        var leaderActive = false
    }

    /// Opens the store at `path` (a file, created with its folder's existence assumed, or
    /// `:memory:`), sets WAL and runs pending migrations.
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
        self.connection = Mutex(conn)
    }

    /// Runs `body` with the connection, serialized with every other use.
    public func read<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connection.withLock { (conn: inout SQLiteConnection) throws(StoreError) -> T in try body(conn) }
    }

    /// Queues `ops` for the next group commit and returns at once; ordering between submissions
    /// is the order of the calls, so callers that hold their own lock while submitting get their
    /// writes applied in the order they decided them.
    public func submit(_ ops: [WriteOp]) -> Ticket {
        let t = Ticket(ops: ops)
        queue.withLock { state.withLock { $0.pending.append(t) } }
        return t
    }

    /// Blocks until `ticket` is committed (leading the commit if nobody is); throws when the
    /// transaction that carried it failed.
    public func wait(for ticket: Ticket) throws(StoreError) {
        while true {
            let batch: [Ticket]? = queue.withLock {
                while true {
                    switch ticket.outcome.withLock({ $0 }) {
                    case .committed, .failed: return nil
                    case .pending: break
                    }
                    let lead = state.withLock { s -> [Ticket]? in
                        guard !s.leaderActive else { return nil }
                        s.leaderActive = true
                        let b = s.pending
                        s.pending.removeAll(keepingCapacity: true)
                        return b
                    }
                    if let lead { return lead }
                    queue.wait()
                }
            }
            guard let batch else { break }
            commit(batch)
            queue.withLock { state.withLock { $0.leaderActive = false } }
            queue.broadcast()
        }
        if case .failed(let e) = ticket.outcome.withLock({ $0 }) { throw e }
    }

    /// Submits and waits: the common case of one request's writes.
    public func write(_ ops: [WriteOp]) throws(StoreError) {
        try wait(for: submit(ops))
    }

    private func commit(_ batch: [Ticket]) {
        guard !batch.isEmpty else { return }
        let result: StoreError? = connection.withLock { (conn: inout SQLiteConnection) -> StoreError? in
            do {
                try conn.execute("BEGIN IMMEDIATE")
                for t in batch {
                    for op in t.ops { try op(conn) }
                }
                try conn.execute("COMMIT")
                return nil
            } catch {
                try? conn.execute("ROLLBACK")
                return error as? StoreError ?? StoreError(code: 0, message: "\(error)", sql: nil)
            }
        }
        if result != nil, batch.count > 1 {
            // One bad batch must not fail its neighbours: retry each on its own.
            for t in batch { commit([t]) }
            return
        }
        for t in batch {
            t.outcome.withLock { $0 = result.map { .failed($0) } ?? .committed }
        }
    }

    /// Writes the WAL back into the main file (at shutdown, so the file alone is complete).
    public func checkpoint() {
        _ = try? read { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }
}
