import HTTPServer
import FCMCore
@testable import FCMEngine
@testable import FCMModel
import FCMServer
import FCMTesting
import Foundation
import XCTest

/// `--max-messages` and `--max-age` (docs/storage.md): the oldest records go in the background,
/// the ones a device still holds wait for their TTL, health reports the count and the size, and
/// every view copes with what is gone. Through a real server over real sockets.
final class BoundedStorageTests: XCTestCase {
    private func server(_ arguments: [String], db: String = ":memory:") throws -> (TestServer, HTTPTestClient) {
        let s = try TestServer(fixtures: [errorTableFixture], db: db, extraArguments: arguments)
        addTeardownBlock { s.stop() }
        return (s, s.client())
    }

    private func health(_ c: HTTPTestClient) throws -> JSONObject {
        try XCTUnwrap(try c.get("/api/v1/health").object)
    }

    private func storedCount(_ c: HTTPTestClient) throws -> Int64? {
        try health(c)["store_messages"]?.numberValue?.int64
    }

    /// Polls `condition` every 20 ms for at most 10 s (the pruner runs every 100 ms).
    private func eventually(_ what: String, file: StaticString = #filePath, line: UInt = #line,
                            _ condition: () throws -> Bool) rethrows {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try condition() { return }
            usleep(20_000)
        }
        XCTFail("never happened: \(what)", file: file, line: line)
    }

    /// A legacy send's only message id.
    private func send(_ c: HTTPTestClient, _ json: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try c.sendJSON(json)
        return try XCTUnwrap(results(r, file: file, line: line).first?["message_id"]?.stringValue, r.text, file: file, line: line)
    }

    /// The count the pruner keeps and the list both at `n`: the count alone may reach `n` from
    /// a pass that had not counted the last sends yet.
    private func settled(_ c: HTTPTestClient, at n: Int) throws -> Bool {
        try storedCount(c) == Int64(n) && items(try c.get("/api/v1/messages?limit=1000")).count == n
    }

    private func recordStatus(_ c: HTTPTestClient, _ id: String) throws -> Int {
        try c.get("/api/v1/messages/\(pathEncode(id))").status
    }

    func testMaxMessagesKeepsTheNewest() throws {
        let (_, c) = try server(["--max-messages", "50"])
        var ids: [String] = []
        for i in 0..<200 { ids.append(try send(c, #"{"to":"a1","data":{"i":"\#(i)"}}"#)) }
        try eventually("the store holds 50 records") { try settled(c, at: 50) }
        let listed = items(try c.get("/api/v1/messages?limit=1000"))
        XCTAssertEqual(listed.compactMap { $0["message_id"]?.stringValue }, Array(ids.suffix(50).reversed()), "the newest 50, newest first")
        XCTAssertEqual(listed.last?["data"]?.objectValue?["i"]?.stringValue, "150")
        let inbox = items(try c.get("/api/v1/devices/a1/messages?limit=1000"))
        XCTAssertEqual(inbox.compactMap { $0["message_id"]?.stringValue }, Array(ids.suffix(50)), "the inbox lists what is left, oldest first")
        // A pruned record answers the usual 404, in the control API's error shape.
        let gone = try c.get("/api/v1/messages/\(pathEncode(ids[0]))")
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.object?["error"]?.objectValue?["code"]?.stringValue, "not_found")
        XCTAssertEqual(try recordStatus(c, ids[150]), 200)
        // Filters and the token view skip the pruned ones too.
        XCTAssertEqual(items(try c.get("/api/v1/messages?token=a1&limit=1000")).count, 50)
        XCTAssertEqual(items(try c.get("/api/v1/messages?status=delivered&limit=1000")).count, 50)
        // The count follows later sends.
        for i in 0..<10 { _ = try send(c, #"{"to":"a2","data":{"j":"\#(i)"}}"#) }
        try eventually("the store is back at 50 after more sends") { try settled(c, at: 50) }
    }

    /// A message an offline device holds is kept past the limit until its TTL passes (moved on
    /// the mock's clock); then it is the oldest and goes first.
    func testHeldMessageWaitsForItsTTL() throws {
        let (_, c) = try server(["--max-messages", "50"])
        let held = try send(c, #"{"to":"a-offline","time_to_live":60,"data":{"held":"yes"}}"#)
        var ids: [String] = []
        for i in 0..<100 { ids.append(try send(c, #"{"to":"a1","data":{"i":"\#(i)"}}"#)) }
        try eventually("the store holds 50 records") { try settled(c, at: 50) }
        XCTAssertEqual(try recordStatus(c, held), 200, "a device still holds it")
        let listed = items(try c.get("/api/v1/messages?limit=1000")).compactMap { $0["message_id"]?.stringValue }
        XCTAssertEqual(listed, Array(ids.suffix(49).reversed()) + [held], "the held one counts toward the 50")
        XCTAssertEqual(items(try c.get("/api/v1/devices/a-offline/messages?status=pending")).count, 1)
        XCTAssertEqual(try c.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)

        // Its TTL passes: it expires, and the next send past the limit takes it away first.
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":61}"#).status, 200)
        let latest = try send(c, #"{"to":"a1","data":{"i":"last"}}"#)
        try eventually("the expired message goes") { try recordStatus(c, held) == 404 }
        try eventually("the store is back at 50") { try settled(c, at: 50) }
        let after = items(try c.get("/api/v1/messages?limit=1000")).compactMap { $0["message_id"]?.stringValue }
        XCTAssertEqual(after, [latest] + Array(ids.suffix(49).reversed()))
        XCTAssertEqual(items(try c.get("/api/v1/devices/a-offline/messages")).count, 0)
        XCTAssertEqual(try c.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 0)
    }

    /// `--max-age` on the mock's clock: records older than the limit go; a held one stays until
    /// its TTL passes, then goes too; one delivered when its device comes back goes then.
    func testMaxAgeFollowsTheMockClock() throws {
        let (_, c) = try server(["--max-age", "1h"])
        var old: [String] = []
        for i in 0..<10 { old.append(try send(c, #"{"to":"a1","data":{"i":"\#(i)"}}"#)) }
        let held = try send(c, #"{"to":"a-offline","time_to_live":10800,"data":{"k":"3h"}}"#)
        let heldLonger = try send(c, #"{"to":"a-offline","data":{"k":"4 weeks"}}"#)
        try eventually("counted") { try storedCount(c) == 12 }
        usleep(300_000)
        XCTAssertEqual(try storedCount(c), 12, "nothing is an hour old yet")

        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":7200}"#).status, 200)
        let fresh = try send(c, #"{"to":"a2","data":{"k":"new"}}"#)
        try eventually("the two-hour-old records go") { try settled(c, at: 3) }
        XCTAssertEqual(items(try c.get("/api/v1/messages?limit=1000")).compactMap { $0["message_id"]?.stringValue },
                       [fresh, heldLonger, held])
        for id in old { XCTAssertEqual(try recordStatus(c, id), 404) }

        // Past the 3 h TTL the first held one has expired: it goes; the 4-week one is still held.
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":7200}"#).status, 200)
        try eventually("the expired one goes") { try recordStatus(c, held) == 404 }
        try eventually("the recent one goes too (4 h old now)") { try settled(c, at: 1) }
        XCTAssertEqual(try recordStatus(c, heldLonger), 200)
        let inbox = items(try c.get("/api/v1/devices/a-offline/messages"))
        XCTAssertEqual(inbox.compactMap { $0["message_id"]?.stringValue }, [heldLonger])
        XCTAssertEqual(inbox.first?["status"]?.stringValue, "pending")
        // Delivered when the device comes back, it is an old record like any other.
        XCTAssertEqual(try c.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        try eventually("the delivered one goes") { try settled(c, at: 0) }
    }

    /// Health reports the running count and the store's size: the files for a file store, pages
    /// for `:memory:`; a reset brings the count to zero.
    func testHealthReportsCountAndSize() throws {
        let dir = try temporaryDirectory("bounded-health")
        let db = dir + "/store.sqlite"
        let (_, c) = try server([], db: db)
        for i in 0..<25 { _ = try send(c, #"{"to":"a1","data":{"i":"\#(i)"}}"#) }
        _ = try c.sendJSON(#"{"to":"a1","data":"not an object"}"#)  // a refused send is a record too
        try eventually("25 sends and a refused one counted") { try storedCount(c) == 26 }
        func files() -> Int64 {
            [db, db + "-wal"].reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int64) ?? 0) }
        }
        try eventually("store_bytes is the database and its log") { try health(c)["store_bytes"]?.numberValue?.int64 == files() }
        XCTAssertGreaterThan(files(), 0)
        let h = try health(c)
        XCTAssertEqual(h.keys, ["status", "store", "store_messages", "store_bytes", "version", "uptime_s", "event_readers", "tls_ca", "apns", "webpush", "clients"])
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        try eventually("a reset empties the count") { try storedCount(c) == 0 }

        let (_, m) = try server([])
        for i in 0..<5 { _ = try send(m, #"{"to":"a1","data":{"i":"\#(i)"}}"#) }
        try eventually("counted in memory") { try storedCount(m) == 5 }
        let pages = try XCTUnwrap(try health(m)["store_bytes"]?.numberValue?.int64)
        XCTAssertGreaterThan(pages, 0)
        XCTAssertEqual(pages % 4096, 0, "page_count * page_size")
    }

    /// Acked and nacked upstream messages go by the same limits; one still waiting for the app
    /// server is kept.
    func testSettledUpstreamMessagesArePruned() throws {
        let (s, c) = try server(["--max-messages", "2"])
        let x = try XMPPTestClient(port: s.app.xmppPort)
        try x.login(user: "111@fcm.googleapis.com", password: "key-111")
        for i in 1...4 {
            XCTAssertEqual(try c.post("/api/v1/devices/a1/upstream", #"{"message_id":"up-\#(i)"}"#).status, 201)
            XCTAssertEqual(try x.nextGCM()?["message_id"]?.stringValue, "up-\(i)")
            if i < 4 { x.sendDownstream(#"{"to":"a1","message_id":"up-\#(i)","message_type":"ack"}"#) }
        }
        try eventually("two upstream messages are left") { items(try c.get("/api/v1/upstream")).count == 2 }
        let left = items(try c.get("/api/v1/upstream"))
        XCTAssertEqual(left.compactMap { $0["message_id"]?.stringValue }, ["up-3", "up-4"])
        XCTAssertEqual(left.compactMap { $0["status"]?.stringValue }, ["acked", "sent"])
    }

    // MARK: Configuration

    func testDurations() {
        let table: [(String, Int64?)] = [
            ("30s", 30), ("15m", 900), ("12h", 43_200), ("7d", 604_800), ("90", 90), ("1s", 1),
            ("36525d", 3_155_760_000), ("36526d", nil), ("0", nil), ("0s", nil), ("-1s", nil), ("", nil), ("s", nil),
            ("1w", nil), ("1.5h", nil), ("10 s", nil), (" 10s", nil), ("10S", nil), ("+5m", nil), ("99999999999999d", nil),
            ("١٠s", nil),
        ]
        for (text, seconds) in table { XCTAssertEqual(Configuration.durationSeconds(text), seconds, text) }
    }

    func testLimitsFromFlagsAndEnvironment() throws {
        func limits(_ args: [String], _ env: [String: String] = [:]) throws -> StorageLimits {
            try Configuration.parse(arguments: args, environment: env).storageLimits
        }
        XCTAssertEqual(try limits([]), StorageLimits(), "a file store keeps everything by default")
        XCTAssertEqual(try limits(["--db", ":memory:"]), StorageLimits(maxMessages: 100_000))
        XCTAssertEqual(try limits(["--db", ":memory:", "--max-messages", "none"]), StorageLimits())
        XCTAssertEqual(try limits(["--max-messages", "500", "--max-age", "7d"]), StorageLimits(maxMessages: 500, maxAgeSeconds: 604_800))
        XCTAssertEqual(try limits([], ["FCM_MOCK_MAX_MESSAGES": "20", "FCM_MOCK_MAX_AGE": "15m"]),
                       StorageLimits(maxMessages: 20, maxAgeSeconds: 900))
        XCTAssertEqual(try limits(["--max-messages=30"], ["FCM_MOCK_MAX_MESSAGES": "20"]).maxMessages, 30, "a flag wins")
        XCTAssertEqual(try limits(["--max-age", "none"], ["FCM_MOCK_MAX_AGE": "1h"]).maxAgeSeconds, nil)
        XCTAssertTrue(try limits([]).description.hasPrefix("none: every message is kept until a reset"))
        XCTAssertEqual(try limits(["--max-messages", "500", "--max-age", "36h"]).description, "at most 500 messages, none older than 36h")
        for (flag, bad) in [("--max-messages", "0"), ("--max-messages", "-5"), ("--max-messages", "lots"), ("--max-messages", "1e3"),
                            ("--max-age", "0s"), ("--max-age", "a week"), ("--max-age", "7w")] {
            XCTAssertThrowsError(try Configuration.parse(arguments: [flag, bad], environment: [:]), "\(flag) \(bad)") { e in
                XCTAssertTrue("\(e)".hasPrefix("\(flag) must be"), "\(e)")
                XCTAssertTrue("\(e)".hasSuffix("got '\(bad)'"), "\(e)")
            }
        }
        XCTAssertThrowsError(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_MAX_AGE": "soon"])) { e in
            XCTAssertEqual("\(e)", "FCM_MOCK_MAX_AGE must be a duration such as 30s, 15m, 12h or 7d (1 second to 100 years), or none, got 'soon'")
        }
    }

    /// A bad value stops start-up with one line and exit code 2; the start-up line says what
    /// the limits are, and that there are none for a file store by default.
    func testStartUpLineAndBadValues() throws {
        let bad = try runBinary(["serve", "--http-port", "0", "--xmpp-port", "0", "--db", ":memory:", "--max-messages", "0"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertEqual(bad.stderr, "fcm-mock: --max-messages must be a number of messages >= 1, or none, got '0'\n")
        let dir = try temporaryDirectory("bounded-start")
        let file = try BinaryServer(arguments: ["--db", dir + "/s.sqlite"])
        let line = String(decoding: file.takeStderr(waitingFor: " store.limits="), as: UTF8.self)
        file.stop()
        XCTAssertTrue(line.contains(" store.limits=none: every message is kept until a reset (see --max-messages, --max-age)"), line)
        let memory = try BinaryServer(arguments: ["--db", ":memory:", "--max-age", "12h"])
        let memoryLine = String(decoding: memory.takeStderr(waitingFor: " store.limits="), as: UTF8.self)
        memory.stop()
        XCTAssertTrue(memoryLine.contains(" store.limits=at most 100000 messages, none older than 12h"), memoryLine)
    }
}
