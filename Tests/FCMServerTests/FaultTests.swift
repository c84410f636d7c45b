import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// Injected faults and rate limits (issue 3), each with its exact wire answer.
final class FaultTests: ServerTestCase {
    @discardableResult
    func addFault(_ json: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try client.post("/api/v1/faults", json)
        XCTAssertEqual(r.status, 201, r.text, file: file, line: line)
        return r.object?["id"]?.stringValue ?? ""
    }

    func testStatusFaultAnswersTheWholeRequestWithRetryAfter() throws {
        let id = try addFault(#"{"then":{"status":503,"retry_after_s":10},"times":1}"#)
        let r = try client.sendJSON(#"{"to":"a1"}"#)
        XCTAssertEqual(r.status, 503)
        XCTAssertEqual(r.headers["retry-after"], "10")
        XCTAssertEqual(r.text, "Service Unavailable\n")
        // times: 1 → the next request is normal again, and the fault is gone.
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertEqual(items(try client.get("/api/v1/faults")).count, 0)
        // Used up, not unknown: a clean-up's DELETE of it succeeds (once).
        XCTAssertEqual(try client.delete("/api/v1/faults/\(id)").status, 204)
        XCTAssertEqual(try client.delete("/api/v1/faults/\(id)").status, 404)
        XCTAssertEqual(try client.delete("/api/v1/faults/f999").status, 404)
        let rec = items(try client.get("/api/v1/messages?status=rejected")).first
        XCTAssertEqual(rec?["fault"]?.stringValue, id)
        XCTAssertEqual(rec?["http_status"]?.numberValue?.int64, 503)
        // A 503 without `retry_after_s` still says when to come back (10 s), in JSON and plain text.
        try addFault(#"{"then":{"status":503},"times":2}"#)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#).headers["retry-after"], "10")
        XCTAssertEqual(try client.sendPlain("registration_id=a1").headers["retry-after"], "10")
        // 500 without Retry-After; plain-text requests get the same status.
        try addFault(#"{"then":{"status":500}}"#)
        let plain = try client.sendPlain("registration_id=a1")
        XCTAssertEqual(plain.status, 500)
        XCTAssertNil(plain.headers["retry-after"])
    }

    func testErrorFaultFailsOnlyTheMatchingRecipient() throws {
        let id = try addFault(#"{"when":{"token":"a2"},"then":{"error":"Unavailable"}}"#)
        let r = try client.sendJSON(#"{"registration_ids":["a1","a2"],"data":{"k":"v"}}"#)
        let res = results(r)
        XCTAssertTrue(isMessageID(res[0]["message_id"]?.stringValue), "the other recipient is accepted and kept")
        XCTAssertEqual(res[1]["error"]?.stringValue, "Unavailable")
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 1)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a2/messages")).count, 0)
        let rec = try client.get("/api/v1/messages/\(pathEncode(res[0]["message_id"]!.stringValue!))").object
        XCTAssertEqual(rec?["fault"]?.stringValue, id)
        XCTAssertEqual(rec?["recipients"]?.arrayValue?[1].objectValue?["fault"]?.stringValue, id)
        // Plain text: Unavailable is HTTP 503, InternalServerError HTTP 500 (the body cannot say retry).
        let unavailable = try client.sendPlain("registration_id=a2")
        XCTAssertEqual(unavailable.status, 503)
        XCTAssertEqual(unavailable.headers["retry-after"], "10")
        XCTAssertEqual(try client.delete("/api/v1/faults/\(id)").status, 204)
        try addFault(#"{"then":{"error":"InternalServerError"},"times":1}"#)
        XCTAssertEqual(try client.sendPlain("registration_id=a1").status, 500)
        try addFault(#"{"then":{"error":"DeviceMessageRateExceeded"},"times":1}"#)
        XCTAssertEqual(try client.sendPlain("registration_id=a1").text, "Error=DeviceMessageRateExceeded\n")
        for name in ["TopicsMessageRateExceeded", "NotRegistered", "InvalidRegistration", "MismatchSenderId"] {
            try addFault("{\"then\":{\"error\":\"\(name)\"},\"times\":1}")
            XCTAssertEqual(singleError(try client.sendJSON(#"{"to":"a1"}"#)), name)
        }
    }

    func testDelayAndCloseConnection() throws {
        try addFault(#"{"then":{"delay_ms":300},"times":1}"#)
        let start = Date()
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.3)
        try addFault(#"{"when":{"transport":"http","path":"/fcm/send"},"then":{"close_connection":true},"times":1}"#)
        XCTAssertThrowsError(try client.sendJSON(#"{"to":"a1"}"#), "the connection is dropped without an answer")
        XCTAssertFalse(client.isConnected)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)), "a new connection works")
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=rejected")).first?["error"]?.stringValue, "ConnectionClosed")
    }

    func testWhenMatching() throws {
        try addFault(#"{"when":{"sender_id":"222"},"then":{"status":503}}"#)
        try addFault(#"{"when":{"transport":"xmpp"},"then":{"status":500}}"#)
        try addFault(#"{"when":{"path":"/gcm/send"},"then":{"status":502}}"#)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)), "no fault matches sender 111 over HTTP on /fcm/send")
        XCTAssertEqual(try client.sendJSON(#"{"to":"b1"}"#, key: "key-222").status, 503)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, path: "/gcm/send").status, 502)
        let list = items(try client.get("/api/v1/faults"))
        XCTAssertEqual(list.map { $0["fired"]?.numberValue?.int64 }, [1, 0, 1])
        // Paged like every list.
        let first = try client.get("/api/v1/faults?limit=2")
        XCTAssertEqual(items(first).map { $0["fired"]?.numberValue?.int64 }, [1, 0])
        let next = try XCTUnwrap(first.object?["next"]?.stringValue)
        let second = try client.get("/api/v1/faults?limit=2&cursor=\(next)")
        XCTAssertEqual(items(second).map { $0["fired"]?.numberValue?.int64 }, [1])
        XCTAssertEqual(second.object?["next"], .null)
        XCTAssertEqual(try client.get("/api/v1/faults?limit=0").status, 400)
        XCTAssertEqual(try client.get("/api/v1/topics?limit=1001").status, 400)
        XCTAssertEqual(try client.delete("/api/v1/faults").status, 204)
        XCTAssertEqual(items(try client.get("/api/v1/faults")).count, 0)
    }

    /// A delay fault holds a refused request's 400 too, and the record names the fault.
    func testDelayAppliesToARefusedRequest() throws {
        let id = try XCTUnwrap(try client.post("/api/v1/faults", #"{"then":{"delay_ms":300},"times":1}"#).object?["id"]?.stringValue)
        let started = Date()
        let r = try client.sendJSON(#"{"to":"a1","time_to_live":"x"}"#)
        XCTAssertEqual(r.status, 400)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3, "not before the delay")
        let rec = try XCTUnwrap(items(try client.get("/api/v1/messages?status=rejected")).first)
        XCTAssertEqual(rec["fault"]?.stringValue, id)
        XCTAssertEqual(rec["http_status"]?.numberValue?.int64, 400)
    }

    /// A request a fault answered keeps the target it named on its record, so the message
    /// filters find it: `?token=` for a token (a closed connection too), `?topic=` for a topic.
    func testARequestAFaultAnsweredIsFoundByItsTarget() throws {
        try addFault(#"{"when":{"topic":"zz2"},"then":{"status":429,"retry_after_s":2},"times":1}"#)
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/zz2"}"#).status, 429)
        let byTopic = items(try client.get("/api/v1/messages?topic=zz2&status=rejected"))
        XCTAssertEqual(byTopic.count, 1)
        XCTAssertEqual(byTopic.first?["target"]?.objectValue?["kind"]?.stringValue, "topic")
        XCTAssertEqual(byTopic.first?["target"]?.objectValue?["value"]?.stringValue, "/topics/zz2")
        try addFault(#"{"when":{"token":"a2"},"then":{"close_connection":true},"times":1}"#)
        XCTAssertThrowsError(try client.sendJSON(#"{"to":"a2"}"#))
        let byToken = items(try client.get("/api/v1/messages?token=a2&status=rejected"))
        XCTAssertEqual(byToken.count, 1)
        XCTAssertEqual(byToken.first?["error"]?.stringValue, "ConnectionClosed")
        XCTAssertEqual(byToken.first?["target"]?.objectValue?["value"]?.stringValue, "a2")
        XCTAssertEqual(items(try client.get("/api/v1/messages?token=a1&status=rejected")).count, 0, "another token's filter")
    }

    /// A fault naming a device-group or Instance ID path answers those requests as a send's:
    /// a status (a 503 with Retry-After), a dropped connection, a delay; one without a path
    /// leaves them alone.
    func testAFaultNamingAGroupOrInstanceIDPathAnswersIt() throws {
        func group() throws -> WireResponse {
            try client.request("POST", "/fcm/notification",
                               headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111"), ("project_id", "111")],
                               body: Array(#"{"operation":"create","notification_key_name":"g\#(UUID().uuidString.prefix(8))","registration_ids":["a1"]}"#.utf8))
        }
        func batchAdd() throws -> WireResponse {
            try client.request("POST", "/iid/v1:batchAdd", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111")],
                               body: Array(#"{"to":"/topics/news","registration_tokens":["a1"]}"#.utf8))
        }
        try addFault(#"{"then":{"status":500}}"#)
        XCTAssertEqual(try group().status, 200, "a fault without a path is for sends")
        XCTAssertEqual(try client.delete("/api/v1/faults").status, 204)

        let id = try addFault(#"{"when":{"path":"/fcm/notification"},"then":{"status":503},"times":1}"#)
        let refused = try group()
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.headers["retry-after"], "10")
        XCTAssertEqual(refused.text, "Service Unavailable\n")
        XCTAssertEqual(try group().status, 200, "used up")
        XCTAssertEqual(items(try client.get("/api/v1/faults")).filter { $0["id"]?.stringValue == id }.count, 0)

        try addFault(#"{"when":{"path":"/iid/v1:batchAdd"},"then":{"status":429,"retry_after_s":3},"times":1}"#)
        let limited = try batchAdd()
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.headers["retry-after"], "3")
        XCTAssertEqual(try batchAdd().text, #"{"results":[{}]}"#)
        try addFault(#"{"when":{"path":"/iid/v1:batchAdd","sender_id":"222"},"then":{"status":500}}"#)
        XCTAssertEqual(try batchAdd().status, 200, "another project's fault")

        try addFault(#"{"when":{"path":"/iid/v1:batchAdd"},"then":{"close_connection":true},"times":1}"#)
        XCTAssertThrowsError(try batchAdd(), "the connection is dropped without an answer")
        try addFault(#"{"when":{"path":"/fcm/notification"},"then":{"delay_ms":300},"times":1}"#)
        let started = Date()
        XCTAssertEqual(try group().status, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3)
    }

    /// A fault's topic matches like sends do: without regard to case.
    func testTopicFaultIgnoresCase() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a1/topics/news").status, 200)
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"topic":"News"},"then":{"status":500},"times":2}"#).status, 201)
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/news"}"#).status, 500)
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/NEWS"}"#).status, 500)
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/news"}"#).status, 200, "used up")
    }

    func testBadFaultsAre400NamingTheField() throws {
        let cases: [(String, String)] = [
            (#"{"then":{"error":"Nope"}}"#, "then.error"),
            (#"{"then":{"status":503},"times":-1}"#, "times"),
            (#"{"then":{"status":503},"times":0}"#, "times"),
            (#"{"then":{"status":200}}"#, "then.status"),
            (#"{"then":{"status":503,"error":"Unavailable"}}"#, "exactly one"),
            (#"{"when":{"transport":"smtp"},"then":{"status":503}}"#,
             "when.transport must be http, http_v1, xmpp, apns, webpush, autopush, mcs or any"),
            (#"{"when":{"colour":"x"},"then":{"status":503}}"#, "when.colour"),
            (#"{}"#, "then"),
            (#"{"then":{"delay_ms":-5}}"#, "then.delay_ms"),
            (#"{"then":{"error":"Unavailable","retry_after_s":3}}"#, "retry_after_s"),
        ]
        for (body, field) in cases {
            let r = try client.post("/api/v1/faults", body)
            XCTAssertEqual(r.status, 400, body)
            XCTAssertTrue(r.object?["error"]?.objectValue?["message"]?.stringValue?.contains(field) ?? false, "\(body): \(r.text)")
        }
        XCTAssertEqual(try client.delete("/api/v1/faults/f999").status, 404)
    }

    func testResetForgetsFaults() throws {
        try addFault(#"{"then":{"status":503}}"#)
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(items(try client.get("/api/v1/faults")).count, 0)
    }
}

/// `--device-rate`.
final class RateLimitTests: XCTestCase {
    func testDeviceRateLimit() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--device-rate", "3/1h"])
        defer { s.stop() }
        let c = s.client()
        for _ in 0..<3 { XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#))) }
        XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"a1"}"#)), "DeviceMessageRateExceeded")
        let refused = try XCTUnwrap(items(try c.get("/api/v1/messages?limit=1")).first)
        XCTAssertEqual(refused["error"]?.stringValue, "DeviceMessageRateExceeded")
        XCTAssertEqual(refused["error_detail"]?.stringValue, "over the per-device rate: at most 3 messages a device in 3600000 ms")
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a2"}"#)), "per device")
        XCTAssertEqual(try c.sendPlain("registration_id=a1").text, "Error=DeviceMessageRateExceeded\n")
        // The window slides on the mock's clock.
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
        // What was counted on the clock that ran ahead does not hold the limit once it is back.
        for _ in 0..<2 { XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#))) }
        XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"a1"}"#)), "DeviceMessageRateExceeded")
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"reset":true}"#).status, 200)
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
    }

    func testRateSyntax() {
        XCTAssertEqual(RateLimitParse("240/60s"), [240, 60_000])
        XCTAssertEqual(RateLimitParse("10/1s"), [10, 1000])
        XCTAssertEqual(RateLimitParse("5/1m"), [5, 60_000])
        XCTAssertEqual(RateLimitParse("1000/1h"), [1000, 3_600_000])
        XCTAssertEqual(RateLimitParse("7/30"), [7, 30_000])
        XCTAssertEqual(RateLimitParse("3/500ms"), [3, 500])
        for bad in ["", "x", "0/1s", "5", "5/", "5/xs", "-1/1s"] { XCTAssertNil(RateLimitParse(bad), bad) }
    }

    func testBadRateFlagExits2() throws {
        let r = try runBinary(["serve", "--device-rate", "fast", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("--device-rate"), r.stderr)
    }
}
