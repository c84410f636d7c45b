import FCMCore
@testable import APNs
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// The reasons the first APNs tests do not reach by a request of their own: a body that is not a
/// JSON object (accepted, recorded as undeliverable), and every reason of Apple's as a fault's
/// `then.error`, each answered with its status and exact body, through the real server.
extension APNsTests {
    func testAPayloadThatIsNotAJSONObjectIsAcceptedAndRecordedAsUndeliverable() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        for body in ["not json at all", "[1,2,3]", #""a string""#] {
            let a = try send(path: "/3/device/\(token)", body: body)
            XCTAssertEqual(a.status, 200, a.body)
            XCTAssertEqual(a.body, "")
            let record = try XCTUnwrap(items(try c.get("/api/v1/messages?transport=apns&limit=1")).first)
            XCTAssertEqual(record["status"]?.stringValue, "accepted", "\(record)")
            XCTAssertEqual(record["raw_body"]?.stringValue, body, "the body as received: \(record)")
            XCTAssertEqual(record["error_detail"]?.stringValue, "undeliverable: payload is not a JSON object", "\(record)")
            XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "undeliverable", "\(record)")
            // No payload made up: the apns block keeps the body as sent.
            let apns = try XCTUnwrap(record["apns"]?.objectValue)
            XCTAssertEqual(apns["payload"], .null, "\(apns)")
            XCTAssertEqual(apns["raw_body"]?.stringValue, body)
            XCTAssertNil(apns["body_base64"])
        }
        let inbox = items(try c.get("/api/v1/devices/demo-ios-1/messages"))
        XCTAssertEqual(inbox.compactMap { $0["status"]?.stringValue }, ["undeliverable", "undeliverable", "undeliverable"])
        let entry = try XCTUnwrap(inbox.first)
        XCTAssertEqual(entry["error_detail"]?.stringValue, "undeliverable: payload is not a JSON object", "\(entry)")
        let effective = try XCTUnwrap(entry["effective"]?.objectValue?["apns"]?.objectValue)
        XCTAssertEqual(effective["payload"], .null, "\(effective)")
        XCTAssertEqual(effective["raw_body"]?.stringValue, "not json at all")
        XCTAssertEqual(effective["headers"]?.objectValue?["apns-topic"]?.stringValue, topic)
        XCTAssertEqual(items(try c.get("/api/v1/devices/demo-ios-1/messages?status=undeliverable")).count, 3)
        XCTAssertEqual(items(try c.get("/api/v1/messages?transport=apns")).count, 3, "each recorded once")
        XCTAssertEqual(items(try c.get("/api/v1/messages?status=undeliverable")).count, 3)

        // Bytes that are not UTF-8: kept as base64, and no text made of them.
        let file = NSTemporaryDirectory() + "apns-binary-\(UUID().uuidString)"
        try Data([0x61, 0x62, 0xFF, 0xFE, 0x00, 0x7B]).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let r = try runProcess(try HTTP2Tests.tool("curl"), [
            "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-H", "authorization: bearer \(try self.token())",
            "-H", "apns-topic: \(topic)", "--data-binary", "@\(file)", "http://127.0.0.1:\(server.port)/3/device/\(token)"])
        XCTAssertEqual(r.stdout, "200", r.stderr)
        let record = try XCTUnwrap(items(try c.get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertNil(record["raw_body"], "\(record)")
        XCTAssertEqual(record["apns"]?.objectValue?["body_base64"]?.stringValue, "YWL//gB7")
        XCTAssertEqual(record["apns"]?.objectValue?["payload"], .null)
        XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "undeliverable")
        let newest = try XCTUnwrap(items(try c.get("/api/v1/devices/demo-ios-1/messages?order=newest&limit=1")).first)
        XCTAssertEqual(newest["effective"]?.objectValue?["apns"]?.objectValue?["body_base64"]?.stringValue, "YWL//gB7")
    }

    func testEveryAppleReasonIsAFaultsError() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        let seen = try XCTUnwrap(c.get("/api/v1/devices/demo-ios-1").object?["last_seen_at"]?.stringValue)
        for reason in APNsReason.allCases {
            let made = try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"error":"\#(reason.rawValue)"},"times":1}"#)
            XCTAssertEqual(made.status, 201, made.text)
            let a = try send(path: "/3/device/\(token)")
            if reason == .unregistered {
                XCTAssertEqual(a.status, 410)
                XCTAssertEqual(a.body, #"{"reason":"Unregistered","timestamp":\#(try XCTUnwrap(parseRFC3339(seen)))}"#)
            } else {
                assertReason(a, reason.status, reason.rawValue)
            }
            let record = try XCTUnwrap(items(try c.get("/api/v1/messages?transport=apns&limit=1")).first)
            XCTAssertEqual(record["error"]?.stringValue, reason.rawValue)
            XCTAssertEqual(record["http_status"], .number(JSONNumber(Int64(reason.status))))
            XCTAssertNotNil(record["fault"]?.stringValue, "\(record)")
        }
        XCTAssertEqual(items(try c.get("/api/v1/faults")).count, 0, "each fired once")
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        // An FCM name keeps its mapping; a reason only Apple has needs when.transport apns.
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"error":"Unavailable"},"times":1}"#).status, 201)
        assertReason(try send(path: "/3/device/\(token)"), 500, "InternalServerError")
        let refused = try c.post("/api/v1/faults", #"{"then":{"error":"BadDeviceToken"}}"#)
        XCTAssertEqual(refused.status, 400)
        XCTAssertTrue(refused.text.contains("set when.transport to apns"), refused.text)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"error":"NoSuchReason"}}"#).status, 400)
        let listed = try c.post("/api/v1/faults", #"{"when":{"transport":"apns","token":"demo-ios-1"},"then":{"error":"DeviceTokenNotForTopic"}}"#)
        XCTAssertTrue(listed.text.contains(#""then":{"error":"DeviceTokenNotForTopic"}"#), listed.text)
        assertReason(try send(path: "/3/device/\(token)"), 400, "DeviceTokenNotForTopic")
    }

    func testATokenPastItsExpiryIsExpiredTokenOnTheMovedClock() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        let at = rfc3339(millis: (Int64(Date().timeIntervalSince1970) + 3600) * 1000)
        let set = try c.patch("/api/v1/devices/demo-ios-1", #"{"expires_at":"\#(at)"}"#)
        XCTAssertEqual(set.status, 200, set.text)
        XCTAssertEqual(set.object?["expires_at"]?.stringValue, at)
        XCTAssertEqual(set.object?["online"], .bool(true), "online untouched")
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        // A provider token issued on the moved clock.
        let later: String?? = .some("bearer " + (try self.token(iat: Int64(Date().timeIntervalSince1970) + 3601)))
        let expired = try send(path: "/3/device/\(token)", authorization: later)
        assertReason(expired, 410, "ExpiredToken")
        let record = try XCTUnwrap(items(try c.get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(record["error"]?.stringValue, "ExpiredToken")
        XCTAssertEqual(record["http_status"], .number(JSONNumber(410)))
        // Unregistered comes first; cleared, the token works again.
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-ios-1", #"{"expires_at":null,"online":false}"#).object?["expires_at"], .null)
        XCTAssertEqual(try send(path: "/3/device/\(token)", authorization: later).status, 200)
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-1", #"{"expires_at":"\#(at)"}"#).status, 400)
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-ios-1", #"{"expires_at":"tomorrow"}"#).status, 400)
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-ios-1", "{}").status, 400)
        // Kept in the store across a restart.
        let db = NSTemporaryDirectory() + "apns-expiry-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: db) }
        var s = try TestServer(db: db)
        XCTAssertEqual(try s.client().patch("/api/v1/devices/demo-ios-1", #"{"expires_at":"\#(at)"}"#).status, 200)
        s.stop()
        s = try TestServer(db: db)
        defer { s.stop() }
        XCTAssertEqual(try s.client().get("/api/v1/devices/demo-ios-1").object?["expires_at"]?.stringValue, at)
    }
}
