import FCMCore
import FCMTesting
import HTTPServer
import Foundation
import TLS
import XCTest

/// Apple's store-and-forward on the fake iOS device (docs/spec/apns.md section 5), through the
/// real server over h2c: only the newest APNs notification per app is held offline, expiration
/// on the mock's moved clock, 0 never stored, collapse ids replacing what the phone shows, and
/// FCM messages to the same device under FCM's rules.
extension APNsTests {
    /// The statuses of the demo iPhone's inbox, oldest first.
    func inboxStatuses() throws -> [String] {
        items(try server.client().get("/api/v1/devices/demo-ios-1/messages")).compactMap { $0["status"]?.stringValue }
    }

    /// The APNs records, oldest first.
    func apnsRecords() throws -> [JSONObject] {
        items(try server.client().get("/api/v1/messages?transport=apns")).reversed()
    }

    func setOnline(_ online: Bool) throws {
        XCTAssertEqual(try server.client().patch("/api/v1/devices/demo-ios-1", #"{"online":\#(online)}"#).status, 200)
    }

    func testOfflineTheNewestAPNsNotificationReplacesTheHeldOneAndFCMKeepsItsRules() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        try setOnline(false)
        // An FCM message held first: APNs's rule leaves it alone.
        XCTAssertEqual(try c.sendJSON(#"{"to":"demo-ios-1","notification":{"title":"fcm"}}"#, key: DemoProject.serverKey).status, 200)
        XCTAssertEqual(try send(path: "/3/device/\(token)", body: #"{"aps":{"alert":"one"}}"#).status, 200)
        XCTAssertEqual(try send(path: "/3/device/\(token)", body: #"{"aps":{"alert":"two"}}"#).status, 200)
        XCTAssertEqual(try inboxStatuses(), ["pending", "replaced", "pending"])
        let records = try apnsRecords()
        XCTAssertEqual(records.count, 2)
        XCTAssertEqual(records[0]["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "replaced", "\(records[0])")
        let replaced = items(try c.get("/api/v1/messages?status=replaced"))
        XCTAssertEqual(replaced.map { $0["message_id"]?.stringValue }, [records[0]["message_id"]?.stringValue])
        XCTAssertEqual(try c.get("/api/v1/devices/demo-ios-1/messages?status=replaced").object?["items"]?.arrayValue?.count, 1)
        // Back online: the FCM message and the newest APNs one are delivered; the replaced one stays so.
        try setOnline(true)
        XCTAssertEqual(try inboxStatuses(), ["delivered", "replaced", "delivered"])
    }

    func testTheReplacedEventNamesTheOlderNotification() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        try setOnline(false)
        XCTAssertEqual(try send(path: "/3/device/\(token)", body: #"{"aps":{"alert":"one"}}"#).status, 200)
        let first = try XCTUnwrap(try apnsRecords().last?["message_id"]?.stringValue)
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? c.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64) != 1 {}
        XCTAssertEqual(try send(path: "/3/device/\(token)", body: #"{"aps":{"alert":"two"}}"#).status, 200)
        var replaced: JSONObject?
        while let e = try sse.next(timeout: 5) {
            if e.event == "message.replaced" {
                replaced = try JSONParser.parse(e.data).objectValue
                break
            }
        }
        XCTAssertEqual(replaced?["message_id"]?.stringValue, first)
        XCTAssertEqual(replaced?["status"]?.stringValue, "replaced")
        XCTAssertEqual(replaced?["token"]?.stringValue, "demo-ios-1")
    }

    func testExpirationRunsOnTheMovedClockAndZeroIsNeverStored() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        try setOnline(false)
        let now = Int64(Date().timeIntervalSince1970)
        XCTAssertEqual(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-expiration", String(now + 600))]).status, 200)
        // Deliver now or never: not held, so it replaces nothing.
        XCTAssertEqual(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-expiration", "0")]).status, 200)
        XCTAssertEqual(try inboxStatuses(), ["pending", "expired"])
        XCTAssertEqual(try c.get("/api/v1/devices/demo-ios-1").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":300}"#).status, 200)
        XCTAssertEqual(try inboxStatuses(), ["pending", "expired"], "not due yet")
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":301}"#).status, 200)
        XCTAssertEqual(try inboxStatuses(), ["expired", "expired"])
        XCTAssertEqual(try apnsRecords().first?["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "expired")
        // One expiring later than the clock now reads is held; online it is delivered.
        let later = now + 601 + 3600
        XCTAssertEqual(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-expiration", String(later))]).status, 200)
        try setOnline(true)
        XCTAssertEqual(try inboxStatuses(), ["expired", "expired", "delivered"])
        // Online, expiration 0 is delivered at once.
        XCTAssertEqual(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-expiration", "0")]).status, 200)
        XCTAssertEqual(try inboxStatuses().last, "delivered")
    }

    func testACollapseIDReplacesWhatThePhoneShows() throws {
        let token = try apnsToken(of: "demo-ios-1")
        func send(_ collapse: String) throws {
            XCTAssertEqual(try self.send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-collapse-id", collapse)]).status, 200)
        }
        try send("score")
        try send("score")
        try send("news")
        XCTAssertEqual(try inboxStatuses(), ["replaced", "delivered", "delivered"])
        // Held while offline, it replaces the one shown when it reaches the phone.
        try setOnline(false)
        try send("score")
        XCTAssertEqual(try inboxStatuses(), ["replaced", "delivered", "delivered", "pending"])
        try setOnline(true)
        XCTAssertEqual(try inboxStatuses(), ["replaced", "replaced", "delivered", "delivered"])
        // An FCM message with the same collapse key keeps FCM's rules: shown beside it.
        XCTAssertEqual(try server.client().sendJSON(#"{"to":"demo-ios-1","collapse_key":"score","notification":{"title":"x"}}"#,
                                                    key: DemoProject.serverKey).status, 200)
        XCTAssertEqual(try inboxStatuses(), ["replaced", "replaced", "delivered", "delivered", "delivered"])
    }

    func testAHeldAPNsNotificationIsStillApplesAfterARestart() throws {
        let db = NSTemporaryDirectory() + "apns-held-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: db) }
        server.stop()
        server = try TestServer(db: db, unknownTokens: "reject")
        let made = try server.client().post("/api/v1/apns/keys", #"{"team_id":"\#(team)","bundle_ids":["\#(topic)"]}"#)
        let o = try XCTUnwrap(JSONParser.parse(Array(made.text.utf8)).objectValue)
        keyID = try XCTUnwrap(o["key_id"]?.stringValue)
        key = try P256PrivateKey(pem: try XCTUnwrap(o["private_key_pem"]?.stringValue))
        let token = try apnsToken(of: "demo-ios-1")
        try setOnline(false)
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        server.stop()
        server = try TestServer(db: db, unknownTokens: "reject")
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        XCTAssertEqual(try inboxStatuses(), ["replaced", "pending"], "the held one was read back as APNs's")
    }
}
