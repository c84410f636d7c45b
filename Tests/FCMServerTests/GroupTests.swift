import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// Device groups: `/fcm/notification` and sends to a notification key (issue 4).
final class GroupTests: ServerTestCase {
    func op(_ json: String, key: String = "key-111", project: String? = "111", path: String = "/fcm/notification") throws -> WireResponse {
        var headers = [("Content-Type", "application/json"), ("Authorization", "key=\(key)")]
        if let project { headers.append(("project_id", project)) }
        return try client.request("POST", path, headers: headers, body: Array(json.utf8))
    }

    func testLifecycleAndSends() throws {
        let created = try op(#"{"operation":"create","notification_key_name":"appUser-Chris","registration_ids":["a1","a2"]}"#)
        XCTAssertEqual(created.status, 200, created.text)
        XCTAssertEqual(created.object?.keys, ["notification_key"])
        let key = try XCTUnwrap(created.object?["notification_key"]?.stringValue)
        XCTAssertTrue(key.hasPrefix("APA91b") && !key.contains(":") && key.count > 100, key)
        let got = try client.request("GET", "/fcm/notification?notification_key_name=appUser-Chris",
                                     headers: [("Authorization", "key=key-111"), ("project_id", "111")])
        XCTAssertEqual(got.text, "{\"notification_key\":\"\(key)\"}")
        XCTAssertEqual(try op("{\"operation\":\"add\",\"notification_key_name\":\"appUser-Chris\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a-offline\"]}").text,
                       "{\"notification_key\":\"\(key)\"}")
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").object?["members"]?.serialized(), #"["a1","a2","a-offline"]"#)
        // registration_ids takes registration tokens: the project's own key there is not one.
        let listed = try client.sendJSON("{\"registration_ids\":[\"a1\",\"\(key)\"]}")
        XCTAssertEqual(results(listed).map { $0["error"]?.stringValue }, [nil, "InvalidRegistration"])

        // A send to the key reaches every member.
        let sent = try client.sendJSON("{\"to\":\"\(key)\",\"data\":{\"k\":\"v\"}}")
        XCTAssertEqual(sent.text, #"{"success":3,"failure":0}"#)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).last?["via"]?.objectValue?["target"]?.stringValue, "group")
        XCTAssertEqual(items(try client.get("/api/v1/devices/a-offline/messages")).last?["status"]?.stringValue, "pending")
        // An uninstalled member fails and is listed.
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertEqual(try client.sendJSON("{\"to\":\"\(key)\"}").text, #"{"success":2,"failure":1,"failed_registration_ids":["a2"]}"#)
        XCTAssertEqual(items(try client.get("/api/v1/messages?limit=1")).first?["target"]?.serialized(), "{\"kind\":\"group\",\"value\":\"\(key)\"}")
        // Plain text to the key answers in plain text: the message id.
        let plain = try client.sendPlain("registration_id=\(key)&data.k=v")
        XCTAssertEqual(plain.headers["content-type"], "text/plain; charset=UTF-8")
        let plainID = String(plain.text.dropFirst(3).dropLast())
        XCTAssertTrue(plain.text.hasPrefix("id=") && isMessageID(plainID), plain.text)
        XCTAssertEqual(try client.get("/api/v1/messages/\(pathEncode(plainID))").object?["recipients"]?.arrayValue?.count, 2, "a1 and a-offline")

        // Removing every member deletes the group.
        XCTAssertEqual(try op("{\"operation\":\"remove\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a1\",\"a-offline\"]}").status, 200)
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").object?["members"]?.serialized(), #"["a2"]"#)
        // a2 was uninstalled: it can no longer join a group, but it can still be removed (the
        // app server removes what a send listed as failed), and it was the last member.
        XCTAssertEqual(try op("{\"operation\":\"add\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a2\"]}").text,
                       #"{"error":"no valid registration ids"}"#)
        XCTAssertEqual(try op("{\"operation\":\"remove\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a2\"]}").status, 200)
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").status, 404, "removing the last member deletes the group")
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"111","token":"a3"}"#).status, 201)
        let g2 = try XCTUnwrap(try op(#"{"operation":"create","notification_key_name":"solo","registration_ids":["a3"]}"#).object?["notification_key"]?.stringValue)
        XCTAssertEqual(try op("{\"operation\":\"remove\",\"notification_key\":\"\(g2)\",\"registration_ids\":[\"a3\"]}").status, 200)
        XCTAssertEqual(try client.get("/api/v1/groups/\(g2)").status, 404)
        XCTAssertEqual(try client.request("GET", "/fcm/notification?notification_key_name=solo",
                                          headers: [("Authorization", "key=key-111"), ("project_id", "111")]).text,
                       #"{"error":"notification_key not found"}"#)
    }

    /// A refreshed member's place goes to its new token: group sends reach it, and removing the
    /// old token (what the app server knows) removes it.
    func testRefreshedMemberKeepsItsPlaceUnderTheNewToken() throws {
        let key = try XCTUnwrap(try op(#"{"operation":"create","notification_key_name":"r","registration_ids":["a1","a2"]}"#)
            .object?["notification_key"]?.stringValue)
        let fresh = try XCTUnwrap(try client.post("/api/v1/devices/a1:refresh").object?["token"]?.stringValue)
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").object?["members"]?.serialized(), "[\"\(fresh)\",\"a2\"]")
        XCTAssertEqual(try client.sendJSON("{\"to\":\"\(key)\",\"data\":{\"k\":\"v\"}}").text, #"{"success":2,"failure":0}"#)
        XCTAssertEqual(items(try client.get("/api/v1/devices/\(fresh)/messages")).last?["via"]?.objectValue?["target"]?.stringValue, "group")
        XCTAssertEqual(try op("{\"operation\":\"remove\",\"notification_key_name\":\"r\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a1\"]}").status, 200)
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").object?["members"]?.serialized(), #"["a2"]"#)
    }

    /// The key of a deleted group is nobody's token: a send to it is NotRegistered (it is not
    /// registered as a new device), after a restart too, until a reset.
    func testDeletedGroupKeyIsNotRegistered() throws {
        let dir = try temporaryDirectory("groups")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/g.sqlite")
        let c1 = first.client()
        let create = #"{"operation":"create","notification_key_name":"gone","registration_ids":["a1"]}"#
        let key = try XCTUnwrap(try c1.request("POST", "/fcm/notification", headers: [("Content-Type", "application/json"),
                                                                                     ("Authorization", "key=key-111"), ("project_id", "111")],
                                               body: Array(create.utf8)).object?["notification_key"]?.stringValue)
        let remove = "{\"operation\":\"remove\",\"notification_key_name\":\"gone\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a1\"]}"
        XCTAssertEqual(try c1.request("POST", "/fcm/notification", headers: [("Content-Type", "application/json"),
                                                                          ("Authorization", "key=key-111"), ("project_id", "111")],
                                      body: Array(remove.utf8)).status, 200)
        XCTAssertEqual(singleError(try c1.sendJSON("{\"to\":\"\(key)\",\"data\":{\"k\":\"v\"}}")), "NotRegistered")
        XCTAssertEqual(try c1.sendPlain("registration_id=\(key)").text, "Error=NotRegistered\n")
        XCTAssertEqual(try c1.get("/api/v1/devices/\(key)").status, 404, "no device was made of the key")
        c1.disconnect()
        first.stop()
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/g.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        XCTAssertEqual(singleError(try c2.sendJSON("{\"to\":\"\(key)\"}")), "NotRegistered")
        XCTAssertEqual(try c2.post("/api/v1/reset").status, 204)
        XCTAssertNil(singleError(try c2.sendJSON("{\"to\":\"\(key)\"}")), "after a reset it is an unknown token like any other")
    }

    func testErrorsChangeNothing() throws {
        let key = try XCTUnwrap(try op(#"{"operation":"create","notification_key_name":"g","registration_ids":["a1"]}"#).object?["notification_key"]?.stringValue)
        let cases: [(String, String)] = [
            (#"{"operation":"create","notification_key_name":"g","registration_ids":["a2"]}"#, "notification_key already exists"),
            (#"{"operation":"add","notification_key":"APA91bnope","registration_ids":["a2"]}"#, "notification_key not found"),
            ("{\"operation\":\"add\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"nobody\"]}", "no valid registration ids"),
            ("{\"operation\":\"add\",\"notification_key_name\":\"other\",\"notification_key\":\"\(key)\",\"registration_ids\":[\"a2\"]}",
             "notification_key_name doesn't match the group name of the notification_key"),
            (#"{"operation":"create","notification_key_name":"x","registration_ids":["b1"]}"#, "no valid registration ids"),
            (#"{"operation":"rename","notification_key_name":"x","registration_ids":["a1"]}"#, "operation must be create, add or remove"),
        ]
        for (body, message) in cases {
            let r = try op(body)
            XCTAssertEqual(r.status, 400, body)
            XCTAssertEqual(r.text, "{\"error\":\"\(message)\"}", body)
        }
        XCTAssertEqual(try client.get("/api/v1/groups/\(key)").object?["members"]?.serialized(), #"["a1"]"#, "nothing half-applied")
        // 20 members at most: a 21st fails and the group stays as it was.
        var tokens: [String] = []
        for i in 0..<20 {
            XCTAssertEqual(try client.post("/api/v1/devices", "{\"sender_id\":\"111\",\"token\":\"m\(i)\"}").status, 201)
            tokens.append("\"m\(i)\"")
        }
        let big = try XCTUnwrap(try op("{\"operation\":\"create\",\"notification_key_name\":\"big\",\"registration_ids\":[\(tokens.joined(separator: ","))]}").object?["notification_key"]?.stringValue)
        let over = try op("{\"operation\":\"add\",\"notification_key\":\"\(big)\",\"registration_ids\":[\"a1\"]}")
        XCTAssertEqual(over.status, 400)
        XCTAssertEqual(try client.get("/api/v1/groups/\(big)").object?["members"]?.arrayValue?.count, 20)
        // Auth and project_id.
        XCTAssertEqual(try op(#"{"operation":"create","notification_key_name":"y","registration_ids":["a1"]}"#, key: "nope").status, 401)
        XCTAssertEqual(try op(#"{"operation":"create","notification_key_name":"y","registration_ids":["a1"]}"#, project: nil).status, 400)
        XCTAssertEqual(try op(#"{"operation":"create","notification_key_name":"y","registration_ids":["a1"]}"#, project: "222").status, 401)
        // The same paths under /gcm/.
        XCTAssertEqual(try op(#"{"operation":"create","notification_key_name":"y","registration_ids":["a1"]}"#, path: "/gcm/notification").status, 200)
        // A key of another project, used by this one: MismatchSenderId.
        let other = try XCTUnwrap(try op(#"{"operation":"create","notification_key_name":"z","registration_ids":["b1"]}"#, key: "key-222", project: "222").object?["notification_key"]?.stringValue)
        XCTAssertEqual(singleError(try client.sendJSON("{\"to\":\"\(other)\"}")), "MismatchSenderId")
        XCTAssertEqual(try client.get("/api/v1/devices/\(other)").status, 404, "no device was made of the key")
    }

    func testFixturesWithSubscriptionsAndGroupsAreIdempotent() throws {
        let fx = """
            {"projects":[{"sender_id":"5","server_keys":["k5"]}],
             "devices":[{"sender_id":"5","token":"d1"},{"sender_id":"5","token":"d2"}],
             "subscriptions":{"news":["d1","d2"],"sport":["d1"]},
             "groups":[{"notification_key_name":"family","sender_id":"5","members":["d1","d2"]}]}
            """
        let s = try TestServer(fixtures: [fx, fx])
        defer { s.stop() }
        let c = s.client()
        XCTAssertEqual(try c.get("/api/v1/topics/news").object?["count"]?.numberValue?.int64, 2)
        XCTAssertEqual(try c.get("/api/v1/devices/d1").object?["topics"]?.serialized(), #"["news","sport"]"#)
        let groups = items(try c.get("/api/v1/groups"))
        XCTAssertEqual(groups.count, 1, "loading twice made one group")
        XCTAssertEqual(groups.first?["members"]?.serialized(), #"["d1","d2"]"#)
        let bad = try runBinary(["serve", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0", "--fixtures",
                                 try writeTemp(#"{"subscriptions":{"news":["nobody"]}}"#)])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("$.subscriptions.news[0]"), bad.stderr)
    }

    func writeTemp(_ text: String) throws -> String {
        let p = NSTemporaryDirectory() + "fx-\(UUID().uuidString).json"
        try text.write(toFile: p, atomically: true, encoding: .utf8)
        return p
    }
}
