import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import XCTest

/// Every row of the v1 error table (docs/spec/fcm-v1.md section 2), byte for byte, with what
/// the records keep of each refusal.
final class V1ErrorTests: V1TestCase {
    override func configure(_ c: inout Configuration) { c.maxBodyBytes = 8192 }

    func testTheTableRowsOfRecipients() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        assertV1(try v1Send(#"{"message":{"token":"a2"}}"#), 404, V1Body.unregistered)
        assertV1(try v1Send(#"{"message":{"token":"b1"}}"#), 403, V1Body.senderMismatch)
        assertV1(try v1Send(#"{"message":{"token":"ios-nocred","notification":{"title":"t"}}}"#), 401,
                 V1Body.error(401, "Auth error from APNS or Web Push Service", "UNAUTHENTICATED", fcm: "THIRD_PARTY_AUTH_ERROR"))
        let invalidToken = "The registration token is not a valid FCM registration token"
        assertV1(try v1Send(#"{"message":{"token":"not a token!"}}"#), 400,
                 V1Body.error(400, invalidToken, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT", violations: [("message.token", "Invalid registration token")]))
        let package = "The restricted_package_name does not match the app of the registration token"
        assertV1(try v1Send(#"{"message":{"token":"a1","android":{"restricted_package_name":"com.other"}}}"#), 400,
                 V1Body.error(400, package, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT",
                              violations: [("message.android.restricted_package_name", package)]))
        // A device group's notification key is no registration token over v1.
        let group = try client.request("POST", "/fcm/notification", headers: [
            ("Authorization", "key=key-111"), ("project_id", "111"), ("Content-Type", "application/json")],
            body: Array(#"{"operation":"create","notification_key_name":"g","registration_ids":["a1"]}"#.utf8))
        let key = try XCTUnwrap(group.object?["notification_key"]?.stringValue)
        assertV1(try v1Send(#"{"message":{"token":"\#(key)"}}"#), 400,
                 V1Body.error(400, invalidToken, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT", violations: [("message.token", "Invalid registration token")]))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0, "the group's member got nothing")
        // Records keep the FcmError code.
        let errors = items(try client.get("/api/v1/messages?transport=http_v1")).map { $0["error"]?.stringValue }
        XCTAssertEqual(errors, ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "THIRD_PARTY_AUTH_ERROR",
                                "SENDER_ID_MISMATCH", "UNREGISTERED"])
        let recipient = items(try client.get("/api/v1/messages?transport=http_v1")).last?["recipients"]?.arrayValue?.first?.objectValue
        XCTAssertEqual(recipient?["error"]?.stringValue, "UNREGISTERED")
        // `http_status` is what the sender was answered, recipient errors included.
        let statuses = items(try client.get("/api/v1/messages?transport=http_v1")).map { $0["http_status"]?.numberValue?.int64 }
        XCTAssertEqual(statuses, [400, 400, 400, 401, 403, 404])
    }

    func testTheParsersRefusalsAreRecorded() throws {
        let bad = try v1Send(#"{"message":{"token":"a1","android":{"ttl":"-1s"}}}"#)
        XCTAssertEqual(bad.status, 400)
        let o = try XCTUnwrap(bad.object?["error"]?.objectValue)
        XCTAssertEqual(o.keys, ["code", "message", "status", "details"])
        XCTAssertEqual(o["status"]?.stringValue, "INVALID_ARGUMENT")
        let details = o["details"]?.arrayValue?.compactMap(\.objectValue) ?? []
        XCTAssertEqual(details.first.map { JSONValue.object($0).serialized() }, #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}"#)
        XCTAssertEqual(details.last?["fieldViolations"]?.arrayValue?.first?.objectValue?["field"]?.stringValue, "message.android.ttl")
        // Not the Message JSON: no FcmError detail.
        let unknown = try v1Send(#"{"message":{"token":"a1","android":{"foo":1}}}"#)
        assertV1(unknown, 400, V1Body.error(400, #"Invalid JSON payload received. Unknown name \"foo\" at 'message.android': Cannot find field."#,
                                            "INVALID_ARGUMENT", violations: [("message.android", #"Invalid JSON payload received. Unknown name \"foo\" at 'message.android': Cannot find field."#)]))
        // A wrongly typed value: the same kind of error, its violation at the value's path.
        let typed = "Invalid value at 'message.data[0].value' (TYPE_STRING), 1"
        assertV1(try v1Send(#"{"message":{"token":"a1","data":{"k":1}}}"#), 400,
                 V1Body.error(400, typed, "INVALID_ARGUMENT", violations: [("message.data[0].value", typed)]))
        let malformed = try v1Send("{broken")
        XCTAssertEqual(malformed.status, 400)
        XCTAssertTrue(malformed.object?["error"]?.objectValue?["message"]?.stringValue?.hasPrefix("Invalid JSON payload received.") ?? false)
        XCTAssertNil(malformed.object?["error"]?.objectValue?["details"])
        let records = items(try client.get("/api/v1/messages?status=rejected"))
        XCTAssertEqual(records.map { $0["error"]?.stringValue }, ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT"])
        XCTAssertEqual(records.map { $0["http_status"]?.numberValue?.int64 }, [400, 400, 400, 400])
        XCTAssertEqual(records[1]["raw_body"]?.stringValue, #"{"message":{"token":"a1","data":{"k":1}}}"#)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        XCTAssertEqual(records.last?["raw_body"]?.stringValue, #"{"message":{"token":"a1","android":{"ttl":"-1s"}}}"#)
        XCTAssertEqual(records.last?["sender_id"]?.stringValue, "111")
    }

    func testPathsMethodsAndSizes() throws {
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#, project: "no-such-project"), 404, V1Body.notFound)
        let get = try client.request("GET", "/v1/projects/demo-a/messages:send", headers: [("Authorization", "Bearer \(tokenA)")])
        assertV1(get, 405, V1Body.error(405, "Method GET is not allowed here: use POST.", "UNIMPLEMENTED"))
        XCTAssertEqual(get.headers["allow"], "POST")
        assertV1(try v1Request("POST", "/v1/projects/demo-a/nothing"), 404, V1Body.notFound)
        let big = #"{"message":{"token":"a1","data":{"k":""# + String(repeating: "x", count: 9000) + #""}}}"#
        assertV1(try v1Send(big), 400, V1Body.error(400, "Request payload size exceeds the limit: 8192 bytes.", "INVALID_ARGUMENT"))
    }

    func testFaultsAnswerInTheV1Shape() throws {
        func fault(_ json: String) throws {
            XCTAssertEqual(try client.post("/api/v1/faults", json).status, 201)
        }
        let unavailable = V1Body.error(503, "The service is currently unavailable.", "UNAVAILABLE", fcm: "UNAVAILABLE")
        try fault(#"{"when":{"transport":"http_v1"},"then":{"status":503,"retry_after_s":7},"times":1}"#)
        let r503 = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(r503, 503, unavailable)
        XCTAssertEqual(r503.headers["retry-after"], "7")
        try fault(#"{"then":{"status":503},"times":1}"#)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).headers["retry-after"], "10", "a 503 always says when to retry")
        try fault(#"{"then":{"status":500},"times":1}"#)
        let r500 = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(r500, 500, V1Body.error(500, "Internal error encountered.", "INTERNAL", fcm: "INTERNAL"))
        XCTAssertNil(r500.headers["retry-after"])
        // Every status keeps the Retry-After its fault names (as the legacy answer does).
        try fault(#"{"then":{"status":500,"retry_after_s":5},"times":1}"#)
        let r500Retry = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(r500Retry, 500, V1Body.error(500, "Internal error encountered.", "INTERNAL", fcm: "INTERNAL"))
        XCTAssertEqual(r500Retry.headers["retry-after"], "5")
        let quota = V1Body.error(429, "Quota exceeded for the project's message rate.", "RESOURCE_EXHAUSTED", fcm: "QUOTA_EXCEEDED")
        try fault(#"{"then":{"status":429},"times":1}"#)
        let r429 = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(r429, 429, quota)
        XCTAssertNil(r429.headers["retry-after"])
        try fault(#"{"then":{"status":429,"retry_after_s":30},"times":1}"#)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).headers["retry-after"], "30")
        try fault(#"{"then":{"status":504},"times":1}"#)
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#), 504, V1Body.error(504, "The service answered HTTP 504.", "DEADLINE_EXCEEDED"))
        // Error faults fail the recipient: answered as the whole request's error.
        try fault(#"{"when":{"token":"a1"},"then":{"error":"Unavailable"},"times":1}"#)
        let failed = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(failed, 503, unavailable)
        try fault(#"{"then":{"error":"InternalServerError"},"times":1}"#)
        assertV1(try v1Send(#"{"message":{"topic":"news"}}"#), 500, V1Body.error(500, "Internal error encountered.", "INTERNAL", fcm: "INTERNAL"))
        // v1's own FcmError names, with the v1 transport, stand for the same errors.
        try fault(#"{"when":{"transport":"http_v1","token":"a1"},"then":{"error":"UNAVAILABLE"},"times":1}"#)
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#), 503, unavailable)
        try fault(#"{"when":{"transport":"http_v1"},"then":{"error":"UNREGISTERED"},"times":1}"#)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 404)
        let elsewhere = try client.post("/api/v1/faults", #"{"then":{"error":"QUOTA_EXCEEDED"}}"#)
        XCTAssertEqual(elsewhere.status, 400)
        XCTAssertTrue(elsewhere.text.contains("set when.transport to http_v1"), elsewhere.text)
        let unknown = try client.post("/api/v1/faults", #"{"then":{"error":"NOPE"}}"#)
        XCTAssertTrue(unknown.text.contains("HTTP v1's FcmErrors (INTERNAL, INVALID_ARGUMENT"), unknown.text)
        // A legacy fault does not touch v1, nor a v1 fault legacy.
        try fault(#"{"when":{"transport":"http"},"then":{"status":500},"times":1}"#)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 200)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#).status, 500)
        try fault(#"{"when":{"transport":"http_v1"},"then":{"status":500},"times":1}"#)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#).status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 500)
        // A dropped connection answers nothing.
        try fault(#"{"when":{"transport":"http_v1"},"then":{"close_connection":true},"times":1}"#)
        XCTAssertThrowsError(try v1Send(#"{"message":{"token":"a1"}}"#))
        client = server.client()
        let records = items(try client.get("/api/v1/messages?transport=http_v1&status=rejected&limit=3"))
        XCTAssertEqual(records.map { $0["error"]?.stringValue }, ["ConnectionClosed", "INTERNAL", "UNREGISTERED"])
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"smtp"},"then":{"status":500}}"#).status, 400)
    }

    func testADelayFaultDelaysARefusalToo() throws {
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"http_v1"},"then":{"delay_ms":300},"times":2}"#).status, 201)
        var start = Date()
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.29)
        start = Date()
        XCTAssertEqual(try v1Send(#"{"message":{}}"#).status, 400)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.29)
    }
}

/// The engine's rate limits over v1: 429 QUOTA_EXCEEDED without `Retry-After`.
final class V1RateLimitTests: V1TestCase {
    override var serverArguments: [String] { ["--device-rate", "2/1m", "--topic-rate", "1/1m"] }

    func testDeviceAndTopicRatesAreQuotaExceeded() throws {
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#).status, 200)
        let device = try v1Send(#"{"message":{"token":"a1"}}"#)
        assertV1(device, 429, V1Body.error(429, "Message rate exceeded for this device.", "RESOURCE_EXHAUSTED", fcm: "QUOTA_EXCEEDED"))
        XCTAssertNil(device.headers["retry-after"])
        XCTAssertEqual(try v1Send(#"{"message":{"topic":"news"}}"#).status, 200)
        let topic = try v1Send(#"{"message":{"topic":"news"}}"#)
        assertV1(topic, 429, V1Body.error(429, "Message rate exceeded for this topic.", "RESOURCE_EXHAUSTED", fcm: "QUOTA_EXCEEDED"))
        XCTAssertNil(topic.headers["retry-after"])
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=rejected")).map { $0["error"]?.stringValue },
                       ["QUOTA_EXCEEDED", "QUOTA_EXCEEDED"])
    }
}
