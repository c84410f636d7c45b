import FCMServer
import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// Message records keep the answer their sender got and the headers it sent; the list filters
/// by error and by time (docs/control-api.md), over real HTTP and XMPP.
final class MessageAnswerTests: ServerTestCase {
    /// The record of the newest message matching `query`.
    func newest(_ query: String) throws -> JSONObject {
        try XCTUnwrap(items(try client.get("/api/v1/messages?" + query)).first, query)
    }

    /// The record `GET /api/v1/messages/{id}` answers.
    func record(_ id: String) throws -> JSONObject {
        let r = try client.get("/api/v1/messages/" + id.replacingOccurrences(of: "%", with: "%25"))
        XCTAssertEqual(r.status, 200, r.text)
        return try XCTUnwrap(r.object)
    }

    func testLegacyAnswerAndHeadersAreKeptByteForByte() throws {
        let sent = try client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111"),
                                                                     ("User-Agent", "tester/1")],
                                      body: Array(#"{"to":"a1","data":{"k":"v"}}"#.utf8))
        let id = try XCTUnwrap(results(sent).first?["message_id"]?.stringValue)
        let m = try record(id)
        XCTAssertEqual(m["answer"]?.serialized(),
                       #"{"status":200,"content_type":"\#(jsonType)","body":"# + JSONValue.string(sent.text).serialized() + "}")
        XCTAssertEqual(m["headers"]?.serialized(),
                       #"{"content-type":"application/json","authorization":"key=key-11…","user-agent":"tester/1"}"#)
    }

    func testPlainTextSendKeepsItsBodyAndAnswer() throws {
        let body = "registration_id=a1&data.greeting=%3Cb%3Ehi%3C%2Fb%3E"
        let sent = try client.sendPlain(body)
        XCTAssertEqual(sent.status, 200, sent.text)
        let m = try newest("transport=http")
        XCTAssertEqual(m["format"]?.stringValue, "plain")
        XCTAssertEqual(m["raw_body"]?.stringValue, body)
        XCTAssertEqual(m["answer"]?.objectValue?["body"]?.stringValue, sent.text)
        XCTAssertEqual(m["answer"]?.objectValue?["content_type"]?.stringValue, "text/plain; charset=UTF-8")
        XCTAssertEqual(m["headers"]?.objectValue?["content-type"]?.stringValue, "application/x-www-form-urlencoded;charset=UTF-8")
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#).status, 200)
        XCTAssertNil(try newest("transport=http")["raw_body"], "a JSON send that was accepted keeps no body")
    }

    func testRefusedAnswersAreKept() throws {
        let bad = try client.sendJSON(#"{"to":"a1","time_to_live":"x"}"#)
        XCTAssertEqual(bad.status, 400)
        var m = try newest("status=rejected")
        XCTAssertEqual(m["answer"]?.objectValue?["status"]?.numberValue?.int64, 400)
        XCTAssertEqual(m["answer"]?.objectValue?["body"]?.stringValue, bad.text)

        let denied = try client.sendJSON(#"{"to":"a1"}"#, key: "secret-key-nobody-has")
        XCTAssertEqual(denied.status, 401)
        m = try newest("status=rejected")
        XCTAssertEqual(m["answer"]?.objectValue?["status"]?.numberValue?.int64, 401)
        XCTAssertEqual(m["answer"]?.objectValue?["body"]?.stringValue, denied.text)
        XCTAssertEqual(m["headers"]?.objectValue?["authorization"]?.stringValue, "key=secret…", "the key is masked")
        XCTAssertFalse(try client.get("/api/v1/messages").text.contains("secret-key-nobody-has"))
    }

    func testLongAnswerIsCutAtTheLimit() throws {
        let tokens = (0..<200).map { "\"unknown-\($0)\"" }.joined(separator: ",")
        let sent = try client.sendJSON(#"{"registration_ids":[\#(tokens)]}"#)
        XCTAssertEqual(sent.status, 200)
        XCTAssertGreaterThan(sent.body.count, 4096)
        let answer = try XCTUnwrap(try newest("transport=http")["answer"]?.objectValue)
        XCTAssertEqual(answer["body"]?.stringValue, String(decoding: sent.body.prefix(4096), as: UTF8.self))
        XCTAssertEqual(answer["body_truncated"]?.boolValue, true)
    }

    func testXMPPAckAndNackAreTheAnswer() throws {
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111@fcm.googleapis.com", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"x-1","data":{"k":"v"}}"#)
        let ack = try XCTUnwrap(try c.nextGCM())
        var m = try newest("xmpp_message_id=x-1")
        XCTAssertEqual(m["answer"]?.serialized(),
                       JSONValue.object(JSONObject([("status", .null), ("content_type", .string("xmpp")),
                                                    ("body", .string(JSONValue.object(ack).serialized()))])).serialized())
        XCTAssertNil(m["headers"])
        c.sendDownstream(#"{"to":"a1","message_id":"x-2","time_to_live":"soon"}"#)
        let nack = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(nack["message_type"]?.stringValue, "nack")
        m = try newest("xmpp_message_id=x-2")
        XCTAssertEqual(m["answer"]?.objectValue?["body"]?.stringValue, JSONValue.object(nack).serialized())
    }

    func testErrorAndUntilFilters() throws {
        XCTAssertEqual(try client.sendJSON(#"{"to":"b1"}"#).status, 200)  // MismatchSenderId for a1's sender
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1","time_to_live":"x"}"#).status, 400)
        XCTAssertEqual(items(try client.get("/api/v1/messages?error=MismatchSenderId")).map { $0["target"]?.objectValue?["value"]?.stringValue },
                       ["b1"], "a recipient's error")
        XCTAssertEqual(items(try client.get("/api/v1/messages?error=InvalidJson")).count, 1, "the record's own error")
        XCTAssertEqual(items(try client.get("/api/v1/messages?error=NotRegistered")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/messages?until=2000-01-01T00:00:00Z")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/messages?until=2999-01-01T00:00:00Z")).count, 3)
        let newestAt = try XCTUnwrap(try newest("")["accepted_at"]?.stringValue)
        let same = items(try client.get("/api/v1/messages?since=\(newestAt)&until=\(newestAt)"))
        XCTAssertFalse(same.isEmpty)
        XCTAssertEqual(Set(same.compactMap { $0["accepted_at"]?.stringValue }), [newestAt])
        XCTAssertEqual(try client.get("/api/v1/messages?until=yesterday").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages?error=" + String(repeating: "E", count: 201)).status, 400)
    }

    func testOneRecordKeepsTheFirstRecipientsWhenAsked() throws {
        let sent = try client.sendJSON(#"{"registration_ids":["a1","a2","a-offline"]}"#)
        let id = try XCTUnwrap(results(sent).first?["message_id"]?.stringValue).replacingOccurrences(of: "%", with: "%25")
        let m = try XCTUnwrap(try client.get("/api/v1/messages/\(id)?recipients=2").object)
        XCTAssertEqual(m["recipients"]?.arrayValue?.compactMap { $0.objectValue?["token"]?.stringValue }, ["a1", "a2"])
        XCTAssertEqual(m["recipients_total"]?.numberValue?.int64, 3)
        XCTAssertNil(try record(id.replacingOccurrences(of: "%25", with: "%"))["recipients_total"])
        XCTAssertEqual(try client.get("/api/v1/messages/\(id)?recipients=0").status, 400)
    }

    func testDeliveredRecipientsSayWhen() throws {
        let id = try XCTUnwrap(results(try client.sendJSON(#"{"to":"a1"}"#)).first?["message_id"]?.stringValue)
        let recipient = try XCTUnwrap(try record(id)["recipients"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(recipient["status"]?.stringValue, "delivered")
        XCTAssertNotNil(recipient["delivered_at"]?.stringValue.flatMap(parseRFC3339))
        let held = try XCTUnwrap(results(try client.sendJSON(#"{"to":"a-offline"}"#)).first?["message_id"]?.stringValue)
        XCTAssertNil(try record(held)["recipients"]?.arrayValue?.first?.objectValue?["delivered_at"])
    }

    /// A recipient the storage rules settle says when: collapsed by a newer message with its
    /// collapse key (at that message's time on the mock's clock), expired by the clock.
    func testSettledRecipientsSayWhen() throws {
        let first = try XCTUnwrap(results(try client.sendJSON(#"{"to":"a-offline","collapse_key":"score"}"#)).first?["message_id"]?.stringValue)
        XCTAssertNil(try record(first)["recipients"]?.arrayValue?.first?.objectValue?["settled_at"])
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":60}"#).status, 200)
        let now = try XCTUnwrap(try client.get("/api/v1/clock").object?["now"]?.stringValue.flatMap(parseRFC3339))
        _ = try client.sendJSON(#"{"to":"a-offline","collapse_key":"score"}"#)
        let collapsed = try XCTUnwrap(try record(first)["recipients"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(collapsed["status"]?.stringValue, "collapsed")
        let at = try XCTUnwrap(collapsed["settled_at"]?.stringValue.flatMap(parseRFC3339))
        XCTAssertLessThan(abs(at - now), 5_000, "settled at the collapsing send's time on the mock's clock")
        let short = try XCTUnwrap(results(try client.sendJSON(#"{"to":"a-offline","time_to_live":10}"#)).first?["message_id"]?.stringValue)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":20}"#).status, 200)
        let expired = try XCTUnwrap(try record(short)["recipients"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(expired["status"]?.stringValue, "expired")
        XCTAssertNotNil(expired["settled_at"]?.stringValue.flatMap(parseRFC3339))
    }
}

/// The same for HTTP v1 sends.
final class V1MessageAnswerTests: V1TestCase {
    func testV1AnswerAndHeadersAreKept() throws {
        let sent = try v1Send(#"{"message":{"token":"a1","data":{"k":"v"}}}"#)
        XCTAssertEqual(sent.status, 200, sent.text)
        let m = try XCTUnwrap(items(try client.get("/api/v1/messages?transport=http_v1")).first)
        XCTAssertEqual(m["answer"]?.objectValue?["status"]?.numberValue?.int64, 200)
        XCTAssertEqual(m["answer"]?.objectValue?["body"]?.stringValue, sent.text)
        let headers = try XCTUnwrap(m["headers"]?.objectValue)
        XCTAssertEqual(headers["x-firebase-client"]?.stringValue, "fire-admin-python/7.7.0")
        XCTAssertEqual(headers["authorization"]?.stringValue, "Bearer " + tokenA.prefix(6) + "…")

        let refused = try v1Send(#"{"message":{"token":"a1","data":{"k":1}}}"#)
        XCTAssertEqual(refused.status, 400)
        let r = try XCTUnwrap(items(try client.get("/api/v1/messages?transport=http_v1&status=rejected")).first)
        XCTAssertEqual(r["answer"]?.objectValue?["body"]?.stringValue, refused.text)
    }
}
