@testable import FCMStore
import Foundation
import Synchronization
import XCTest

/// The failure handler: what runs after a failed write, before anything else is committed.
final class StoreFailureHandlerTests: XCTestCase {
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-store-failure-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func insert(_ n: Int64) -> WriteOp {
        { c in try c.run("INSERT INTO t(n) VALUES (?)", [.int(n)]) }
    }

    private func count(_ s: Store) throws -> Int64? {
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }
    }

    /// What the handler saw, in order.
    struct Seen: Sendable {
        var errors: [String] = []
        var rowsDuringHandler: [Int64?] = []
        var badToldBeforeHandlerReturned = false
        var lateOutcome: String?
    }

    /// A completion runs on the committing thread, which `isCommittingHere` tells (a wait there
    /// would never end); other threads, and that thread after the commit, are told no.
    func testIsCommittingHereIsTrueOnlyOnTheCommittingThread() throws {
        let s = try Store(path: dir + "/c.sqlite")
        try s.write([{ c in try c.execute("CREATE TABLE t(n INTEGER PRIMARY KEY)") }])
        let seen = Mutex<(inside: Bool?, elsewhere: Bool?)>((nil, nil))
        let t = s.submit([insert(1)], wakeWriter: false) { _ in
            let other = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                seen.withLock { $0.elsewhere = s.isCommittingHere }
                other.signal()
            }
            other.wait()
            seen.withLock { $0.inside = s.isCommittingHere }
        }
        try s.wait(for: t)
        XCTAssertEqual(seen.withLock { $0.inside }, true)
        XCTAssertEqual(seen.withLock { $0.elsewhere }, false)
        XCTAssertFalse(s.isCommittingHere)
        s.close()
    }

    func testHandlerRunsBeforeTheFailedAreToldAndFailsWhatIsQueued() throws {
        let s = try Store(path: dir + "/t.sqlite")
        try s.write([{ c in try c.execute("CREATE TABLE t(n INTEGER PRIMARY KEY)") }])
        let seen = Mutex(Seen())
        let badTold = Atomic<Bool>(false)
        let late = Mutex<Store.Ticket?>(nil)
        let after = Mutex<Store.Ticket?>(nil)
        s.onWriteFailure { error, failQueued in
            // The writer holds no lock here: the store can be read.
            let rows = try? s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM t") }
            // A ticket another thread queued since the failure (decided on the failed state)…
            let l = s.submit([{ c in try c.run("INSERT INTO t(n) VALUES (100)") }]) { e in
                seen.withLock { $0.lateOutcome = e?.message ?? "committed" }
            }
            late.withLock { $0 = l }
            failQueued()
            // …fails; one queued after `failQueued` is decided on the recovered state: it commits.
            after.withLock { $0 = s.submit([{ c in try c.run("INSERT INTO t(n) VALUES (200)") }]) }
            seen.withLock {
                $0.errors.append(error.message)
                $0.rowsDuringHandler.append(rows)
                $0.badToldBeforeHandlerReturned = badTold.load(ordering: .acquiring)
            }
        }
        let (started, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let blocker = s.submit([{ _ in started.signal(); gate.wait() }])
        started.wait()
        let good = s.submit([insert(1)])
        let bad = s.submit([insert(1)]) { _ in badTold.store(true, ordering: .releasing) }  // the same key: a constraint
        let next = s.submit([insert(2)])
        gate.signal()
        XCTAssertNoThrow(try s.wait(for: blocker))
        XCTAssertNoThrow(try s.wait(for: good))
        XCTAssertThrowsError(try s.wait(for: bad))
        XCTAssertThrowsError(try s.wait(for: next))
        let lateTicket = try XCTUnwrap(late.withLock { $0 })
        let afterTicket = try XCTUnwrap(after.withLock { $0 })
        XCTAssertThrowsError(try s.wait(for: lateTicket)) { e in
            XCTAssertEqual((e as? StoreError)?.code, 19 | (6 << 8), "the same error: SQLITE_CONSTRAINT_PRIMARYKEY")
        }
        XCTAssertNoThrow(try s.wait(for: afterTicket))

        let v = seen.withLock { $0 }
        XCTAssertEqual(v.errors.count, 1, "one call for the failed ticket")
        XCTAssertTrue(v.errors.first?.contains("UNIQUE constraint failed") == true, "\(v.errors)")
        XCTAssertEqual(v.rowsDuringHandler, [1], "the ticket before the failed one was committed, nothing after it")
        XCTAssertFalse(v.badToldBeforeHandlerReturned, "the failed ticket is answered after the handler")
        XCTAssertTrue(v.lateOutcome?.contains("UNIQUE constraint failed") == true, "\(v.lateOutcome ?? "nil")")
        XCTAssertEqual(try count(s), 2, "1 and 200")
        // A failure that is not the storage's says nothing about health.
        XCTAssertNil(s.failure)
        s.close()
    }

    func testAFullStoreCallsTheHandlerAndIsFailingUntilAWriteSucceeds() throws {
        let s = try Store(path: dir + "/t.sqlite")
        try s.write([{ c in try c.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, filler TEXT)") }])
        let pages = try XCTUnwrap(try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("PRAGMA page_count") })
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA max_page_count=\(pages + 4)") }
        let calls = Atomic<Int>(0)
        s.onWriteFailure { _, failQueued in
            calls.add(1, ordering: .relaxed)
            failQueued()
        }
        let filler = String(repeating: "x", count: 3000)
        var failed: StoreError?
        for i in 0..<50 {
            do {
                try s.write([{ c in try c.run("INSERT INTO t(n, filler) VALUES (?, ?)", [.int(Int64(i)), .text(filler)]) }])
            } catch {
                failed = error
                break
            }
        }
        XCTAssertEqual(failed?.code, 13, "SQLITE_FULL")
        XCTAssertEqual(calls.load(ordering: .relaxed), 1)
        XCTAssertEqual(s.failure?.code, 13)
        // Space comes back: the next write commits and ends the spell.
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA max_page_count=100000") }
        XCTAssertNoThrow(try s.write([{ c in try c.run("INSERT INTO t(n, filler) VALUES (1000, ?)", [.text(filler)]) }]))
        XCTAssertNil(s.failure)
        XCTAssertEqual(calls.load(ordering: .relaxed), 1)
        s.close()
    }
}
