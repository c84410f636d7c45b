import FCMCore
@testable import FCMEngine
import FCMServer
@testable import FCMStore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// What the rollback tests share: a server on a file store, ways to make its store refuse
/// writes, and the whole visible state through the control API, to compare with a restart.
class RollbackTestCase: XCTestCase {
    var db = ""
    let auth = [("Authorization", "key=\(DemoProject.serverKey)"), ("Content-Type", "application/json")]

    override func setUpWithError() throws {
        db = try temporaryDirectory("rollback") + "/store.sqlite"
    }

    /// The server on `db`, with the built-in demo fixture.
    func start(_ extra: [String] = []) throws -> TestServer {
        try TestServer(db: db, extraArguments: extra)
    }

    /// Runs `sql` on the server's own store connection, between two commits (a test aid: the
    /// in-process equivalent of a disk that fills up or a file that turns read-only).
    func storeSQL(_ s: TestServer, _ sql: String) throws {
        try s.app.engine.store.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.execute(sql) }
    }

    func storeScalar(_ s: TestServer, _ sql: String, _ args: [SQLValue] = []) throws -> Int64? {
        try s.app.engine.store.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.scalar(sql, args) }
    }

    /// Every write fails as on a read-only file (`SQLITE_READONLY`), or succeeds again.
    func refuseWrites(_ s: TestServer, _ refuse: Bool) throws {
        try storeSQL(s, "PRAGMA query_only=\(refuse ? 1 : 0)")
    }

    /// A legacy send of `data` to `to`.
    func send(_ c: HTTPTestClient, to: String, filler: Int = 0, key: String = "i") throws -> WireResponse {
        let data = filler > 0 ? #","filler":"\#(String(repeating: "x", count: filler))""# : ""
        return try c.request("POST", "/fcm/send", headers: auth, body: Array(#"{"to":"\#(to)","data":{"k":"\#(key)"\#(data)}}"#.utf8))
    }

    /// A device's `pending`, or nil when the control API does not know it.
    func pending(_ c: HTTPTestClient, _ token: String) throws -> Int64? {
        let r = try c.get("/api/v1/devices/\(token)")
        return r.status == 200 ? r.object?["pending"]?.numberValue?.int64 : nil
    }

    /// What the store holds as pending for a device, counted in SQLite.
    func storedPending(_ s: TestServer, _ token: String) throws -> Int64? {
        try storeScalar(s, "SELECT count(*) FROM deliveries WHERE status = 'pending' AND device = (SELECT id FROM devices WHERE token = ?)",
                        [.text(token)])
    }

    /// Everything the control API shows that a restart reads back from the store: devices (with
    /// their pending counts and topics), topics, groups, upstream messages, projects, message
    /// records and the send counters. An upstream message's `connection_id` is left out: it names
    /// a connection of this process, which a restart never has.
    func snapshot(_ c: HTTPTestClient, file: StaticString = #filePath, line: UInt = #line) throws -> [String: String] {
        var out: [String: String] = [:]
        for path in ["/api/v1/devices?limit=1000", "/api/v1/topics?limit=1000", "/api/v1/groups?limit=1000",
                     "/api/v1/upstream?limit=1000", "/api/v1/projects", "/api/v1/messages?limit=1000", "/api/v1/stats"] {
            let r = try c.get(path)
            XCTAssertEqual(r.status, 200, "\(path): \(r.text)", file: file, line: line)
            // A web device's endpoint names the HTTP port, which a restart picks anew.
            out[path] = r.text.replacingOccurrences(of: #""connection_id":("[^"]*"|null)"#, with: #""connection_id":-"#,
                                                    options: .regularExpression)
                .replacingOccurrences(of: #""endpoint":"http://127\.0\.0\.1:[0-9]+/"#, with: #""endpoint":"http://127.0.0.1:PORT/"#,
                                      options: .regularExpression)
        }
        return out
    }

    /// Compares two snapshots path by path (a failure names the path).
    func assertSame(_ a: [String: String], _ b: [String: String], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.keys.sorted(), b.keys.sorted(), file: file, line: line)
        for (path, text) in a.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(text, b[path], "\(what): \(path)", file: file, line: line)
        }
    }

    /// What `c` shows now equals what a server started on `s`'s file shows (`c` is closed and
    /// `s` stopped first).
    func assertARestartShowsTheSame(_ s: TestServer, _ c: HTTPTestClient, file: StaticString = #filePath, line: UInt = #line) throws {
        let live = try snapshot(c, file: file, line: line)
        c.disconnect()
        assertSame(try restartSnapshot(s), live, "after a restart", file: file, line: line)
    }

    /// Stops `s` and starts a server on the same file; returns what it shows.
    func restartSnapshot(_ s: TestServer) throws -> [String: String] {
        s.stop()
        let again = try start()
        defer { again.stop() }
        let c = again.client()
        defer { c.disconnect() }
        return try snapshot(c)
    }
}
