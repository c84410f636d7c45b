@testable import FCMStore
import Foundation
import XCTest

/// Bounded history at the store's level (Store+Prune.swift): the running count, deleting runs of
/// records, a reset that sets large tables aside, and emptying them, across a reopen too.
final class PruneTests: XCTestCase {
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-prune-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A record with `recipients` deliveries (ids `id ..< id + recipients`), to device 1 or to no
    /// device, pending or delivered, with `filler` bytes of data.
    private func send(_ s: Store, id: Int64, recipients: Int = 1, pending: Bool = false, device: Int64? = 1,
                      acceptedAt: Int64 = 1_000, filler: Int = 10) throws {
        let m = MessageRow(id: id, suffix: 7, multicastID: nil, senderID: "1", transport: "http", format: "json", acceptedAt: acceptedAt,
                           targetKind: "token", targetValue: nil, collapseKey: nil, timeToLive: 60, restrictedPackageName: nil, flags: 0,
                           data: #"{"f":""# + String(repeating: "x", count: filler) + #""}"#, notification: nil, priority: "normal",
                           status: "accepted", error: nil, errorDetail: nil, httpStatus: 200, raw: nil, recipients: recipients)
        let d = (0..<Int64(recipients)).map {
            DeliveryRow(id: id + $0, message: id, device: device, token: device == nil ? "t" : nil, status: pending ? "pending" : "delivered",
                        error: nil, canonical: nil, deliveredAt: pending ? nil : acceptedAt, expiresAt: acceptedAt + 60_000)
        }
        try s.write([Writes.send(newDevices: [], message: m, deliveries: d, notices: [], statusChanges: [])])
    }

    private func count(_ s: Store, _ table: String) throws -> Int64 {
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar("SELECT count(*) FROM \(table)") ?? -1 }
    }

    private func leftovers(_ s: Store) throws -> [String] {
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) -> [String] in
            var names: [String] = []
            try c.query("SELECT name FROM sqlite_schema WHERE name GLOB 'gone_*' ORDER BY name") { (r: Statement) throws(StoreError) in
                names.append(r.text(0) ?? "")
            }
            return names
        }
    }

    private func schema(_ s: Store) throws -> [String] {
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) -> [String] in
            var sql: [String] = []
            try c.query("""
                SELECT sql FROM sqlite_schema WHERE tbl_name IN ('messages', 'deliveries') AND sql IS NOT NULL ORDER BY name
                """) { (r: Statement) throws(StoreError) in sql.append(r.text(0) ?? "") }
            return sql
        }
    }

    /// Each index's table (name → table), for the indexes the schema's SQL made.
    private func indexTables(_ s: Store) throws -> [String: String] {
        try s.readSQL { (c: SQLiteConnection) throws(StoreError) -> [String: String] in
            var out: [String: String] = [:]
            try c.query("SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL") { (r: Statement) throws(StoreError) in
                out[r.text(0) ?? ""] = r.text(1) ?? ""
            }
            return out
        }
    }

    func testCountFollowsInsertsDeletionsAndResets() throws {
        let s = try Store(path: dir + "/s.sqlite")
        defer { s.close() }
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 0)
        for i in 0..<5 { try send(s, id: 1_000 + Int64(i) * 10, recipients: 2) }
        XCTAssertEqual(s.messageCount, 0, "counted at the next refresh, not per insert")
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 5)
        try send(s, id: 2_000)
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 6, "only the rows above the watermark are counted again")
        try s.deleteHistory([1_000..<1_020])
        XCTAssertEqual(s.messageCount, 4)
        XCTAssertEqual(try count(s, "deliveries"), 2 * 3 + 1)
        try s.write([s.resetHistory()])
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 0)
        XCTAssertEqual(try count(s, "messages"), 0)
    }

    /// The oldest records as the pruner sees them: spans, held ones marked (pending for a device;
    /// a deleted device's pending row is no hold), a batch cut at its deliveries' budget; and a
    /// run deletes the deliveries left between records too.
    func testOldestMessagesAndRuns() throws {
        let s = try Store(path: ":memory:")
        defer { s.close() }
        try send(s, id: 100, recipients: 3)
        try send(s, id: 200, pending: true)
        try send(s, id: 300, pending: true, device: nil)
        try send(s, id: 400, recipients: 0)
        try send(s, id: 500, recipients: 5)
        // A delivery no record owns (a prune cut short by a crash would leave such rows).
        try s.write([{ c in
            try c.run("INSERT INTO deliveries(id, message, device, status, expires_at) VALUES (450, 449, 1, 'delivered', 0)")
        }])
        try s.refreshHistory()
        XCTAssertEqual(try s.oldestMessages(from: 0, limit: 10, maxRows: 100), [
            MessageSpan(id: 100, end: 103, acceptedAt: 1_000, held: false),
            MessageSpan(id: 200, end: 201, acceptedAt: 1_000, held: true),
            MessageSpan(id: 300, end: 301, acceptedAt: 1_000, held: false),
            MessageSpan(id: 400, end: 401, acceptedAt: 1_000, held: false),
            MessageSpan(id: 500, end: 505, acceptedAt: 1_000, held: false),
        ])
        XCTAssertEqual(try s.oldestMessages(from: 0, limit: 10, maxRows: 5).map(\.id), [100, 200, 300, 400], "five deliveries at most")
        XCTAssertEqual(try s.oldestMessages(from: 500, limit: 10, maxRows: 1).map(\.id), [500], "one record at least")
        XCTAssertEqual(try s.oldestMessages(from: 201, limit: 2, maxRows: 100).map(\.id), [300, 400])
        let held = try s.oldestMessages(from: 200, limit: 1, maxRows: 100)
        XCTAssertEqual(try s.stillHeld(held + [MessageSpan(id: 999, end: 1_000, acceptedAt: 0, held: true)]), [true, nil])

        let gone = try s.deleteHistory([0..<200, 201..<505])
        XCTAssertEqual(gone.map(\.id), [100, 101, 102, 450, 500, 501, 502, 503, 504])
        XCTAssertEqual(Set(gone.map(\.device)), [1])
        XCTAssertEqual(try count(s, "messages"), 1)
        XCTAssertEqual(try count(s, "deliveries"), 1, "only the held record's delivery is left")
        XCTAssertEqual(s.messageCount, 1)
        XCTAssertEqual(try s.oldestMessages(from: 0, limit: 10, maxRows: 100).map(\.id), [200])
    }

    /// A store past the in-place threshold: reset renames the history aside and makes it again
    /// from the schema's own SQL (a small partial index at once; a whole-table one, and a partial
    /// one over many rows, once the table set aside is gone); the tables set aside are emptied in
    /// batches and dropped, after a reopen too; what was written after the reset stays.
    func testLargeResetSetsTheHistoryAsideAndEmptiesItInBatches() throws {
        let path = dir + "/big.sqlite"
        var s = try Store(path: path)
        try s.write([{ c in
            try c.execute("""
                CREATE INDEX deliveries_by_device ON deliveries(device, id);
                CREATE INDEX deliveries_with_device ON deliveries(device) WHERE device IS NOT NULL;
                """)
        }])
        let before = try schema(s)
        XCTAssertEqual(try indexTables(s)["deliveries_pending"], "deliveries")
        // About 12 MB: 1,500 records of 8 KB, and 12,000 more deliveries to a device.
        for i in 0..<1_500 { try send(s, id: 10_000 + Int64(i) * 10, recipients: 2, filler: 8_000) }
        try s.write([{ c in
            try c.execute("""
                WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 11999)
                INSERT INTO deliveries(id, message, device, status, expires_at) SELECT 100000 + x, 100000 + x, 1, 'delivered', 0 FROM n
                """)
        }])
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 1_500)

        try s.write([s.resetHistory()])
        XCTAssertEqual(try leftovers(s), ["gone_1_deliveries", "gone_1_messages"])
        XCTAssertEqual(try count(s, "gone_1_messages"), 1_500)
        XCTAssertEqual(try count(s, "gone_1_deliveries"), 15_000)
        XCTAssertEqual(try count(s, "messages"), 0)
        XCTAssertEqual(try count(s, "deliveries"), 0)
        XCTAssertEqual(try schema(s).filter { $0.hasPrefix("CREATE TABLE") }, before.filter { $0.hasPrefix("CREATE TABLE") },
                       "the same tables, by name")
        let placed = try indexTables(s)
        XCTAssertEqual(placed["deliveries_pending"], "deliveries", "a small partial index is made again at once")
        XCTAssertEqual(placed["deliveries_by_device"], "gone_1_deliveries", "a whole-table index stays with its table")
        XCTAssertEqual(placed["deliveries_with_device"], "gone_1_deliveries", "so does a partial one over many rows")
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 0)

        // A record after the reset, held: the index made again answers for it.
        try send(s, id: 900_000, pending: true)
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 1)
        XCTAssertEqual(try s.oldestMessages(from: 0, limit: 10, maxRows: 10).map(\.held), [true])

        // Two batches, then a close: the rest waits for the next start.
        XCTAssertTrue(try s.emptyLeftovers(rows: 7_000))
        XCTAssertTrue(try s.emptyLeftovers(rows: 7_000))
        XCTAssertEqual(try count(s, "gone_1_deliveries"), 1_000)
        s.close()
        s = try Store(path: path)
        defer { s.close() }
        var batches = 0
        while try s.emptyLeftovers(rows: 1_000) { batches += 1 }
        XCTAssertEqual(batches, 1 + 1 + 2 + 1, "the last 1,000 deliveries, the drop, 1,500 records in two, the drop")
        XCTAssertEqual(try leftovers(s), [])
        XCTAssertEqual(try schema(s), before, "the whole-table index is back on the live table, as it was")
        try s.refreshHistory()
        XCTAssertEqual(s.messageCount, 1, "what came after the reset is still there")
        XCTAssertEqual(try count(s, "deliveries"), 1)
    }

    /// A small store deletes in place: nothing is set aside.
    func testSmallResetDeletesInPlace() throws {
        let s = try Store(path: dir + "/small.sqlite")
        defer { s.close() }
        for i in 0..<20 { try send(s, id: 1_000 + Int64(i) * 10) }
        try s.write([s.resetHistory()])
        XCTAssertEqual(try leftovers(s), [])
        XCTAssertEqual(try count(s, "messages"), 0)
        XCTAssertEqual(try count(s, "deliveries"), 0)
        XCTAssertFalse(try s.emptyLeftovers(rows: 1_000))
    }
}
