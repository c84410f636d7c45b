import FCMStore
import Foundation
import Synchronization
import XCTest

/// The store's health observer keeps working however many commits came before: a closure kept in
/// a lock's value used to gain two reabstraction thunks per commit, and calling it after some
/// 65,000 commits overflowed the stack (the process died when the disk filled up).
final class HealthObserverTests: XCTestCase {
    final class Told: Sendable { let list = Mutex<[String]>([]) }

    func testTheObserverIsToldAfterManyCommits() throws {
        let dir = NSTemporaryDirectory() + "fcm-health-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try Store(path: dir + "/h.sqlite", maxPageCount: 64)
        defer { s.close() }
        let told = Told()
        s.observeHealth { e in told.list.withLock { $0.append(e.map { "failing: \($0.reason)" } ?? "ok") } }
        try s.write([{ c in try c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)") }])
        for i in 0..<70_000 { try s.write([{ c in try c.run("INSERT OR REPLACE INTO t(id, v) VALUES (1, ?)", [.text(String(i))]) }]) }
        // Then the store fills up (64 pages at most): the observer hears it once.
        let big = String(repeating: "x", count: 100_000)
        var full = false
        for id in 2..<10 where !full {
            do { try s.write([{ c in try c.run("INSERT INTO t(id, v) VALUES (?, ?)", [.int(Int64(id)), .text(big)]) }]) } catch { full = true }
        }
        XCTAssertTrue(full, "64 pages never filled up")
        XCTAssertThrowsError(try s.write([{ c in try c.run("INSERT INTO t(id, v) VALUES (10, ?)", [.text(big)]) }]))
        // Space comes back: told once more.
        try s.write([{ c in try c.run("DELETE FROM t WHERE id > 1") }])
        XCTAssertEqual(told.list.withLock { $0 }, ["failing: database or disk is full", "ok"])
    }
}
