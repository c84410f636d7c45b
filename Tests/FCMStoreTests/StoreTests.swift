@testable import FCMStore
import Foundation
import XCTest

/// The group committer under concurrency, migrations, and failure isolation.
final class StoreTests: XCTestCase {
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-store-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func makeStore() throws -> Store {
        let s = try Store(path: dir + "/t.sqlite")
        try s.write([{ c in try c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, thread INTEGER, seq INTEGER)") }])
        return s
    }

    func testWALAndSchemaVersion() throws {
        let s = try makeStore()
        XCTAssertEqual(s.journalMode, "wal")
        XCTAssertEqual(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("PRAGMA user_version") }, Int64(Store.schemaVersion), "every migration ran")
        s.close()
        // Reopening runs no migration twice.
        let again = try Store(path: dir + "/t.sqlite")
        XCTAssertEqual(try again.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }, 0)
        again.close()
    }

    /// A store from before one table kept what sends may not register again keeps its deleted
    /// groups' keys through the migration that moves them into `retired_tokens`.
    func testRetiredGroupKeysMoveIntoRetiredTokens() throws {
        let path = dir + "/old.sqlite"
        do {
            let c = try SQLiteConnection(path: path)
            for step in Migrations.steps.dropLast() { try c.execute(step) }
            try c.execute("PRAGMA user_version=\(Migrations.steps.count - 1)")
            try c.run("INSERT INTO retired_groups(key) VALUES (?)", [.text("APA91b-a-deleted-group")])
        }
        let s = try Store(path: path)
        var kept: [String] = []
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) in
            try c.query("SELECT token FROM retired_tokens") { (r: Statement) throws(StoreError) in kept.append(r.text(0) ?? "") }
        }
        XCTAssertEqual(kept, ["APA91b-a-deleted-group"])
        XCTAssertEqual(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in
            try c.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'retired_groups'")
        }, 0)
        s.close()
    }

    func testConcurrentWritersAllCommitInSubmissionOrderPerThread() throws {
        let s = try makeStore()
        let threads = 16, perThread = 300
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread {
                for i in 0..<perThread {
                    let thread = Int64(t), seq = Int64(i)
                    try? s.write([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (?, ?)", [.int(thread), .int(seq)]) }])
                }
                done.leave()
            }.start()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let rows: [[Int64]] = try s.readSQL { (c: SQLiteConnection) throws(StoreError) -> [[Int64]] in
            var out: [[Int64]] = Array(repeating: [], count: threads)
            try c.query("SELECT thread, seq FROM t ORDER BY id") { (r: Statement) throws(StoreError) in out[Int(r.int(0))].append(r.int(1)) }
            return out
        }
        for t in 0..<threads {
            XCTAssertEqual(rows[t], (0..<perThread).map(Int64.init), "thread \(t): every write committed, in order")
        }
        s.close()
    }

    func testAFailingTicketFailsTheOnesAfterItInItsBatchOnly() throws {
        let s = try makeStore()
        // Hold the writer in a transaction, so the next three tickets make one batch.
        let (started, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let blocker = s.submit([{ _ in started.signal(); gate.wait() }])
        started.wait()
        let good1 = s.submit([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (1, 1)") }])
        let bad = s.submit([{ c in try c.run("INSERT INTO nowhere VALUES (1)") }])
        let good2 = s.submit([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (2, 2)") }])
        gate.signal()
        XCTAssertNoThrow(try s.wait(for: blocker))
        // The one before it commits; the one after it was decided after it, so it fails too.
        XCTAssertNoThrow(try s.wait(for: good1))
        XCTAssertThrowsError(try s.wait(for: bad))
        XCTAssertThrowsError(try s.wait(for: good2)) { e in
            XCTAssertEqual((e as? StoreError)?.message.contains("no such table: nowhere"), true, "\(e)")
        }
        XCTAssertEqual(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }, 1)
        // Later tickets are another matter: they commit.
        XCTAssertNoThrow(try s.write([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (3, 3)") }]))
        XCTAssertEqual(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }, 2)
        s.close()
    }

    func testCloseCommitsWhatIsQueuedAndRefusesLaterWrites() throws {
        let s = try makeStore()
        let queued = s.submit([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (9, 9)") }])
        s.close()
        XCTAssertNoThrow(try s.wait(for: queued))
        XCTAssertThrowsError(try s.write([{ c in try c.run("INSERT INTO t(thread, seq) VALUES (1, 1)") }]))
        let reopened = try Store(path: dir + "/t.sqlite")
        XCTAssertEqual(try reopened.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }, 1)
        // The checkpoint at close left the log empty.
        let wal = (try? FileManager.default.attributesOfItem(atPath: dir + "/t.sqlite-wal")[.size] as? Int) ?? 0
        XCTAssertEqual(wal, 0)
        reopened.close()
    }

    func testStatementsAreCachedAndRebindable() throws {
        let s = try makeStore()
        try s.write([{ c in
            for i in 0..<100 { try c.run("INSERT INTO t(thread, seq) VALUES (?, ?)", [.int(0), .int(Int64(i))]) }
        }])
        XCTAssertEqual(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT sum(seq) FROM t") }, 4950)
        let text = try s.readSQL { (c: SQLiteConnection) throws(StoreError) -> String? in
            try c.run("CREATE TABLE u(v TEXT)")
            try c.run("INSERT INTO u VALUES (?)", [.text("ünïcode ✓ with \u{0} inside")])
            try c.run("INSERT INTO u VALUES (?)", [.text("")])
            return try c.scalarText("SELECT v FROM u WHERE rowid = 1")
        }
        XCTAssertEqual(text, "ünïcode ✓ with \u{0} inside", "text binds by length, so NUL and UTF-8 survive")
        s.close()
    }

    func testUnusablePathIsAnError() {
        XCTAssertThrowsError(try Store(path: "/nonexistent-dir/x/y.sqlite"))
    }
}
