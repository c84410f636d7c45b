import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

@testable import FCMEngine
@testable import FCMServer

/// One project with an app and two devices (online, offline) per platform.
let platformsFixture = """
    {"projects": [{"sender_id": "111", "server_keys": ["key-111"],
        "apps": [{"app": "com.a", "platform": "android"}, {"app": "com.a.ios", "platform": "ios"},
                 {"app": "com.a.web", "platform": "web"}]}],
     "devices": [
       {"token": "and-on", "sender_id": "111", "app": "com.a"},
       {"token": "ios-on", "sender_id": "111", "app": "com.a.ios", "platform": "ios"},
       {"token": "web-on", "sender_id": "111", "app": "com.a.web", "platform": "web"},
       {"token": "and-off", "sender_id": "111", "app": "com.a", "online": false},
       {"token": "ios-off", "sender_id": "111", "app": "com.a.ios", "platform": "ios", "online": false},
       {"token": "web-off", "sender_id": "111", "app": "com.a.web", "platform": "web", "online": false}]}
    """

/// What each platform's device received (`effective` in the inbox) and the collapse key and TTL its
/// offline storage applied (docs/spec/fcm-v1.md section 5), over real HTTP and XMPP.
final class EffectiveDeliveryTests: ServerTestCase {
    let offline = ["and-off", "ios-off", "web-off"]

    override func setUpWithError() throws {
        server = try TestServer(fixtures: [platformsFixture])
        client = server.client()
    }

    override func tearDown() {
        // The clock is the process's: back to real time for the next test.
        _ = try? client?.post("/api/v1/clock", #"{"reset":true}"#)
        super.tearDown()
    }

    func inbox(_ token: String) throws -> [JSONObject] {
        items(try client.get("/api/v1/devices/\(token)/messages?limit=1000"))
    }

    func statuses(_ token: String) throws -> [String] {
        try inbox(token).compactMap { $0["status"]?.stringValue }
    }

    func multicast(_ tokens: [String], _ fields: String) throws {
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        let r = try client.sendJSON("{\"registration_ids\":[\(list)]\(fields.isEmpty ? "" : ",")\(fields)}")
        XCTAssertEqual(results(r).count, tokens.count)
        XCTAssertEqual(r.object?["success"]?.numberValue?.int64, Int64(tokens.count), r.text)
    }

    func testLegacySendShowsEachPlatformsForm() throws {
        try multicast(["and-on", "ios-on", "web-on"], #"""
            "collapse_key":"score","time_to_live":3600,"data":{"score":"3x1"},
            "notification":{"title":"Goal","body":"3x1","sound":"default","badge":"1","click_action":"SCORE"}
            """#)
        let entry = try XCTUnwrap(try inbox("ios-on").first)
        XCTAssertEqual(entry.keys, ["message_id", "status", "accepted_at", "delivered_at", "expires_at", "collapse_key", "priority",
                                    "via", "data", "notification", "effective"])
        let accepted = try XCTUnwrap(parseRFC3339(entry["accepted_at"]?.stringValue ?? ""))
        XCTAssertEqual(entry["expires_at"]?.stringValue, rfc3339(millis: accepted + 3_600_000))
        let notification = #"{"title":"Goal","body":"3x1","sound":"default","badge":"1","click_action":"SCORE"}"#
        XCTAssertEqual(entry["effective"]?.serialized(),
                       #"{"platform":"ios","apns":{"headers":{"apns-priority":"10","apns-expiration":"\#(accepted / 1000 + 3600)","apns-collapse-id":"score","apns-push-type":"alert"},"payload":{"aps":{"alert":{"title":"Goal","body":"3x1"},"badge":1,"sound":"default","category":"SCORE"},"score":"3x1"}}}"#)
        XCTAssertEqual(try inbox("and-on").first?["effective"]?.serialized(),
                       #"{"platform":"android","data":{"score":"3x1"},"notification":\#(notification),"collapse_key":"score","priority":"high","ttl_s":3600}"#)
        XCTAssertEqual(try inbox("web-on").first?["effective"]?.serialized(),
                       #"{"platform":"web","webpush":{"headers":{"TTL":"3600","Topic":"score","Urgency":"high"},"data":{"score":"3x1"},"notification":\#(notification)}}"#)
    }

    /// An Android app reads its data as strings: a legacy value that is none arrives as its JSON
    /// text (as over MCS); the entry's `data` stays the request's.
    func testLegacyDataThatIsNoStringReachesAndroidAsText() throws {
        try multicast(["and-on"], #""data":{"k":"v","n":5,"b":true,"o":{"x":1},"nul":null}"#)
        let entry = try XCTUnwrap(try inbox("and-on").first)
        XCTAssertEqual(entry["effective"]?.objectValue?["data"]?.serialized(), #"{"k":"v","n":"5","b":"true","o":"{\"x\":1}","nul":"null"}"#)
        XCTAssertEqual(entry["data"]?.serialized(), #"{"k":"v","n":5,"b":true,"o":{"x":1},"nul":null}"#)
    }

    func testLegacyBackgroundPushToIOS() throws {
        try multicast(["ios-on"], #""content_available":true,"data":{"sync":"1"}"#)
        let entry = try XCTUnwrap(try inbox("ios-on").first)
        let accepted = try XCTUnwrap(parseRFC3339(entry["accepted_at"]?.stringValue ?? ""))
        XCTAssertEqual(entry["effective"]?.serialized(),
                       #"{"platform":"ios","apns":{"headers":{"apns-priority":"5","apns-expiration":"\#(accepted / 1000 + 2_419_200)","apns-push-type":"background"},"payload":{"aps":{"content-available":1},"sync":"1"}}}"#)
    }

    /// Web devices come from `POST /api/v1/devices` as well as fixtures, and XMPP sends reach them.
    func testWebDeviceCreatedAndReachedOverXMPP() throws {
        let created = try client.post("/api/v1/devices", #"{"sender_id":"111","platform":"web"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual(created.object?["platform"]?.stringValue, "web")
        XCTAssertEqual(created.object?["app"]?.stringValue, "com.a.web", "the project's web app")
        let token = try XCTUnwrap(created.object?["token"]?.stringValue)
        XCTAssertEqual(try client.get("/api/v1/devices?sender_id=111").object?["items"]?.arrayValue?
            .filter { $0.objectValue?["platform"]?.stringValue == "web" }.count, 3)

        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111@fcm.googleapis.com", password: "key-111")
        c.sendDownstream("{\"to\":\"\(token)\",\"message_id\":\"m-1\",\"time_to_live\":60,\"data\":{\"k\":\"v\"}}")
        XCTAssertEqual(try XCTUnwrap(try c.nextGCM())["message_type"]?.stringValue, "ack")
        let entry = try XCTUnwrap(try inbox(token).first)
        XCTAssertEqual(entry["via"]?.objectValue?["transport"]?.stringValue, "xmpp")
        XCTAssertEqual(entry["effective"]?.serialized(),
                       #"{"platform":"web","webpush":{"headers":{"TTL":"60","Urgency":"normal"},"data":{"k":"v"},"notification":null}}"#)
    }

    /// A legacy `collapse_key` drives every platform alike: the same key collapses, a fifth key
    /// evicts the oldest, on Android, iOS and web devices.
    func testLegacyCollapseKeyOnEveryPlatform() throws {
        for i in 1...3 { try multicast(offline, "\"collapse_key\":\"score\",\"data\":{\"n\":\"\(i)\"}") }
        for k in ["k2", "k3", "k4", "k5"] { try multicast(offline, "\"collapse_key\":\"\(k)\"") }
        for t in offline {
            XCTAssertEqual(try statuses(t), ["collapsed", "collapsed", "dropped", "pending", "pending", "pending", "pending"], t)
            XCTAssertEqual(try client.get("/api/v1/devices/\(t)").object?["pending"]?.numberValue?.int64, 4, t)
        }
        XCTAssertEqual(try client.patch("/api/v1/devices/ios-off", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try statuses("ios-off"), ["collapsed", "collapsed", "dropped", "delivered", "delivered", "delivered", "delivered"])
    }

    func testHundredAndOneHeldOnIOSAndWebLeaveANotice() throws {
        for i in 1...101 { try multicast(["ios-off", "web-off"], "\"data\":{\"n\":\"\(i)\"}") }
        for t in ["ios-off", "web-off"] {
            let held = try inbox(t)
            XCTAssertEqual(held.prefix(101).filter { $0["status"]?.stringValue == "dropped" }.count, 101, t)
            XCTAssertEqual(held.last?["message_type"]?.stringValue, "deleted_messages", t)
            XCTAssertEqual(held.last?["effective"], .null, "a notice carries no payload")
        }
    }

    func testLegacyTTLOnEveryPlatform() throws {
        try multicast(offline, #""time_to_live":60,"data":{"k":"short"}"#)
        try multicast(offline, #""time_to_live":3600,"data":{"k":"long"}"#)
        try multicast(offline, #""time_to_live":0,"data":{"k":"now or never"}"#)
        for t in offline { XCTAssertEqual(try statuses(t), ["pending", "pending", "expired"], t) }
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":61}"#).status, 200)
        for t in offline { XCTAssertEqual(try statuses(t), ["expired", "pending", "expired"], t) }
    }

    /// A held message's collapse key survives a restart on every platform.
    func testHeldCollapseKeyAfterRestart() throws {
        let dir = try temporaryDirectory("effective")
        var first: TestServer? = try TestServer(fixtures: [platformsFixture], db: dir + "/s.sqlite")
        let c1 = first!.client()
        XCTAssertEqual(try c1.sendJSON(#"{"registration_ids":["ios-off","web-off"],"collapse_key":"score","data":{"n":"1"}}"#).status, 200)
        c1.disconnect()
        first?.stop()
        first = nil
        let second = try TestServer(fixtures: [platformsFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        defer { c2.disconnect() }
        XCTAssertEqual(try c2.sendJSON(#"{"registration_ids":["ios-off","web-off"],"collapse_key":"score","data":{"n":"2"}}"#).status, 200)
        for t in ["ios-off", "web-off"] {
            XCTAssertEqual(items(try c2.get("/api/v1/devices/\(t)/messages")).compactMap { $0["status"]?.stringValue }, ["collapsed", "pending"], t)
        }
    }
}
