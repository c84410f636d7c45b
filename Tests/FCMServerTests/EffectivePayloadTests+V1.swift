import APNs
import HTTPServer
import FCMCore
import FCMStore
import FCMTesting
import Foundation
import Platform
import XCTest

@testable import FCMEngine
@testable import FCMModel
@testable import FCMServer

/// A v1 send's platform blocks decide each platform's collapse key and TTL. v1 requests are handed
/// to the engine in-process (the send path both listeners share), as the v1 route will.
final class EffectiveV1EngineTests: XCTestCase {
    var server: TestServer!
    var client: HTTPTestClient!

    override func setUpWithError() throws {
        server = try TestServer(fixtures: [platformsFixture])
        client = server.client()
    }

    override func tearDown() {
        _ = try? client?.post("/api/v1/clock", #"{"reset":true}"#)
        client?.disconnect()
        server?.stop()
    }

    func object(_ json: String) -> JSONObject? { (try? JSONParser.parse(json))?.objectValue }

    /// Sends `req` as project 111 over `http_v1` and waits for the commit.
    func send(_ req: SendRequest, file: StaticString = #filePath, line: UInt = #line) throws {
        let outcome = Locked<Result<SendResult, StoreError>?>(nil)
        let done = expectation(description: "committed")
        server.app.engine.submit(Submission(req, sender: "111", transport: .httpV1, faultKey: "/v1/projects/111/messages:send")) { r in
            outcome.withLock { $0 = r }
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        let result = try XCTUnwrap(outcome.withLock { $0 }, file: file, line: line).get()
        XCTAssertEqual(result.failure, 0, file: file, line: line)
    }

    func v1(_ tokens: [String], n: Int, apnsHeaders: String, android: String = #"{"ttl":"120s"}"#,
            webpush: String = #"{"headers":{"Topic":"live","TTL":"30"}}"#) -> SendRequest {
        var r = SendRequest(format: .json, target: .multicast(tokens))
        r.data = JSONObject([("n", .string(String(n)))])
        r.platforms = PlatformConfigs(android: object(android), apns: object("{\"headers\":\(apnsHeaders)}"), webpush: object(webpush))
        return r
    }

    func inbox(_ token: String) throws -> [JSONObject] { items(try client.get("/api/v1/devices/\(token)/messages")) }
    func statuses(_ token: String) throws -> [String] { try inbox(token).compactMap { $0["status"]?.stringValue } }
    func expiresAt(_ entry: JSONObject?) -> Int64 { parseRFC3339(entry?["expires_at"]?.stringValue ?? "") ?? -1 }
    func acceptedAt(_ entry: JSONObject?) -> Int64 { parseRFC3339(entry?["accepted_at"]?.stringValue ?? "") ?? -1 }

    func testEachPlatformCollapsesAndExpiresByItsOwnBlock() throws {
        let expiration = server.app.engine.clock.nowMillis() / 1000 + 60
        let offline = ["and-off", "ios-off", "web-off"]
        for n in 1...2 {
            try send(v1(offline, n: n, apnsHeaders: "{\"apns-collapse-id\":\"game\",\"apns-expiration\":\"\(expiration)\"}"))
        }
        // apns-collapse-id collapses on iOS, Topic on the web; Android has no collapse key here.
        XCTAssertEqual(try statuses("and-off"), ["pending", "pending"])
        XCTAssertEqual(try statuses("ios-off"), ["collapsed", "pending"])
        XCTAssertEqual(try statuses("web-off"), ["collapsed", "pending"])
        for t in offline { XCTAssertEqual(try client.get("/api/v1/devices/\(t)").object?["pending"]?.numberValue?.int64, t == "and-off" ? 2 : 1) }

        // Each platform's TTL: android.ttl 120 s, apns-expiration 60 s ahead, webpush TTL 30 s.
        let android = try inbox("and-off").last, ios = try inbox("ios-off").last, web = try inbox("web-off").last
        XCTAssertEqual(expiresAt(android) - acceptedAt(android), 120_000)
        XCTAssertEqual(expiresAt(web) - acceptedAt(web), 30_000)
        XCTAssertEqual(expiresAt(ios) / 1000, expiration, "apns-expiration is when the held message expires")

        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":61}"#).status, 200)
        XCTAssertEqual(try statuses("and-off"), ["pending", "pending"])
        XCTAssertEqual(try statuses("ios-off"), ["collapsed", "expired"])
        XCTAssertEqual(try statuses("web-off"), ["collapsed", "expired"])
    }

    /// Each entry's `collapse_key` and `priority` are its device's: the Android form's, the APNs
    /// headers' on an iPhone, the Web Push headers' in a browser (not the Android form's on all).
    func testAnEntrysCollapseKeyAndPriorityAreItsPlatforms() throws {
        let offline = ["and-off", "ios-off", "web-off"]
        try send(v1(offline, n: 1, apnsHeaders: #"{"apns-collapse-id":"game","apns-priority":"5"}"#,
                    android: #"{"collapse_key":"score","priority":"high"}"#, webpush: #"{"headers":{"Topic":"live","Urgency":"high"}}"#))
        let entries = try offline.map { try XCTUnwrap(try inbox($0).last) }
        XCTAssertEqual(entries.map { $0["collapse_key"]?.stringValue }, ["score", "game", "live"])
        XCTAssertEqual(entries.map { $0["priority"]?.stringValue }, ["high", "normal", "high"])
        // A notification only in the android block is a notification message there: high by default.
        var r = SendRequest(format: .json, target: .token("and-off"))
        r.platforms = PlatformConfigs(android: object(#"{"notification":{"title":"AT"}}"#), apns: nil, webpush: nil)
        try send(r)
        let notified = try XCTUnwrap(try inbox("and-off").last)
        XCTAssertEqual(notified["priority"]?.stringValue, "high")
        XCTAssertEqual(notified["effective"]?.objectValue?["priority"]?.stringValue, "high")
    }

    /// A Web Push `TTL` over 4 weeks keeps the message 4 weeks, as a push service would.
    func testAWebTTLOverFourWeeksKeepsFourWeeks() throws {
        try send(v1(["web-off"], n: 1, apnsHeaders: "{}", webpush: #"{"headers":{"TTL":"9999999"}}"#))
        let entry = try XCTUnwrap(try inbox("web-off").last)
        XCTAssertEqual(expiresAt(entry) - acceptedAt(entry), 2_419_200_000)
    }

    func testApnsExpirationZeroIsNowOrNeverForIOSOnly() throws {
        try send(v1(["and-off", "ios-off", "ios-on", "web-off"], n: 1, apnsHeaders: #"{"apns-expiration":"0"}"#))
        XCTAssertEqual(try statuses("ios-off"), ["expired"], "an offline iOS device never sees it")
        XCTAssertEqual(try statuses("ios-on"), ["delivered"])
        XCTAssertEqual(try statuses("and-off"), ["pending"])
        XCTAssertEqual(try statuses("web-off"), ["pending"])
    }

    /// Four apns-collapse-ids held, a fifth evicts the oldest, while Android's one key does not.
    func testFiveApnsCollapseIDsEvictTheOldestOnIOS() throws {
        for k in 1...5 {
            try send(v1(["and-off", "ios-off"], n: k, apnsHeaders: "{\"apns-collapse-id\":\"c\(k)\"}", android: #"{"collapse_key":"same"}"#))
        }
        XCTAssertEqual(try statuses("ios-off"), ["dropped", "pending", "pending", "pending", "pending"])
        XCTAssertEqual(try statuses("and-off"), ["collapsed", "collapsed", "collapsed", "collapsed", "pending"])
    }

    /// What the inbox shows and a restart reads back come from the stored columns: the request is
    /// rebuilt from them, the held key from the stored platform blocks.
    func testStoredColumnsGiveTheSameAnswers() throws {
        let platforms = #"{"android":{"collapse_key":"a"},"apns":{"headers":{"apns-collapse-id":"i","apns-expiration":"1700000060"}},"webpush":{"headers":{"Topic":"w"}},"fcm_options":null}"#
        let req = SendRequest.stored(data: #"{"k":"v"}"#, notification: #"{"title":"T"}"#, collapseKey: "a", timeToLive: 2_419_200,
                                     flags: 2, priority: "high", platforms: platforms, acceptedAtMillis: 1_700_000_000_500,
                                     blocks: RecordBlocks(APNsRoom.recordBlocks))
        XCTAssertEqual(JSONValue.object(EffectivePayload.payload(req, for: .ios, acceptedAtMillis: 1_700_000_000_500)).serialized(),
                       #"{"platform":"ios","apns":{"headers":{"apns-priority":"10","apns-expiration":"1700000060","apns-collapse-id":"i","apns-push-type":"alert"},"payload":{"aps":{"alert":{"title":"T"},"mutable-content":1},"k":"v"}}}"#)
        var keys = HeldCollapseKeys(blocks: RecordBlocks(APNsRoom.recordBlocks))
        let held = HeldDelivery(id: 1, device: 1, message: 1, collapseKey: "a", expiresAt: 0, isNotice: false, platforms: platforms)
        XCTAssertEqual(keys.key(held, platform: .ios), "i")
        XCTAssertEqual(keys.key(held, platform: .web), "w")
        XCTAssertEqual(keys.key(held, platform: .android), "a")
        var legacy = held
        (legacy.message, legacy.platforms) = (2, nil)
        XCTAssertEqual(keys.key(legacy, platform: .ios), "a", "a legacy send's key is every platform's")
    }
}
