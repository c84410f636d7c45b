import FCMCore
@testable import FCMStore
import Foundation
import XCTest

/// A device's deliveries found through SQLite's indexes (schema 12): inbox pages, the messages
/// list by token, their query plans, and the migration of an older store.
final class DeliveryIndexTests: XCTestCase {
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-index-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func message(_ id: Int64, recipients: Int, status: String = "accepted") -> MessageRow {
        MessageRow(id: id, suffix: 7, multicastID: nil, senderID: "111", transport: "http", format: "json", acceptedAt: id,
                   targetKind: recipients > 1 ? "multicast" : "token", targetValue: nil, collapseKey: nil, timeToLive: 60,
                   restrictedPackageName: nil, flags: 0, data: nil, notification: nil, priority: "normal", status: status,
                   error: nil, errorDetail: nil, httpStatus: 200, raw: nil, recipients: recipients)
    }

    private func delivery(_ id: Int64, of m: Int64, device: Int64?, token: String? = nil, status: String = "delivered",
                          expiresAt: Int64 = 1_000) -> DeliveryRow {
        DeliveryRow(id: id, message: m, device: device, token: token, status: status, error: nil, canonical: nil,
                    deliveredAt: status == "delivered" ? id : nil, expiresAt: expiresAt)
    }

    /// Messages 100 (devices 1, 2, 1), 200 (device 2), 300 (device 1 held, the deleted token
    /// "gone"), 400 (device 1 collapsed, held past its expiry), 500 ("gone").
    private func makeStore() throws -> Store {
        let s = try Store(path: dir + "/i.sqlite")
        try s.write([
            Writes.send(newDevices: [], message: message(100, recipients: 3),
                        deliveries: [delivery(100, of: 100, device: 1), delivery(101, of: 100, device: 2), delivery(102, of: 100, device: 1)],
                        notices: [], statusChanges: []),
            Writes.send(newDevices: [], message: message(200, recipients: 1), deliveries: [delivery(200, of: 200, device: 2)],
                        notices: [], statusChanges: []),
            Writes.send(newDevices: [], message: message(300, recipients: 2),
                        deliveries: [delivery(300, of: 300, device: 1, status: "pending", expiresAt: 5_000),
                                     delivery(301, of: 300, device: nil, token: "gone", status: "failed")],
                        notices: [], statusChanges: []),
            Writes.send(newDevices: [], message: message(400, recipients: 2),
                        deliveries: [delivery(400, of: 400, device: 1, status: "collapsed"),
                                     delivery(401, of: 400, device: 1, status: "pending", expiresAt: 500)],
                        notices: [], statusChanges: []),
            Writes.send(newDevices: [], message: message(500, recipients: 1, status: "rejected"),
                        deliveries: [delivery(500, of: 500, device: nil, token: "gone", status: "failed")],
                        notices: [], statusChanges: []),
        ])
        return s
    }

    private func inbox(_ s: Store, device: Int64, after: Int64 = 0, status: String? = nil, now: Int64 = 1_000,
                       limit: Int = 100) throws -> [Int64] {
        try s.read { (c: SQLiteConnection) throws(StoreError) in
            try c.inboxRows(device: device, after: after, status: status, now: now, limit: limit).map(\.id)
        }
    }

    private func records(_ s: Store, device: Int64?, token: String, before: Int64? = nil, status: String? = nil,
                         limit: Int = 100) throws -> [Int64] {
        var q = MessageQuery()
        q.token = (device, token)
        q.before = before
        q.recordStatus = status
        q.limit = limit
        return try s.read { (c: SQLiteConnection) throws(StoreError) in try c.messageRecords(q).map(\.id) }
    }

    func testInboxRowsPageInIDOrderByStatusAsOfNow() throws {
        let s = try makeStore()
        defer { s.close() }
        XCTAssertEqual(try inbox(s, device: 1), [100, 102, 300, 400, 401])
        XCTAssertEqual(try inbox(s, device: 1, after: 102, limit: 2), [300, 400])
        XCTAssertEqual(try inbox(s, device: 2), [101, 200])
        // 401 is held past its expiry at 1000: it reads as expired, not pending.
        XCTAssertEqual(try inbox(s, device: 1, status: "pending"), [300])
        XCTAssertEqual(try inbox(s, device: 1, status: "expired"), [401])
        XCTAssertEqual(try inbox(s, device: 1, status: "pending", now: 400), [300, 401])
        XCTAssertEqual(try inbox(s, device: 1, status: "collapsed"), [400])
        XCTAssertEqual(try inbox(s, device: 1, after: 100, status: "delivered"), [102])
        XCTAssertEqual(try inbox(s, device: 3), [])
        XCTAssertEqual(try s.read { (c: SQLiteConnection) throws(StoreError) in try c.newestDelivery(device: 1) }, 401)
        XCTAssertEqual(try s.read { (c: SQLiteConnection) throws(StoreError) in try c.newestDelivery(device: 3) }, 0)
    }

    /// Newest first, once per message however many of its deliveries reach the token, through
    /// the device and through the token kept on rows without one; a cursor inside a multicast's
    /// id range lists that multicast, as `id < cursor` on messages does.
    func testRecordsByTokenMergeBothWalksAndKeepTheCursorExact() throws {
        let s = try makeStore()
        defer { s.close() }
        XCTAssertEqual(try records(s, device: 1, token: "t1"), [400, 300, 100])
        XCTAssertEqual(try records(s, device: 1, token: "gone"), [500, 400, 300, 100])
        XCTAssertEqual(try records(s, device: nil, token: "gone"), [500, 300])
        XCTAssertEqual(try records(s, device: 1, token: "gone", limit: 2), [500, 400])
        XCTAssertEqual(try records(s, device: 1, token: "gone", before: 400, limit: 2), [300, 100])
        XCTAssertEqual(try records(s, device: 1, token: "t1", before: 101), [100], "a cursor inside message 100's range")
        XCTAssertEqual(try records(s, device: 1, token: "t1", before: 100), [])
        XCTAssertEqual(try records(s, device: 1, token: "gone", status: "rejected"), [500])
        XCTAssertEqual(try records(s, device: 2, token: "t2", before: 101), [100])
    }

    /// Every statement on a device's deliveries walks an index: no scan of a table, no sort.
    func testDeviceStatementsWalkIndexes() throws {
        let s = try makeStore()
        defer { s.close() }
        func plan(_ sql: String, _ args: [SQLValue]) throws -> [String] {
            try s.read { (c: SQLiteConnection) throws(StoreError) in
                var details: [String] = []
                try c.query("EXPLAIN QUERY PLAN " + sql, args) { (r: Statement) throws(StoreError) in details.append(r.text(3) ?? "") }
                return details
            }
        }
        let inboxArgs: [SQLValue] = [.int(1), .int(0), .int(1_000), .text("delivered"), .int(10)]
        for status in [nil, "pending", "expired", "delivered"] {
            let p = try plan(SQLiteConnection.inboxSQL(status: status), inboxArgs)
            XCTAssertTrue(p.contains { $0.hasPrefix("SEARCH d USING INDEX deliveries_") && $0.contains("(device=? AND rowid>?)") }, "\(status ?? "all"): \(p)")
            XCTAssertFalse(p.contains { $0.hasPrefix("SCAN") || $0.contains("TEMP B-TREE") }, "\(status ?? "all"): \(p)")
        }
        var q = MessageQuery()
        q.token = (1, "t1")
        q.before = 500
        q.deliveriesBelow = 500
        q.recipientStatus = "delivered"
        let (sql, args) = SQLiteConnection.recordsQuery(q)
        let p = try plan(sql, args)
        XCTAssertTrue(p.contains { $0.contains("USING INDEX deliveries_device (device=? AND rowid<?)") }, "\(p)")
        XCTAssertTrue(p.contains { $0.contains("USING INDEX deliveries_token (token=? AND rowid<?)") }, "\(p)")
        XCTAssertTrue(p.contains { $0.contains("MERGE") }, "\(p)")
        XCTAssertFalse(p.contains { $0.hasPrefix("SCAN") || $0.contains("TEMP B-TREE") }, "\(p)")
    }

    /// A store of schema 11 (deliveries listed in the engine's memory) gets the indexes when it
    /// is opened, and its deliveries are found through them.
    func testMigrationIndexesAnOlderStoresDeliveries() throws {
        let s = try makeStore()
        try s.write([{ c in
            try c.execute("DROP INDEX deliveries_device; DROP INDEX deliveries_token; PRAGMA user_version=11")
        }])
        s.close()
        let again = try Store(path: dir + "/i.sqlite")
        defer { again.close() }
        let indexes = try again.read { (c: SQLiteConnection) throws(StoreError) -> [String] in
            var names: [String] = []
            try c.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'deliveries_%' ORDER BY name") {
                (r: Statement) throws(StoreError) in names.append(r.text(0) ?? "")
            }
            return names
        }
        XCTAssertEqual(indexes, ["deliveries_device", "deliveries_pending", "deliveries_token"])
        XCTAssertEqual(try again.read { (c: SQLiteConnection) throws(StoreError) in try c.scalar("PRAGMA user_version") }, Int64(Store.schemaVersion))
        XCTAssertEqual(try inbox(again, device: 1), [100, 102, 300, 400, 401])
        XCTAssertEqual(try records(again, device: nil, token: "gone"), [500, 300])
    }
}
