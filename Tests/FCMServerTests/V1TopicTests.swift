import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// Topic subscriptions through v1 (docs/spec/fcm-v1.md section 2b), as firebase-admin 7.x makes them.
final class V1TopicTests: V1TestCase {
    func subscribe(_ token: String, _ topic: String, project: String = "demo-a", bearer: String? = nil) throws -> WireResponse {
        try v1Request("POST", "/v1/projects/\(project)/registrations/\(pathEncode(token))/topicSubscriptions?topic_name=\(pathEncode(topic))",
                      body: "{}", bearer: bearer)
    }

    func unsubscribe(_ token: String, _ topic: String, allowMissing: Bool = false) throws -> WireResponse {
        try v1Request("DELETE", "/v1/projects/demo-a/registrations/\(pathEncode(token))/topicSubscriptions/\(pathEncode(topic))"
                      + (allowMissing ? "?allow_missing=true" : ""))
    }

    func testSubscribeAndUnsubscribe() throws {
        let name = #"{"name":"projects/demo-a/registrations/a1/topicSubscriptions/news"}"#
        assertV1(try subscribe("a1", "news"), 200, name)
        assertV1(try subscribe("a1", "news"), 200, name)
        assertV1(try subscribe("a2", "/topics/news", project: "111"), 200, #"{"name":"projects/demo-a/registrations/a2/topicSubscriptions/news"}"#)
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["topics"]?.serialized(), #"["news"]"#)
        let sent = try v1Send(#"{"message":{"topic":"news"}}"#)
        XCTAssertEqual(sent.status, 200)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 1)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a2/messages")).count, 1)
        // By fid too.
        assertV1(try subscribe("dFixedInstallationId01", "sport"), 200,
                 #"{"name":"projects/demo-a/registrations/dFixedInstallationId01/topicSubscriptions/sport"}"#)
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["topics"]?.serialized(), #"["news","sport"]"#)
        assertV1(try unsubscribe("a1", "news"), 200, "{}")
        assertV1(try unsubscribe("a1", "news"), 404, V1Body.notFound)
        assertV1(try unsubscribe("a1", "news", allowMissing: true), 200, "{}")
        assertV1(try unsubscribe("dFixedInstallationId01", "sport"), 200, "{}")
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["topics"]?.serialized(), "[]")
    }

    func testRefusals() throws {
        let text = "Topic name format is invalid"
        assertV1(try subscribe("a1", "bad topic"), 400,
                 V1Body.error(400, text, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT", violations: [("topic_name", "\(text): 'bad topic'")]))
        assertV1(try v1Request("POST", "/v1/projects/demo-a/registrations/a1/topicSubscriptions", body: "{}"), 400,
                 V1Body.error(400, text, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT", violations: [("topic_name", "\(text): ''")]))
        assertV1(try unsubscribe("a1", "bad topic"), 400,
                 V1Body.error(400, text, "INVALID_ARGUMENT", fcm: "INVALID_ARGUMENT", violations: [("topic", "\(text): 'bad topic'")]))
        assertV1(try subscribe("nobody", "news"), 404, V1Body.unregistered)
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        assertV1(try subscribe("a2", "news"), 404, V1Body.unregistered)
        assertV1(try unsubscribe("a2", "news", allowMissing: true), 404, V1Body.unregistered)
        assertV1(try subscribe("b1", "news"), 403, V1Body.senderMismatch)
        assertV1(try subscribe("a1", "news", bearer: "garbage"), 401, V1Body.unauthenticated)
        assertV1(try subscribe("a1", "news", project: "demo-b"), 403, V1Body.permissionDenied("demo-b"))
        assertV1(try v1Request("POST", "/v1/projects/demo-a/registrations/a1/topicSubscriptions?topic_name=x", body: "[1]"), 400,
                 V1Body.error(400, "Invalid JSON payload received. The body must be a TopicSubscription object such as {}.", "INVALID_ARGUMENT"))
        assertV1(try v1Request("GET", "/v1/projects/demo-a/registrations/a1/topicSubscriptions"), 404, V1Body.notFound)
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["topics"]?.serialized(), "[]")
    }
}
