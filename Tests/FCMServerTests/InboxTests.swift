import FCMCore
import FCMTesting
import Foundation
import Platform
import XCTest

/// A device's inbox and the messages list's `?token=` filter, read from SQLite (the engine keeps
/// no list of a device's deliveries): paging, long polls, deleted devices, restarts.
final class InboxTests: ServerTestCase {
    /// Every entry of a device's inbox (with `query`, e.g. `status=pending`), paging `limit` at a
    /// time; checks every page but the last is full and names the next page's cursor.
    private func pagedInbox(_ c: HTTPTestClient, _ token: String, _ query: String = "", limit: Int,
                            file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        var all: [String] = []
        var cursor: String?
        repeat {
            var path = "/api/v1/devices/\(token)/messages?limit=\(limit)"
            if !query.isEmpty { path += "&" + query }
            if let cursor { path += "&cursor=\(cursor)" }
            let page = try c.get(path)
            let got = items(page, file: file, line: line)
            cursor = page.object?["next"]?.stringValue
            if cursor != nil { XCTAssertEqual(got.count, limit, "only the last page is short", file: file, line: line) }
            all += got.map { JSONValue.object($0).serialized() }
        } while cursor != nil
        return all
    }

    /// The status of serialized inbox entries.
    private func status(_ entry: String) -> String? {
        (try? JSONParser.parse(entry))?.objectValue?["status"]?.stringValue
    }

    /// Record ids of `GET /api/v1/messages?…` (newest first), paging `limit` at a time.
    private func recordIDs(_ c: HTTPTestClient, _ query: String, limit: Int = 100) throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        repeat {
            let page = try c.get("/api/v1/messages?\(query)&limit=\(limit)" + (cursor.map { "&cursor=\($0)" } ?? ""))
            let got = items(page)
            ids += got.compactMap { $0["message_id"]?.stringValue }
            cursor = page.object?["next"]?.stringValue
            if cursor != nil { XCTAssertEqual(got.count, limit) }
        } while cursor != nil
        return ids
    }

    /// A device with hundreds of deliveries in every status pages the same, by status too, after
    /// a restart on the same file: the pages come from SQLite, nothing is rebuilt in memory.
    func testInboxPagesByStatusAndCursorAfterARestart() throws {
        let db = try temporaryDirectory("inbox") + "/s.sqlite"
        let first = try TestServer(fixtures: [errorTableFixture], db: db)
        let c1 = first.client()
        // a2: 240 deliveries, every 8th a multicast with a1 (their ids interleave).
        for i in 0..<240 {
            let body = i % 8 == 0 ? #"{"registration_ids":["a1","a2"],"data":{"n":"\#(i)"}}"# : #"{"to":"a2","data":{"n":"\#(i)"}}"#
            XCTAssertEqual(try c1.sendJSON(body).status, 200)
        }
        // a-offline: held, collapsed, expired at once (TTL 0), dropped (a fifth collapse key),
        // delivered (it came online and went again), and a failed recipient (a bad TTL), which
        // no inbox shows.
        func send(_ json: String) throws { XCTAssertEqual(try c1.sendJSON(json).status, 200) }
        try send(#"{"to":"a-offline","data":{"n":"early"}}"#)
        XCTAssertEqual(try c1.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try c1.patch("/api/v1/devices/a-offline", #"{"online":false}"#).status, 200)
        for k in ["k1", "k1", "k2", "k3", "k4", "k5"] { try send("{\"to\":\"a-offline\",\"collapse_key\":\"\(k)\"}") }
        try send(#"{"to":"a-offline","time_to_live":0}"#)
        try send(#"{"to":"a-offline","time_to_live":99999999}"#)
        for i in 0..<12 { try send("{\"to\":\"a-offline\",\"data\":{\"n\":\"\(i)\"}}") }
        let before = ["a2": try pagedInbox(c1, "a2", limit: 1000), "a-offline": try pagedInbox(c1, "a-offline", limit: 1000)]
        XCTAssertEqual(before["a2"]?.count, 240)
        XCTAssertEqual(Dictionary(grouping: before["a-offline"] ?? [], by: { status($0) ?? "?" }).mapValues(\.count),
                       ["delivered": 1, "collapsed": 1, "dropped": 1, "expired": 1, "pending": 16])
        c1.disconnect()
        first.stop()

        let second = try TestServer(fixtures: [errorTableFixture], db: db)
        defer { second.stop() }
        let c2 = second.client()
        for (token, all) in before {
            for limit in [7, 100] {
                XCTAssertEqual(try pagedInbox(c2, token, limit: limit), all, "\(token) by \(limit)")
            }
            for s in ["delivered", "pending", "expired", "collapsed", "dropped"] {
                XCTAssertEqual(try pagedInbox(c2, token, "status=\(s)", limit: 5), all.filter { status($0) == s }, "\(token) \(s)")
            }
        }
        // A cursor from the middle: what follows it, whatever the page size.
        let page = try c2.get("/api/v1/devices/a2/messages?limit=100")
        let cursor = try XCTUnwrap(page.object?["next"]?.stringValue)
        let rest = items(try c2.get("/api/v1/devices/a2/messages?limit=1000&cursor=\(cursor)")).map { JSONValue.object($0).serialized() }
        XCTAssertEqual(rest, Array(before["a2"]![100...]))
        XCTAssertEqual(try c2.get("/api/v1/devices/a2/messages?status=failed").status, 400)
        XCTAssertEqual(try c2.get("/api/v1/devices/nobody/messages").status, 404)
    }

    /// A long poll answers when its device gets what it waits for, and not before: other
    /// devices' sends, a first delivery short of `min`, or changes of other devices leave it
    /// waiting.
    func testLongPollAnswersWhenItsDeviceGetsEnoughAndNotBefore() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","data":{"n":"old"}}"#)))
        let answered = Locked<WireResponse?>(nil)
        let port = server.port
        let poller = Thread {
            let c = HTTPTestClient(port: port)
            // Two entries: the old one and one more.
            let r = try? c.get("/api/v1/devices/a1/messages?wait=30&min=2")
            answered.withLock { $0 = r }
        }
        poller.start()
        usleep(200_000)
        for i in 0..<5 { XCTAssertNil(singleError(try client.sendJSON("{\"to\":\"a2\",\"data\":{\"n\":\"\(i)\"}}"))) }
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        usleep(300_000)
        XCTAssertNil(answered.withLock { $0 }, "nothing new for a1 yet")
        let start = Date()
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","data":{"n":"new"}}"#)))
        while answered.withLock({ $0 }) == nil, Date().timeIntervalSince(start) < 20 { usleep(10_000) }
        let r = try XCTUnwrap(answered.withLock { $0 }, "answered by a1's delivery")
        XCTAssertEqual(items(r).compactMap { $0["data"]?.objectValue?["n"]?.stringValue }, ["old", "new"])

        // After a cursor: only deliveries newer than it count.
        let last = try XCTUnwrap(try client.get("/api/v1/devices/a1/messages?limit=1").object?["next"]?.stringValue)
        let quick = try client.get("/api/v1/devices/a1/messages?wait=0.3&cursor=\(last)")
        XCTAssertEqual(items(quick).compactMap { $0["data"]?.objectValue?["n"]?.stringValue }, ["new"])
        let none = try client.get("/api/v1/devices/a1/messages?wait=0.3&cursor=\(last)&min=2")
        XCTAssertEqual(items(none).count, 1, "min not met: what there is when the wait ends")
    }

    /// A poll for a status is answered when a held message takes it (the device comes online),
    /// with no new delivery to wake it.
    func testLongPollForAStatusWakesWhenHeldMessagesAreDelivered() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"n":"held"}}"#)))
        let answered = Locked<WireResponse?>(nil)
        let port = server.port
        let poller = Thread {
            let c = HTTPTestClient(port: port)
            let r = try? c.get("/api/v1/devices/a-offline/messages?wait=30&min=1&status=delivered")
            answered.withLock { $0 = r }
        }
        poller.start()
        usleep(300_000)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"n":"held too"}}"#)))
        usleep(300_000)
        XCTAssertNil(answered.withLock { $0 }, "both are held")
        let start = Date()
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        while answered.withLock({ $0 }) == nil, Date().timeIntervalSince(start) < 20 { usleep(10_000) }
        let r = try XCTUnwrap(answered.withLock { $0 }, "answered when the device came online")
        XCTAssertEqual(items(r).map { $0["status"]?.stringValue }, ["delivered", "delivered"])
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
    }

    /// A poll on a device deleted while it waits answers 404 at once.
    func testLongPollOnADeletedDeviceAnswersNotFound() throws {
        let answered = Locked<WireResponse?>(nil)
        let port = server.port
        let poller = Thread {
            let c = HTTPTestClient(port: port)
            let r = try? c.get("/api/v1/devices/a1/messages?wait=30")
            answered.withLock { $0 = r }
        }
        poller.start()
        usleep(300_000)
        let start = Date()
        XCTAssertEqual(try client.delete("/api/v1/devices/a1").status, 204)
        while answered.withLock({ $0 }) == nil, Date().timeIntervalSince(start) < 20 { usleep(10_000) }
        XCTAssertEqual(answered.withLock { $0 }?.status, 404)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
    }

    /// `GET /api/v1/messages?token=` lists what was sent to a token, newest first, paged: through
    /// its device, and after the device is deleted through the token its deliveries keep; a
    /// device made again with that token adds its own. A deleted device's inbox is gone, and a
    /// new device with its token starts with an empty one; a restart changes none of it.
    func testMessagesByTokenAndADeletedDevicesInbox() throws {
        let db = try temporaryDirectory("inbox-token") + "/s.sqlite"
        let first = try TestServer(fixtures: [errorTableFixture], db: db)
        let c1 = first.client()
        var sentToA1: [String] = []  // record ids, oldest first
        func send(_ c: HTTPTestClient, _ json: String, toA1: Bool) throws {
            XCTAssertEqual(try c.sendJSON(json).status, 200)
            let id = try XCTUnwrap(items(try c.get("/api/v1/messages?limit=1")).first?["message_id"]?.stringValue)
            if toA1 { sentToA1.append(id) }
        }
        try send(c1, #"{"to":"a1"}"#, toA1: true)
        try send(c1, #"{"to":"a2"}"#, toA1: false)
        try send(c1, #"{"registration_ids":["a1","a2"]}"#, toA1: true)
        try send(c1, #"{"registration_ids":["a2","a1","a1"]}"#, toA1: true)  // a1 twice: one record
        try send(c1, #"{"to":"a1","time_to_live":99999999}"#, toA1: true)  // refused (InvalidTtl), still addressed to a1
        try send(c1, #"{"to":"a2"}"#, toA1: false)
        let expected = Array(sentToA1.reversed())
        XCTAssertEqual(try recordIDs(c1, "token=a1"), expected)
        XCTAssertEqual(try recordIDs(c1, "token=a1", limit: 1), expected)
        XCTAssertEqual(try recordIDs(c1, "token=a1&status=rejected"), [expected[0]])
        XCTAssertEqual(try client(c1, inboxOf: "a1").count, 4, "a1 twice in one multicast is two entries; the refused one is none")

        XCTAssertEqual(try c1.delete("/api/v1/devices/a1").status, 204)
        XCTAssertEqual(try c1.get("/api/v1/devices/a1/messages").status, 404)
        XCTAssertEqual(try recordIDs(c1, "token=a1"), expected, "found by the token the rows keep")
        XCTAssertEqual(try recordIDs(c1, "token=a1", limit: 2), expected)
        let kept = try c1.get("/api/v1/messages/\(pathEncode(expected.last!))")
        XCTAssertEqual(kept.object?["recipients"]?.arrayValue?.first?.objectValue?["token"]?.stringValue, "a1")
        XCTAssertEqual(try c1.post("/api/v1/devices", #"{"token":"a1","sender_id":"111","app":"com.a"}"#).status, 201)
        XCTAssertEqual(try client(c1, inboxOf: "a1"), [], "a new device with the token starts empty")
        try send(c1, #"{"to":"a1","data":{"n":"again"}}"#, toA1: true)
        let all = Array(sentToA1.reversed())
        XCTAssertEqual(try recordIDs(c1, "token=a1"), all)
        XCTAssertEqual(try recordIDs(c1, "token=a1", limit: 2), all)
        XCTAssertEqual(try recordIDs(c1, "token=a2").count, 4)
        XCTAssertEqual(try recordIDs(c1, "token=nobody"), [])
        c1.disconnect()
        first.stop()

        let second = try TestServer(fixtures: [errorTableFixture], db: db)
        defer { second.stop() }
        let c2 = second.client()
        XCTAssertEqual(try recordIDs(c2, "token=a1"), all)
        XCTAssertEqual(try recordIDs(c2, "token=a1", limit: 3), all)
        XCTAssertEqual(try client(c2, inboxOf: "a1").compactMap { $0["data"]?.objectValue?["n"]?.stringValue }, ["again"])
    }

    private func client(_ c: HTTPTestClient, inboxOf token: String) throws -> [JSONObject] {
        items(try c.get("/api/v1/devices/\(token)/messages"))
    }
}
