import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// Topics, conditions and the Instance ID API (issue 4).
final class TopicTests: ServerTestCase {
    func iid(_ path: String, _ json: String, key: String = "key-111") throws -> WireResponse {
        try client.request("POST", path, headers: [("Content-Type", "application/json"), ("Authorization", "key=\(key)")],
                           body: Array(json.utf8))
    }

    func subscribe(_ token: String, _ topic: String) throws {
        XCTAssertEqual(try client.post("/api/v1/devices/\(token)/topics/\(topic)").status, 200)
    }

    func testTopicSendReachesEverySubscriberOfTheProject() throws {
        for t in ["a1", "a2", "a-offline", "b1"] { try subscribe(t, "news") }
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"111","token":"gone"}"#).status, 201)
        try subscribe("gone", "news")
        XCTAssertEqual(try client.post("/api/v1/devices/gone:unregister").status, 200)
        let r = try client.sendJSON(#"{"to":"/topics/news","data":{"k":"v"}}"#)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        let o = try XCTUnwrap(r.object)
        XCTAssertEqual(o.keys, ["message_id"])
        let id = try XCTUnwrap(o["message_id"]?.numberValue, "a JSON number, not a string")
        XCTAssertTrue(id.isInteger && (id.int64 ?? 0) > 0)
        XCTAssertEqual(r.text, "{\"message_id\":\(id.text)}")
        for t in ["a1", "a2"] {
            let e = items(try client.get("/api/v1/devices/\(t)/messages")).last
            XCTAssertEqual(e?["status"]?.stringValue, "delivered", t)
            XCTAssertEqual(e?["via"]?.objectValue?["target"]?.stringValue, "topic")
            XCTAssertEqual(e?["via"]?.objectValue?["topic"]?.stringValue, "news")
        }
        XCTAssertEqual(items(try client.get("/api/v1/devices/a-offline/messages")).last?["status"]?.stringValue, "pending")
        XCTAssertEqual(items(try client.get("/api/v1/devices/b1/messages")).count, 0, "another project's subscriber")
        XCTAssertEqual(items(try client.get("/api/v1/devices/gone/messages")).count, 0, "an uninstalled app")
        let rec = try client.get("/api/v1/messages/\(id.text)")
        XCTAssertEqual(rec.status, 200)
        XCTAssertEqual(rec.object?["target"]?.serialized(), #"{"kind":"topic","value":"/topics/news"}"#)
        XCTAssertEqual(rec.object?["recipients"]?.arrayValue?.count, 3)
        XCTAssertEqual(items(try client.get("/api/v1/messages?topic=news")).count, 1)
        // Matching ignores case; a topic with no subscriber still answers a message id.
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 1)
        XCTAssertNotNil(try client.sendJSON(#"{"to":"/topics/NEWS"}"#).object?["message_id"]?.numberValue)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 2)
        // The messages filter matches topics the same way, whatever case either side used.
        XCTAssertEqual(items(try client.get("/api/v1/messages?topic=news")).count, 2)
        XCTAssertEqual(items(try client.get("/api/v1/messages?topic=NeWs")).count, 2)
        // A topic nobody subscribed to is only a name: no subscribers, not a 404.
        let none = try client.get("/api/v1/topics/nobody-here")
        XCTAssertEqual(none.status, 200, none.text)
        XCTAssertEqual(none.text, #"{"name":"nobody-here","subscribers":[],"count":0}"#)
        XCTAssertEqual(try client.get("/api/v1/topics/bad%20name").status, 400)
        XCTAssertEqual(try client.get("/api/v1/topics/news").object?["count"]?.numberValue?.int64, 5, "a1, a2, a-offline, b1, gone")
        // As a send addresses it, too.
        XCTAssertEqual(items(try client.get("/api/v1/messages?topic=/topics/news")).count, 2)
        XCTAssertEqual(items(try client.get("/api/v1/devices?topic=/topics/news")).map { $0["token"]?.stringValue },
                       items(try client.get("/api/v1/devices?topic=news")).map { $0["token"]?.stringValue })
        XCTAssertFalse(items(try client.get("/api/v1/devices?topic=/topics/news")).isEmpty)
        // A bad status names every status the filter takes.
        let bad = try client.get("/api/v1/messages?status=bogus")
        XCTAssertEqual(bad.status, 400)
        for s in ["accepted", "rejected", "sent", "client_rejected", "undeliverable"] { XCTAssertTrue(bad.text.contains(s), bad.text) }
        XCTAssertNotNil(try client.sendJSON(#"{"to":"/topics/nobody"}"#).object?["message_id"]?.numberValue)
    }

    /// A device's topic names as first given, sorted (two subscribed in one millisecond have no order).
    func topicNames(_ c: HTTPTestClient, _ token: String) throws -> [String] {
        (try c.get("/api/v1/devices/\(token)").object?["topics"]?.arrayValue ?? []).compactMap(\.stringValue).sorted()
    }

    /// A refreshed token's app keeps its topics: they move to the new token, in the store too.
    func testRefreshMovesSubscriptionsToTheNewToken() throws {
        let dir = try temporaryDirectory("refresh")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        let c1 = first.client()
        for topic in ["news", "Sport"] {
            XCTAssertEqual(try c1.post("/api/v1/devices/a1/topics/\(topic)").status, 200)
        }
        let fresh = try XCTUnwrap(try c1.post("/api/v1/devices/a1:refresh").object?["token"]?.stringValue)
        XCTAssertEqual(try c1.get("/api/v1/devices/a1").object?["topics"]?.serialized(), "[]")
        XCTAssertEqual(try topicNames(c1, fresh), ["Sport", "news"])
        XCTAssertEqual(try c1.get("/api/v1/topics/news").object?["subscribers"]?.serialized(), "[\"\(fresh)\"]")
        XCTAssertNotNil(try c1.sendJSON(#"{"to":"/topics/sport"}"#).object?["message_id"]?.numberValue)
        XCTAssertEqual(items(try c1.get("/api/v1/devices/\(fresh)/messages")).last?["via"]?.objectValue?["topic"]?.stringValue, "sport")
        c1.disconnect()
        first.stop()
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        XCTAssertEqual(try topicNames(c2, fresh), ["Sport", "news"])
        XCTAssertEqual(try c2.get("/api/v1/devices/a1").object?["topics"]?.serialized(), "[]")
    }

    func testTopicErrors() throws {
        for (to, text) in [("/topics/has space", "Topic name format is invalid\n"),
                           ("/topics/" + String(repeating: "x", count: 901), "Topic name format is invalid\n"),
                           ("/topics/", "Topic name format is invalid\n")] {
            let r = try client.sendJSON("{\"to\":\"\(to)\"}")
            XCTAssertEqual(r.status, 400, to)
            XCTAssertEqual(r.text, text)
        }
        let big = try client.sendJSON("{\"to\":\"/topics/news\",\"data\":{\"k\":\"\(String(repeating: "x", count: 2048))\"}}")
        XCTAssertEqual(big.text, #"{"error":"MessageTooBig"}"#, "2048 bytes is the limit for topic messages")
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/news","time_to_live":-1}"#).text, #"{"error":"InvalidTtl"}"#)
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"topic":"news"},"then":{"error":"TopicsMessageRateExceeded"},"times":1}"#).status, 201)
        XCTAssertEqual(try client.sendJSON(#"{"to":"/topics/news"}"#).text, #"{"error":"TopicsMessageRateExceeded"}"#)
        XCTAssertNotNil(try client.sendJSON(#"{"to":"/topics/news"}"#).object?["message_id"])
    }

    func testConditions() throws {
        // a1: news+sport, a2: news, ios-ok: sport+weather, a-offline: weather
        try subscribe("a1", "news"); try subscribe("a1", "sport")
        try subscribe("a2", "news")
        try subscribe("ios-ok", "sport"); try subscribe("ios-ok", "weather")
        try subscribe("a-offline", "weather")
        func reached(_ condition: String) throws -> Set<String> {
            let before = Dictionary(uniqueKeysWithValues: try ["a1", "a2", "ios-ok", "a-offline"].map {
                ($0, items(try client.get("/api/v1/devices/\($0)/messages")).count) })
            let r = try client.sendJSON("{\"condition\":\"\(condition)\"}")
            XCTAssertNotNil(r.object?["message_id"]?.numberValue, r.text)
            return Set(try before.keys.filter { items(try client.get("/api/v1/devices/\($0)/messages")).count > before[$0]! })
        }
        XCTAssertEqual(try reached("'news' in topics && 'sport' in topics"), ["a1"])
        XCTAssertEqual(try reached("'news' in topics || 'weather' in topics"), ["a1", "a2", "ios-ok", "a-offline"])
        XCTAssertEqual(try reached("'weather' in topics && ('sport' in topics || 'news' in topics)"), ["ios-ok"])
        XCTAssertEqual(try reached("'NEWS' in topics && 'Sport' in topics"), ["a1"], "topic match ignores case")
        for bad in ["'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics", "('news' in topics", "'news' in topic",
                    "news in topics", "'has space' in topics"] {
            let r = try client.sendJSON("{\"condition\":\"\(bad)\"}")
            XCTAssertEqual(r.status, 400, bad)
            XCTAssertEqual(r.text, "Invalid condition expression provided.\n", bad)
        }
        let more = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--max-condition-operators", "3"])
        defer { more.stop() }
        XCTAssertNotNil(try more.client().sendJSON(#"{"condition":"'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics"}"#,
                                                    key: "key-111").object?["message_id"])
    }

    func testInstanceIDBatchesAndInfo() throws {
        let r = try iid("/iid/v1:batchAdd", #"{"to":"/topics/news","registration_tokens":["a1","nobody","bad token","b1","a2"]}"#)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, #"{"results":[{},{"error":"NOT_FOUND"},{"error":"INVALID_ARGUMENT"},{"error":"NOT_FOUND"},{}]}"#)
        XCTAssertEqual(try client.get("/api/v1/topics/news").text, #"{"name":"news","subscribers":["a1","a2"],"count":2}"#)
        XCTAssertEqual(items(try client.get("/api/v1/devices?topic=news")).count, 2)
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["topics"]?.serialized(), #"["news"]"#)
        XCTAssertEqual(try iid("/iid/v1/a1/rel/topics/sport", "").text, "{}")
        XCTAssertEqual(try iid("/iid/v1/a1/rel/topics/bad%20topic", "").text, #"{"error":"Topic name format is invalid"}"#)
        XCTAssertEqual(try iid("/iid/v1/nobody/rel/topics/sport", "").status, 404)
        XCTAssertEqual(try iid("/iid/v1/nobody/rel/topics/sport", "").text, #"{"error":"NOT_FOUND"}"#)
        let malformed = try iid("/iid/v1/bad%20token/rel/topics/sport", "")
        XCTAssertEqual(malformed.status, 400)
        XCTAssertEqual(malformed.text, #"{"error":"INVALID_ARGUMENT"}"#)
        let info = try client.request("GET", "/iid/info/a1?details=true", headers: [("Authorization", "key=key-111")])
        let o = try XCTUnwrap(info.object)
        XCTAssertEqual(o["application"]?.stringValue, "com.a")
        XCTAssertEqual(o["authorizedEntity"]?.stringValue, "111")
        XCTAssertEqual(o["platform"]?.stringValue, "ANDROID")
        let date = o["rel"]?.objectValue?["topics"]?.objectValue?["news"]?.objectValue?["addDate"]?.stringValue ?? ""
        XCTAssertTrue(date.count == 10 && date.hasPrefix("20"), date)
        XCTAssertNil(try client.request("GET", "/iid/info/a1", headers: [("Authorization", "key=key-111")]).object?["rel"])
        XCTAssertEqual(try client.request("GET", "/iid/info/b1", headers: [("Authorization", "key=key-111")]).status, 404)
        XCTAssertEqual(try iid("/iid/v1:batchRemove", #"{"to":"/topics/news","registration_tokens":["a1"]}"#).text, #"{"results":[{}]}"#)
        XCTAssertEqual(try client.get("/api/v1/topics/news").object?["count"]?.numberValue?.int64, 1)
        XCTAssertEqual(items(try client.get("/api/v1/topics")).map { $0["name"]?.stringValue }, ["news", "sport"])
        // Bad batches.
        XCTAssertEqual(try iid("/iid/v1:batchAdd", #"{"to":"/topics/news","registration_tokens":"a1"}"#).status, 400)
        XCTAssertEqual(try iid("/iid/v1:batchAdd", #"{"to":"/topics/bad topic","registration_tokens":["a1"]}"#).status, 400)
        let many = "[" + (0...1000).map { "\"t\($0)\"" }.joined(separator: ",") + "]"
        XCTAssertEqual(try iid("/iid/v1:batchAdd", "{\"to\":\"/topics/x\",\"registration_tokens\":\(many)}").status, 400)
        // Auth: key, or a real Bearer credential with access_token_auth (V1AuthTests); a made-up one is 401.
        XCTAssertEqual(try iid("/iid/v1:batchAdd", #"{"to":"/topics/x","registration_tokens":["a1"]}"#, key: "nope").status, 401)
        let bearer = try client.request("POST", "/iid/v1:batchAdd", headers: [
            ("Content-Type", "application/json"), ("Authorization", "Bearer ya29.x"), ("access_token_auth", "true")],
            body: Array(#"{"to":"/topics/x","registration_tokens":["a1"]}"#.utf8))
        XCTAssertEqual(bearer.status, 401)
    }

    func testTooManyTopics() throws {
        for i in 0..<2000 {
            XCTAssertEqual(try iid("/iid/v1/a1/rel/topics/t\(i)", "").status, 200)
        }
        XCTAssertEqual(try iid("/iid/v1:batchAdd", #"{"to":"/topics/one-more","registration_tokens":["a1","a2"]}"#).text,
                       #"{"results":[{"error":"TOO_MANY_TOPICS"},{}]}"#)
        let single = try iid("/iid/v1/a1/rel/topics/one-more", "")
        XCTAssertEqual(single.status, 400)
        XCTAssertEqual(single.text, #"{"error":"TOO_MANY_TOPICS"}"#)
    }

    func testSubscriptionsSurviveRestartAndResetForgetsThem() throws {
        let dir = try temporaryDirectory("topics")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/t.sqlite")
        XCTAssertEqual(try first.client().post("/api/v1/devices/a1/topics/news").status, 200)
        first.stop()
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/t.sqlite")
        defer { second.stop() }
        let c = second.client()
        XCTAssertEqual(try c.get("/api/v1/topics/news").object?["subscribers"]?.serialized(), #"["a1"]"#)
        XCTAssertEqual(try c.delete("/api/v1/devices/a1/topics/news").object?["topics"]?.serialized(), "[]")
        XCTAssertEqual(try c.post("/api/v1/devices/a1/topics/news").status, 200)
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(items(try c.get("/api/v1/topics")).count, 0)
    }
}
