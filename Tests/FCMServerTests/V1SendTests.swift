import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// `POST /v1/projects/{project}/messages:send` (docs/spec/fcm-v1.md section 1) over real HTTP:
/// what is answered, what devices get, and what the control API records.
final class V1SendTests: V1TestCase {
    func testATokenSendIsAnsweredWithItsNameDeliveredAndRecorded() throws {
        let body = #"{"message":{"token":"a1","data":{"k":"v"},"notification":{"title":"Hi"},"android":{"priority":"HIGH","ttl":"30s","collapseKey":"ck"},"apns":{"headers":{"apns-priority":"10"}},"fcm_options":{"analytics_label":"l1"}}}"#
        let r = try v1Send(body)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        let id = messageID(r)
        XCTAssertTrue(isMessageID(id), id)
        XCTAssertEqual(r.text, #"{"name":"projects/demo-a/messages/\#(id)"}"#)
        // The device got it, through HTTP v1.
        let inbox = items(try client.get("/api/v1/devices/a1/messages"))
        XCTAssertEqual(inbox.count, 1)
        XCTAssertEqual(inbox.first?["message_id"]?.stringValue, id)
        XCTAssertEqual(inbox.first?["status"]?.stringValue, "delivered")
        XCTAssertEqual(inbox.first?["collapse_key"]?.stringValue, "ck")
        XCTAssertEqual(inbox.first?["priority"]?.stringValue, "high")
        XCTAssertEqual(inbox.first?["via"]?.objectValue?["transport"]?.stringValue, "http_v1")
        XCTAssertEqual(inbox.first?["via"]?.objectValue?["target"]?.stringValue, "token")
        XCTAssertEqual(inbox.first?["data"]?.objectValue?["k"]?.stringValue, "v")
        // The record: transport, the name answered, the platform blocks as sent.
        let record = try XCTUnwrap(try client.get("/api/v1/messages/\(pathEncode(id))").object)
        XCTAssertEqual(record["transport"]?.stringValue, "http_v1")
        XCTAssertEqual(record["v1_name"]?.stringValue, "projects/demo-a/messages/\(id)")
        XCTAssertEqual(record["status"]?.stringValue, "accepted")
        XCTAssertEqual(record["options"]?.objectValue?["time_to_live"]?.numberValue?.int64, 30)
        XCTAssertEqual(record["android"]?.serialized(), #"{"priority":"high","ttl":"30s","collapse_key":"ck"}"#)
        XCTAssertEqual(record["apns"]?.serialized(), #"{"headers":{"apns-priority":"10"}}"#)
        XCTAssertEqual(record["webpush"], .null)
        XCTAssertEqual(record["fcm_options"]?.serialized(), #"{"analytics_label":"l1"}"#)
        XCTAssertEqual(record["target"]?.serialized(), #"{"kind":"token","value":"a1"}"#)
        // The project's number names it too; the name says its id.
        let byNumber = try v1Send(#"{"message":{"token":"a1"}}"#, project: "111")
        XCTAssertTrue(isMessageID(messageID(byNumber)))
    }

    func testTopicAndConditionSendsReachTheSubscribers() throws {
        for (token, topic) in [("a1", "news"), ("a2", "news"), ("a2", "sport")] {
            XCTAssertEqual(try client.post("/api/v1/devices/\(token)/topics/\(topic)").status, 200)
        }
        let topic = try v1Send(#"{"message":{"topic":"news","data":{"k":"1"}}}"#)
        let topicID = messageID(topic)
        XCTAssertNotNil(Int64(topicID), "a topic send's id is a number: \(topicID)")
        XCTAssertEqual(topic.text, #"{"name":"projects/demo-a/messages/\#(topicID)"}"#)
        let prefixed = messageID(try v1Send(#"{"message":{"topic":"/topics/news","data":{"k":"2"}}}"#))
        XCTAssertNotNil(Int64(prefixed))
        let condition = messageID(try v1Send(#"{"message":{"condition":"'news' in topics && 'sport' in topics","data":{"k":"3"}}}"#))
        XCTAssertNotNil(Int64(condition))
        // v1 conditions take up to five topics (legacy: three).
        let five = messageID(try v1Send(#"{"message":{"condition":"'news' in topics || 'a' in topics || 'b' in topics || 'c' in topics || 'sport' in topics","data":{"k":"4"}}}"#))
        XCTAssertNotNil(Int64(five))
        let a1 = items(try client.get("/api/v1/devices/a1/messages")).map { $0["data"]?.objectValue?["k"]?.stringValue }
        let a2 = items(try client.get("/api/v1/devices/a2/messages")).map { $0["data"]?.objectValue?["k"]?.stringValue }
        XCTAssertEqual(a1, ["1", "2", "4"])
        XCTAssertEqual(a2, ["1", "2", "3", "4"])
        let via = items(try client.get("/api/v1/devices/a1/messages")).first?["via"]?.objectValue
        XCTAssertEqual(via?["target"]?.stringValue, "topic")
        XCTAssertEqual(via?["topic"]?.stringValue, "news")
        let record = try XCTUnwrap(try client.get("/api/v1/messages/\(topicID)").object)
        XCTAssertEqual(record["v1_name"]?.stringValue, "projects/demo-a/messages/\(topicID)")
        XCTAssertEqual(record["recipients"]?.arrayValue?.count, 2)
    }

    func testValidateOnlyChecksEverythingAndDeliversNothing() throws {
        for target in [#""token":"a1""#, #""topic":"news""#, #""fid":"dFixedInstallationId01""#] {
            let r = try v1Send(#"{"validate_only":true,"message":{\#(target),"data":{"k":"v"}}}"#)
            assertV1(r, 200, #"{"name":"projects/demo-a/messages/fake_message_id"}"#)
        }
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/messages")).count, 0)
        // The token is still checked.
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        assertV1(try v1Send(#"{"validate_only":true,"message":{"token":"a2"}}"#), 404, V1Body.unregistered)
        assertV1(try v1Send(#"{"validateOnly":true,"message":{"token":"b1"}}"#), 403, V1Body.senderMismatch)
        // An unknown token fails too, though a send registers it on first use (the default
        // `--unknown-tokens register`), and validating it registers nothing.
        let unknown = "unknownToken" + String(repeating: "x", count: 140)
        assertV1(try v1Send(#"{"validate_only":true,"message":{"token":"\#(unknown)"}}"#), 404, V1Body.unregistered)
        XCTAssertEqual(try client.get("/api/v1/devices/\(unknown)").status, 404)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"\#(unknown)"}}"#).status, 200)
        XCTAssertEqual(try client.get("/api/v1/devices/\(unknown)").object?["state"]?.stringValue, "registered")
    }

    func testAnFIDReachesItsDeviceAndFollowsARefresh() throws {
        let r = try v1Send(#"{"message":{"fid":"dFixedInstallationId01","data":{"k":"v"}}}"#)
        let id = messageID(r)
        XCTAssertTrue(isMessageID(id), "a token-shaped id: \(id)")
        let inbox = items(try client.get("/api/v1/devices/a1/messages"))
        XCTAssertEqual(inbox.first?["message_id"]?.stringValue, id)
        XCTAssertEqual(inbox.first?["via"]?.objectValue?["target"]?.stringValue, "fid")
        let record = try XCTUnwrap(try client.get("/api/v1/messages/\(pathEncode(id))").object)
        XCTAssertEqual(record["target"]?.serialized(), #"{"kind":"fid","value":"dFixedInstallationId01"}"#)
        XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["token"]?.stringValue, "a1")
        // A refreshed token's installation is the same: the fid reaches the new token.
        let fresh = try XCTUnwrap(try client.post("/api/v1/devices/a1:refresh").object)
        XCTAssertEqual(fresh["fid"]?.stringValue, "dFixedInstallationId01")
        let newToken = try XCTUnwrap(fresh["token"]?.stringValue)
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["token"]?.stringValue, newToken)
        let again = messageID(try v1Send(#"{"message":{"fid":"dFixedInstallationId01"}}"#))
        XCTAssertEqual(items(try client.get("/api/v1/devices/\(newToken)/messages")).first?["message_id"]?.stringValue, again)
        XCTAssertEqual(try client.get("/api/v1/messages/\(pathEncode(again))").object?["recipients"]?.arrayValue?.first?
            .objectValue?["canonical_token"], .null)
        // Unknown, or uninstalled: UNREGISTERED.
        assertV1(try v1Send(#"{"message":{"fid":"cAAAAAAAAAAAAAAAAAAAAA"}}"#), 404, V1Body.unregistered)
        XCTAssertEqual(try client.post("/api/v1/devices/\(newToken):unregister").status, 200)
        assertV1(try v1Send(#"{"message":{"fid":"dFixedInstallationId01"}}"#), 404, V1Body.unregistered)
        let rejected = items(try client.get("/api/v1/messages?status=rejected"))
        XCTAssertEqual(rejected.first?["error"]?.stringValue, "UNREGISTERED")
        XCTAssertEqual(rejected.first?["target"]?.objectValue?["kind"]?.stringValue, "fid")
        XCTAssertEqual(rejected.first?["v1_name"], .null)
    }

    /// Offline storage behaves as for legacy sends, with the android block's collapse key and TTL.
    func testCollapseAndOfflineStorageAsLegacy() throws {
        let first = messageID(try v1Send(#"{"message":{"token":"a-offline","data":{"n":"1"},"android":{"collapse_key":"score"}}}"#))
        let second = messageID(try v1Send(#"{"message":{"token":"a-offline","data":{"n":"2"},"android":{"collapse_key":"score"}}}"#))
        let once = messageID(try v1Send(#"{"message":{"token":"a-offline","data":{"n":"3"},"android":{"ttl":"0s"}}}"#))
        let statuses = Dictionary(uniqueKeysWithValues: items(try client.get("/api/v1/devices/a-offline/messages")).map {
            ($0["message_id"]?.stringValue ?? "", $0["status"]?.stringValue ?? "")
        })
        XCTAssertEqual(statuses, [first: "collapsed", second: "pending", once: "expired"])
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let after = items(try client.get("/api/v1/devices/a-offline/messages?status=delivered"))
        XCTAssertEqual(after.map { $0["message_id"]?.stringValue }, [second])
    }

    func testRecordsFilterByTransportAndNameAndEventsSayTheTransport() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        while (try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64) != 1 {}
        let id = messageID(try v1Send(#"{"message":{"token":"a1"}}"#))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a2"}"#)))
        var accepted: JSONObject?
        while accepted == nil, let e = try sse.next() {
            if e.event == "message.accepted" { accepted = try JSONParser.parse(Array(e.data.utf8)).objectValue }
        }
        XCTAssertEqual(accepted?["transport"]?.stringValue, "http_v1")
        XCTAssertEqual(accepted?["v1_name"]?.stringValue, "projects/demo-a/messages/\(id)")
        sse.disconnect()
        let v1 = items(try client.get("/api/v1/messages?transport=http_v1"))
        XCTAssertEqual(v1.map { $0["message_id"]?.stringValue }, [id])
        XCTAssertEqual(items(try client.get("/api/v1/messages?transport=http")).count, 1)
        XCTAssertNil(items(try client.get("/api/v1/messages?transport=http")).first?["v1_name"], "legacy records have no v1 fields")
        let name = "projects/demo-a/messages/\(id)"
        XCTAssertEqual(items(try client.get("/api/v1/messages?v1_name=\(pathEncode(name))")).map { $0["message_id"]?.stringValue }, [id])
        XCTAssertEqual(items(try client.get("/api/v1/messages?v1_name=nope")).count, 0)
        XCTAssertEqual(try client.get("/api/v1/messages?transport=smtp").status, 400)
    }
}
