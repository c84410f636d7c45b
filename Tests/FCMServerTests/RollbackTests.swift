import FCMCore
@testable import FCMEngine
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// A write the store could not commit leaves no trace in what the mock shows: every count and
/// list equals what the store holds, before and after a restart.
final class RollbackTests: RollbackTestCase {
    /// Issue 16's reproduction: a device with 5 pending, then 10 sends to it and one to a new
    /// well-formed token while the disk is full, all answered 500. Before, `pending` read 15
    /// and the new token's device existed until a restart.
    func testFailedSendsToAFullStoreLeaveNoTrace() throws {
        var s = try start()
        var c = s.client()
        for i in 0..<5 { XCTAssertEqual(try send(c, to: "demo-android-offline", key: "held-\(i)").status, 200) }
        XCTAssertEqual(try pending(c, "demo-android-offline"), 5)
        let pages = try XCTUnwrap(try storeScalar(s, "PRAGMA page_count"))
        c.disconnect()
        s.stop()

        // A store with a dozen pages to spare, filled by sends of 3 KB to an online device.
        s = try start(["--store-max-pages", String(pages + 12)])
        defer { s.stop() }
        c = s.client()
        defer { c.disconnect() }
        var full = false
        for i in 0..<500 where !full {
            full = try send(c, to: "demo-android-1", filler: 3000, key: "fill-\(i)").status == 500
        }
        XCTAssertTrue(full, "the store never filled up")
        let before = try snapshot(c)

        for i in 0..<10 {
            XCTAssertEqual(try send(c, to: "demo-android-offline", filler: 3000, key: "lost-\(i)").status, 500)
        }
        let newToken = "brand-new-token:APA91bRollback"
        XCTAssertEqual(try send(c, to: newToken, filler: 3000).status, 500)

        // The mock shows what the store holds: 5 pending, no new device, nothing else changed.
        XCTAssertEqual(try pending(c, "demo-android-offline"), 5)
        XCTAssertEqual(try storedPending(s, "demo-android-offline"), 5)
        XCTAssertEqual(try c.get("/api/v1/devices/\(newToken)").status, 404)
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM devices WHERE token = ?", [.text(newToken)]), 0)
        XCTAssertEqual(items(try c.get("/api/v1/devices/demo-android-offline/messages")).count, 5)
        assertSame(try snapshot(c), before, "after the failed sends")
        XCTAssertEqual(try c.get("/api/v1/health").status, 503)

        // Space comes back: sends succeed again, and count from where the store is.
        try storeSQL(s, "PRAGMA max_page_count=1000000")
        XCTAssertEqual(try send(c, to: "demo-android-offline", filler: 3000, key: "room").status, 200)
        XCTAssertEqual(try pending(c, "demo-android-offline"), 6)
        XCTAssertEqual(try send(c, to: newToken).status, 200)
        XCTAssertEqual(try c.get("/api/v1/devices/\(newToken)").status, 200)
        XCTAssertEqual(try c.get("/api/v1/health").status, 200)
        try assertARestartShowsTheSame(s, c)
    }

    /// Device, topic, group, upstream, project and reset writes refused by the store change
    /// nothing visible; each is answered as its API answers a failure.
    func testRefusedControlWritesAreNotVisible() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-2", #"{"online":false}"#).status, 200)
        XCTAssertEqual(try send(c, to: "demo-android-2").status, 200)
        let minted = try c.post("/api/v1/projects/\(DemoProject.senderID)/access-tokens")
        XCTAssertEqual(minted.status, 201, minted.text)
        let bearer = [("Authorization", "Bearer " + (minted.object?["access_token"]?.stringValue ?? "")), ("Content-Type", "application/json")]
        let before = try snapshot(c)

        try refuseWrites(s, true)
        let key = [("Authorization", "key=\(DemoProject.serverKey)"), ("Content-Type", "application/json")]
        let group = [("project_id", DemoProject.senderID)] + key
        let refused: [(String, WireResponse)] = [
            ("create device", try c.post("/api/v1/devices", #"{"token":"made-while-failing","sender_id":"\#(DemoProject.senderID)"}"#)),
            ("subscribe", try c.post("/api/v1/devices/demo-android-1/topics/news")),
            ("iid subscribe", try c.request("POST", "/iid/v1/demo-android-1/rel/topics/sport", headers: key)),
            ("iid batch", try c.request("POST", "/iid/v1:batchAdd", headers: key,
                                        body: Array(#"{"to":"/topics/weather","registration_tokens":["demo-android-1","demo-ios-1"]}"#.utf8))),
            ("group", try c.request("POST", "/fcm/notification", headers: group,
                                    body: Array(#"{"operation":"create","notification_key_name":"g1","registration_ids":["demo-android-1"]}"#.utf8))),
            ("offline", try c.patch("/api/v1/devices/demo-android-1", #"{"online":false}"#)),
            ("online", try c.patch("/api/v1/devices/demo-android-2", #"{"online":true}"#)),
            ("unregister", try c.post("/api/v1/devices/demo-ios-1:unregister")),
            ("refresh", try c.post("/api/v1/devices/demo-android-1:refresh")),
            ("delete", try c.delete("/api/v1/devices/demo-android-2")),
            ("upstream", try c.post("/api/v1/devices/demo-android-1/upstream", #"{"data":{"hello":"world"}}"#)),
            ("project", try c.post("/api/v1/projects", #"{"sender_id":"555","server_keys":["key-555"],"apps":[{"app":"com.five","platform":"android"}]}"#)),
            ("send to a new token", try send(c, to: "new-while-failing")),
            ("topic send", try send(c, to: "/topics/news")),
            ("refused send", try c.request("POST", "/fcm/send", headers: key, body: Array(#"{"to":1}"#.utf8))),
            ("v1 send", try c.request("POST", "/v1/projects/demo-project/messages:send", headers: bearer,
                                      body: Array(#"{"message":{"token":"demo-android-2","data":{"v":"1"}}}"#.utf8))),
            ("v1 subscribe", try c.request("POST", "/v1/projects/demo-project/registrations/demo-android-1/topicSubscriptions?topic_name=v1news",
                                           headers: bearer)),
            ("service account", try c.post("/api/v1/projects/\(DemoProject.senderID)/service-accounts")),
            ("reset", try c.post("/api/v1/reset")),
        ]
        for (what, r) in refused { XCTAssertEqual(r.status, 500, "\(what): \(r.text)") }
        // The group API and HTTP v1 answer in their own shapes.
        XCTAssertEqual(refused[4].1.object?["error"]?.stringValue?.hasPrefix("the store failed"), true, refused[4].1.text)
        for (what, r) in refused where what.hasPrefix("v1 ") {
            XCTAssertEqual(r.object?["error"]?.objectValue?["status"]?.stringValue, "INTERNAL", "\(what): \(r.text)")
        }

        XCTAssertEqual(try c.get("/api/v1/devices/made-while-failing").status, 404)
        XCTAssertEqual(try c.get("/api/v1/devices/new-while-failing").status, 404)
        XCTAssertEqual(try c.get("/api/v1/topics/news").object?["count"]?.numberValue?.int64, 0)
        XCTAssertEqual(try c.get("/api/v1/topics/v1news").object?["count"]?.numberValue?.int64, 0)
        XCTAssertEqual(items(try c.get("/api/v1/projects/\(DemoProject.senderID)/service-accounts")).count, 1)
        XCTAssertEqual(try c.request("GET", "/fcm/notification?notification_key_name=g1", headers: group).status, 400)
        XCTAssertEqual(try c.get("/api/v1/projects/555").status, 404)
        // The refused project's key authenticates nothing.
        XCTAssertEqual(try c.request("POST", "/fcm/send", headers: [("Authorization", "key=key-555")],
                                     body: Array(#"{"to":"demo-android-1"}"#.utf8)).status, 401)
        XCTAssertEqual(try pending(c, "demo-android-2"), 1)
        assertSame(try snapshot(c), before, "after the refused writes")

        // Writes succeed again: the same calls now take.
        try refuseWrites(s, false)
        XCTAssertEqual(try c.post("/api/v1/devices/demo-android-1/topics/news").status, 200)
        XCTAssertEqual(try c.request("POST", "/fcm/notification", headers: group,
                                     body: Array(#"{"operation":"create","notification_key_name":"g1","registration_ids":["demo-android-1"]}"#.utf8)).status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices/demo-android-1/upstream", #"{"data":{"hello":"world"}}"#).status, 201)
        XCTAssertEqual(try send(c, to: "/topics/news").status, 200)
        try assertARestartShowsTheSame(s, c)
    }

    /// One write refused for its own reason (a constraint, not the storage): the store stays
    /// healthy, the send is answered 500, and memory reads back what the store holds, here a
    /// device the engine had not heard of.
    func testAConstraintFailureLeavesMemoryAsTheStoreHasIt() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        // A row only the store knows: the engine registers the token again on first use, and
        // the store refuses the second device with that token.
        try storeSQL(s, """
            INSERT INTO devices(id, token, sender_id, app, platform, state, canonical_id, online, created_at, last_seen_at, fid)
            VALUES (9999, 'only-in-the-store', '\(DemoProject.senderID)', 'com.example.demo', 'android', 'registered', NULL, 0,
                    1700000000000, 1700000000000, 'cAAAAAAAAAAAAAAAAAAAAA')
            """)
        XCTAssertEqual(try c.get("/api/v1/devices/only-in-the-store").status, 404)
        XCTAssertEqual(try send(c, to: "only-in-the-store").status, 500)
        let health = try c.get("/api/v1/health")
        XCTAssertEqual(health.status, 200, health.text)
        XCTAssertEqual(health.object?["store"]?.stringValue, "ok")
        let device = try c.get("/api/v1/devices/only-in-the-store")
        XCTAssertEqual(device.status, 200)
        XCTAssertEqual(device.object?["online"]?.boolValue, false)
        // And it works as the store's device from now on.
        XCTAssertEqual(try send(c, to: "only-in-the-store").status, 200)
        XCTAssertEqual(try pending(c, "only-in-the-store"), 1)
        try assertARestartShowsTheSame(s, c)
    }
}
