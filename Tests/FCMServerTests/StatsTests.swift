import FCMServer
import HTTPServer
import FCMCore
import FCMStore
import FCMTesting
import Platform
import Foundation
import XCTest

/// `GET /api/v1/stats`: the overview's counters, counted as sends are decided (issue 14).
final class StatsTests: ServerTestCase {
    func stats(_ c: HTTPTestClient? = nil) throws -> String {
        let r = try (c ?? client).get("/api/v1/stats")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        return r.text
    }

    func testAFreshServerCountsNothingButItsDevices() throws {
        XCTAssertEqual(try stats(), #"{"messages":{"accepted":0,"rejected":0},"errors":{},"pending":0,"xmpp_connections":0,"devices":6}"#)
    }

    func testLegacySendsCountAcceptedRejectedErrorsByCodeAndPending() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","data":{"k":"v"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"k":"v"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"k":"w"}}"#)))
        // One accepted record with one failed recipient.
        XCTAssertEqual(results(try client.sendJSON(#"{"registration_ids":["a1","a2"]}"#)).count, 2)
        // All recipients failed: a rejected record, its error counted once per recipient.
        XCTAssertEqual(singleError(try client.sendJSON(#"{"to":"a2"}"#)), "NotRegistered")
        // Refused as a whole: a bad key (401) and a body that is not JSON (400).
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try client.sendJSON(#"{"to":"#).status, 400)
        XCTAssertEqual(try stats(), """
            {"messages":{"accepted":4,"rejected":3},"errors":{"InvalidJson":1,"NotRegistered":2,"Unauthorized":1},\
            "pending":2,"xmpp_connections":0,"devices":6}
            """)
        // Deliveries held by an offline device leave the pending count when it comes online.
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        XCTAssertTrue(try stats().contains(#""pending":0,"#))
    }

    func testXMPPSendsAndConnectionsCount() throws {
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111@fcm.googleapis.com", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"m-1","data":{"k":"v"}}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        c.sendDownstream(#"{"to":"bad token","message_id":"m-2"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "nack")
        XCTAssertEqual(try stats(), """
            {"messages":{"accepted":1,"rejected":1},"errors":{"InvalidRegistration":1},"pending":0,"xmpp_connections":1,"devices":6}
            """)
    }

    func testResetClearsTheCounters() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline"}"#)))
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try stats(), #"{"messages":{"accepted":0,"rejected":0},"errors":{},"pending":0,"xmpp_connections":0,"devices":6}"#)
    }

    func testARestartKeepsTheCounts() throws {
        let dir = try temporaryDirectory("stats")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        let c1 = first.client()
        XCTAssertEqual(try c1.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertNil(singleError(try c1.sendJSON(#"{"to":"a-offline"}"#)))
        XCTAssertEqual(results(try c1.sendJSON(#"{"registration_ids":["a1","a2","a2"]}"#)).count, 3)
        XCTAssertEqual(try c1.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try c1.sendJSON(#"{"to":"/topics/news"}"#).status, 200)
        let before = try stats(c1)
        c1.disconnect()
        first.stop()
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        defer { c2.disconnect() }
        XCTAssertEqual(try stats(c2), before)
        XCTAssertTrue(before.hasPrefix(#"{"messages":{"accepted":3,"rejected":1},"errors":{"NotRegistered":2,"#), before)
        XCTAssertTrue(before.hasSuffix(#""pending":1,"xmpp_connections":0,"devices":6}"#), before)
        // Counting goes on from there.
        XCTAssertNil(singleError(try c2.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertTrue(try stats(c2).hasPrefix(#"{"messages":{"accepted":4,"#))
    }

    /// The stored sends are counted after start, up to the last id the store held: a send made
    /// after a restart, whether or not that count is done, counts once.
    func testASendBeforeTheFirstReadAfterARestartCountsOnce() throws {
        let dir = try temporaryDirectory("stats-lazy")
        do {
            let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
            defer { first.stop() }
            let c = first.client()
            defer { c.disconnect() }
            XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
            XCTAssertEqual(try c.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        }
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c = second.client()
        defer { c.disconnect() }
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
        let counted = try stats(c)
        XCTAssertTrue(counted.hasPrefix(#"{"messages":{"accepted":2,"rejected":1},"#), counted)
    }
}

/// A restart on a large store: the sends it holds are counted in the background right after start
/// (not at start-up, not at the page's first call), and a `GET /api/v1/stats` that comes before
/// that count is done waits for it, so every answer is whole.
final class StatsAfterRestartTests: XCTestCase {
    /// Copies of every message record and recipient row of the store at `path` under new ids
    /// (`copies` more of each), as if those sends had been made that many times again.
    private func multiply(_ path: String, copies: Int) throws {
        let c = try SQLiteConnection(path: path)
        try c.execute("PRAGMA busy_timeout=5000")
        func columns(_ table: String) throws -> [String] {
            var names: [String] = []
            try c.query("SELECT name FROM pragma_table_info('\(table)') ORDER BY cid") { (r: Statement) throws(StoreError) in
                if let n = r.text(0) { names.append(n) }
            }
            return names
        }
        let low = min(try c.scalar("SELECT min(id) FROM messages") ?? 0, try c.scalar("SELECT min(id) FROM deliveries") ?? 0)
        let high = max(try c.scalar("SELECT max(id) FROM messages") ?? 0, try c.scalar("SELECT max(id) FROM deliveries") ?? 0)
        let span = high - low + 1
        try c.execute("BEGIN")
        for (table, shifted) in [("messages", ["id"]), ("deliveries", ["id", "message"])] {
            let names = try columns(table)
            let values = names.map { shifted.contains($0) ? "t.\($0) + k.n * \(span)" : "t.\($0)" }
            try c.execute("""
                INSERT INTO \(table)(\(names.joined(separator: ","))) WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < \(copies))
                SELECT \(values.joined(separator: ",")) FROM \(table) AS t, k WHERE t.id <= \(high)
                """)
        }
        try c.execute("COMMIT")
    }

    func testTheFirstCallRightAfterARestartAnswersEverything() throws {
        let dir = try temporaryDirectory("stats-restart")
        let db = dir + "/s.sqlite"
        do {
            let first = try TestServer(fixtures: [errorTableFixture], db: db)
            defer { first.stop() }
            let c = first.client()
            defer { c.disconnect() }
            XCTAssertEqual(try c.post("/api/v1/devices/a2:unregister").status, 200)
            XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1","data":{"k":"v"}}"#)))
            XCTAssertEqual(results(try c.sendJSON(#"{"registration_ids":["a1","a2"]}"#)).count, 2)
            XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"a2"}"#)), "NotRegistered")
            XCTAssertEqual(try c.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
            XCTAssertEqual(try c.sendJSON(#"{"to":"#).status, 400)
            XCTAssertEqual(try c.get("/api/v1/stats").text, """
                {"messages":{"accepted":2,"rejected":3},"errors":{"InvalidJson":1,"NotRegistered":2,"Unauthorized":1},\
                "pending":0,"xmpp_connections":0,"devices":6}
                """)
        }
        // 5 records and 3 recipient rows, 25,000 times: 125,000 records to count after the restart.
        let copies = 24_999
        try multiply(db, copies: copies)
        let n = copies + 1
        let whole = """
            {"messages":{"accepted":\(2 * n),"rejected":\(3 * n)},"errors":{"InvalidJson":\(n),"NotRegistered":\(2 * n),\
            "Unauthorized":\(n)},"pending":0,"xmpp_connections":0,"devices":6}
            """

        let second = try TestServer(fixtures: [errorTableFixture], db: db)
        defer { second.stop() }
        // At once, from four connections (the count is under way): each waits for it, none counts
        // again, and every answer is whole.
        let answers = Locked<[String]>([])
        let port = second.port
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let c = HTTPTestClient(port: port)
            defer { c.disconnect() }
            let text = (try? c.get("/api/v1/stats").text) ?? "no answer"
            answers.withLock { $0.append(text) }
        }
        XCTAssertEqual(answers.withLock { $0 }, Array(repeating: whole, count: 4))
        // Later calls answer the same, and count the sends made since.
        let c = second.client()
        defer { c.disconnect() }
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
        usleep(200_000)
        XCTAssertEqual(try c.get("/api/v1/stats").text, whole.replacingOccurrences(of: #""accepted":\#(2 * n)"#, with: #""accepted":\#(2 * n + 1)"#))
    }
}

/// HTTP v1 sends count with their FcmError codes, as their records name them.
final class StatsV1Tests: V1TestCase {
    func testV1SendsCountByTheirOwnCodes() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1","data":{"k":"v"}}}"#).status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a2"}}"#).status, 404)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#, bearer: "not-a-token").status, 401)
        let r = try client.get("/api/v1/stats")
        XCTAssertEqual(r.text, """
            {"messages":{"accepted":1,"rejected":2},"errors":{"UNAUTHENTICATED":1,"UNREGISTERED":1},\
            "pending":0,"xmpp_connections":0,"devices":6}
            """)
    }
}
