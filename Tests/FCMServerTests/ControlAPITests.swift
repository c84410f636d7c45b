import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// The control API core (docs/spec/control-api.md) over real HTTP.
final class ControlAPITests: ServerTestCase {
    func testHealth() throws {
        let r = try client.get("/api/v1/health")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        XCTAssertEqual(r.object?.keys, ["status", "store", "store_messages", "store_bytes", "version", "uptime_s", "event_readers", "tls_ca", "apns", "webpush", "clients"])
        XCTAssertEqual(r.object?["status"]?.stringValue, "ok")
        XCTAssertEqual(r.object?["store"]?.stringValue, "ok")
        XCTAssertEqual(r.object?["store_messages"]?.numberValue?.int64, 0)
        XCTAssertEqual(r.object?["apns"]?.serialized(),
                       #"{"default_environment":"sandbox","environments":["production","sandbox"],"h2c":true,"tls":false,"teams":0,"keys":0}"#)
    }

    /// HEAD takes a GET route: the health checks (`wget --spider`, `curl -I`) get the head of
    /// the GET answer, its length and no body, over HTTP/1.1 (HTTP/2: HTTPServerTests).
    func testHeadAnswersTheGETsHeadWithoutItsBody() throws {
        for path in ["/readyz", "/livez", "/api/v1/health"] {
            let text = try RoutingTests.exchange(server.port, "HEAD", path)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 200 "), text)
            XCTAssertTrue(text.hasSuffix("\n\n"), "no body: \(text)")
            let length = text.split(separator: "\n").first { $0.lowercased().hasPrefix("content-length:") }
            XCTAssertNotEqual(length.map { $0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces) }, "0", text)
        }
    }

    func testErrorShape() throws {
        let r = try client.get("/api/v1/devices/nobody")
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        XCTAssertEqual(r.text, #"{"error":{"code":"not_found","message":"device 'nobody' does not exist"}}"#)
        XCTAssertEqual(try client.get("/api/v1/nothing-here").object?["error"]?.objectValue?["code"]?.stringValue, "not_found")
        let bad = try client.post("/api/v1/devices", "{not json")
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.object?["error"]?.objectValue?["code"]?.stringValue, "bad_request")
        let unknownField = try client.post("/api/v1/devices", #"{"sender_id":"111","colour":"red"}"#)
        XCTAssertEqual(unknownField.status, 400)
        XCTAssertTrue(unknownField.text.contains("colour"), unknownField.text)
        XCTAssertEqual(try client.get("/api/v1/messages?limit=0").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages?limit=1001").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages?cursor=abc").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages/not-an-id").status, 404)
        // A filter the list does not have (or a misspelt one) is refused, not passed over.
        for (path, name) in [("/api/v1/devices?platform=ios", "platform"), ("/api/v1/devices?online=false", "online"),
                             ("/api/v1/messages?staus=pending", "staus"), ("/api/v1/devices/a1/messages?stauts=pending", "stauts")] {
            let r = try client.get(path)
            XCTAssertEqual(r.status, 400, path)
            XCTAssertTrue(r.text.contains("unknown query parameter '\(name)': this call takes "), r.text)
        }
        XCTAssertEqual(try client.get("/api/v1/devices?state=registered&not_a_filter=&limit=5").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages?not_status=pending&text=x&limit=5").status, 200)
    }

    func testProjects() throws {
        let created = try client.post("/api/v1/projects", #"{"sender_id":"333","server_keys":["key-333"],"apps":[{"app":"com.c","platform":"ios","apns_credential":"expired"}]}"#)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual(created.object?["apps"]?.serialized(), #"[{"app":"com.c","platform":"ios","apns_credential":"expired"}]"#)
        XCTAssertEqual(try client.post("/api/v1/projects", #"{"sender_id":"333"}"#).status, 409)
        XCTAssertEqual(try client.post("/api/v1/projects", #"{"sender_id":"444","server_keys":["key-111"]}"#).status, 409, "a key belongs to one project")
        XCTAssertEqual(try client.post("/api/v1/projects", #"{"server_keys":["x"]}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/projects", #"{"sender_id":"555","apps":[{"app":"x","apns_credential":"maybe"}]}"#).status, 400)
        XCTAssertEqual(items(try client.get("/api/v1/projects")).map { $0["sender_id"]?.stringValue }, ["111", "222", "333"])
        // Paged like every list.
        let first = try client.get("/api/v1/projects?limit=2").object
        XCTAssertEqual(first?["items"]?.arrayValue?.compactMap { $0.objectValue?["sender_id"]?.stringValue }, ["111", "222"])
        let next = try XCTUnwrap(first?["next"]?.stringValue, "cursors are strings")
        let second = try client.get("/api/v1/projects?limit=2&cursor=\(next)").object
        XCTAssertEqual(second?["items"]?.arrayValue?.compactMap { $0.objectValue?["sender_id"]?.stringValue }, ["333"])
        XCTAssertTrue(second?["next"]?.isNull ?? false)
        XCTAssertEqual(try client.get("/api/v1/projects?limit=abc").status, 400)
        XCTAssertEqual(try client.get("/api/v1/projects/333").object?["server_keys"]?.serialized(), #"["key-333"]"#)
        // The new key works at once; an expired APNs credential fails iOS notifications.
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"333","token":"c-ios","platform":"ios"}"#).status, 201)
        XCTAssertEqual(singleError(try client.sendJSON(#"{"to":"c-ios","notification":{"title":"t"}}"#, key: "key-333")),
                       "InvalidApnsCredential")
        XCTAssertEqual(try client.delete("/api/v1/projects/333").status, 204)
        XCTAssertEqual(try client.get("/api/v1/projects/333").status, 404)
        XCTAssertEqual(try client.sendJSON(#"{"to":"c-ios"}"#, key: "key-333").status, 401)
    }

    func testDeviceLifecycle() throws {
        let created = try client.post("/api/v1/devices", #"{"sender_id":"111","app":"com.a","platform":"android"}"#)
        XCTAssertEqual(created.status, 201)
        let d = try XCTUnwrap(created.object)
        XCTAssertEqual(d.keys, ["token", "fid", "sender_id", "app", "platform", "state", "canonical_token", "online", "topics",
                                "pending", "created_at", "last_seen_at", "client"])
        let token = try XCTUnwrap(d["token"]?.stringValue)
        XCTAssertEqual(token.count, 152, "generated tokens are FCM-shaped")
        XCTAssertEqual(d["state"]?.stringValue, "registered")
        XCTAssertEqual(d["online"]?.boolValue, true)
        XCTAssertEqual(try client.post("/api/v1/devices", "{\"sender_id\":\"111\",\"token\":\"\(token)\"}").status, 409)
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"999"}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"111","token":"bad token"}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"111","platform":"symbian"}"#).status, 400)

        // A real token contains a colon: GET must not read it as a verb.
        let got = try client.get("/api/v1/devices/\(pathEncode(token))")
        XCTAssertEqual(got.object?["token"]?.stringValue, token)
        XCTAssertEqual(try client.get("/api/v1/devices/\(token)").object?["token"]?.stringValue, token)

        // Lists and filters, with paging.
        XCTAssertEqual(items(try client.get("/api/v1/devices?sender_id=222")).map { $0["token"]?.stringValue }, ["b1"])
        XCTAssertEqual(items(try client.get("/api/v1/devices?app=com.a.ios")).map { $0["token"]?.stringValue }, ["ios-ok"])
        let page1 = try client.get("/api/v1/devices?limit=2")
        XCTAssertEqual(items(page1).count, 2)
        let next = try XCTUnwrap(page1.object?["next"]?.stringValue)
        let page2 = try client.get("/api/v1/devices?limit=100&cursor=\(next)")
        XCTAssertEqual(items(page2).count, 5)
        XCTAssertTrue(page2.object?["next"]?.isNull ?? false)

        // Unregister, then delete: unknown again.
        let unreg = try client.post("/api/v1/devices/\(pathEncode(token)):unregister")
        XCTAssertEqual(unreg.object?["state"]?.stringValue, "unregistered")
        XCTAssertEqual(items(try client.get("/api/v1/devices?state=unregistered")).count, 1)
        // It takes no topic, and the answer says why (it is still listed).
        let topic = try client.post("/api/v1/devices/\(pathEncode(token))/topics/news")
        XCTAssertEqual(topic.status, 404)
        XCTAssertEqual(topic.object?["error"]?.objectValue?["message"]?.stringValue, "device '\(token)' is unregistered: it takes no topics")
        XCTAssertEqual(try client.post("/api/v1/devices/nobody/topics/news").object?["error"]?.objectValue?["message"]?.stringValue,
                       "device 'nobody' does not exist")
        XCTAssertEqual(try client.delete("/api/v1/devices/\(pathEncode(token))").status, 204)
        XCTAssertEqual(try client.get("/api/v1/devices/\(pathEncode(token))").status, 404)
        XCTAssertEqual(try client.delete("/api/v1/devices/\(pathEncode(token))").status, 404)
        XCTAssertEqual(try client.post("/api/v1/devices/nobody:refresh").status, 404)
        XCTAssertEqual(try client.patch("/api/v1/devices/nobody", #"{"online":false}"#).status, 404)
        XCTAssertEqual(try client.patch("/api/v1/devices/a1", #"{"online":"no"}"#).status, 400)
    }

    func testOfflineDeviceGetsPendingInOrderWhenBackOnline() throws {
        for i in 1...3 { XCTAssertNil(singleError(try client.sendJSON("{\"to\":\"a-offline\",\"data\":{\"n\":\"\(i)\"}}"))) }
        let pending = items(try client.get("/api/v1/devices/a-offline/messages"))
        XCTAssertEqual(pending.map { $0["status"]?.stringValue }, ["pending", "pending", "pending"])
        XCTAssertEqual(pending.first?["delivered_at"]?.isNull, true)
        XCTAssertEqual(try client.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 3)
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=pending")).count, 3)

        let online = try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#)
        XCTAssertEqual(online.object?["online"]?.boolValue, true)
        XCTAssertEqual(online.object?["pending"]?.numberValue?.int64, 0)
        let inbox = items(try client.get("/api/v1/devices/a-offline/messages"))
        XCTAssertEqual(inbox.map { $0["status"]?.stringValue }, ["delivered", "delivered", "delivered"])
        XCTAssertEqual(inbox.map { $0["data"]?.objectValue?["n"]?.stringValue }, ["1", "2", "3"])
        XCTAssertTrue(inbox.allSatisfy { $0["delivered_at"]?.stringValue != nil })
        XCTAssertEqual(items(try client.get("/api/v1/devices/a-offline/messages?status=pending")).count, 0)

        // TTL 0 to an offline device: expired at once, never delivered.
        XCTAssertEqual(try client.patch("/api/v1/devices/a2", #"{"online":false}"#).status, 200)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a2","time_to_live":0}"#)))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a2/messages")).map { $0["status"]?.stringValue }, ["expired"])
    }

    func testMessagesListAndGetIncludingRejected() throws {
        let ok = try client.sendJSON(#"{"registration_ids":["a1","a2"],"data":{"k":"v"}}"#)
        let ids = results(ok).compactMap { $0["message_id"]?.stringValue }
        XCTAssertEqual(try client.sendJSON(#"{"to":"b1"}"#).status, 200)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1","time_to_live":"x"}"#).status, 400)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)

        let all = items(try client.get("/api/v1/messages"))
        XCTAssertEqual(all.count, 4, "newest first, rejected ones included")
        XCTAssertEqual(all.map { $0["status"]?.stringValue }, ["rejected", "rejected", "rejected", "accepted"])
        XCTAssertEqual(all[0]["http_status"]?.numberValue?.int64, 401)
        XCTAssertEqual(all[1]["error_detail"]?.stringValue, "Field \"time_to_live\" must be a JSON java.lang.Number: x")
        XCTAssertEqual(all[2]["error"]?.stringValue, "MismatchSenderId")
        XCTAssertEqual(all[2]["recipients"]?.serialized(), #"[{"token":"b1","message_id":null,"status":"failed","error":"MismatchSenderId","canonical_token":null}]"#)

        XCTAssertEqual(items(try client.get("/api/v1/messages?status=rejected")).count, 3)
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=accepted")).count, 1)
        XCTAssertEqual(items(try client.get("/api/v1/messages?token=a2")).count, 1)
        XCTAssertEqual(items(try client.get("/api/v1/messages?sender_id=111")).count, 3)
        XCTAssertEqual(items(try client.get("/api/v1/messages?transport=xmpp")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/messages?since=2999-01-01T00:00:00Z")).count, 0)
        XCTAssertEqual(try client.get("/api/v1/messages?status=weird").status, 400)

        // Paging: limit 1, follow next.
        var seen: [String] = []
        var cursor = ""
        repeat {
            let page = try client.get("/api/v1/messages?limit=1" + (cursor.isEmpty ? "" : "&cursor=\(cursor)"))
            seen += items(page).compactMap { $0["message_id"]?.stringValue }
            cursor = page.object?["next"]?.stringValue ?? ""
        } while !cursor.isEmpty
        XCTAssertEqual(seen.count, 4)

        // Any recipient's id finds the multicast's record.
        for id in ids {
            let rec = try client.get("/api/v1/messages/\(pathEncode(id))")
            XCTAssertEqual(rec.status, 200)
            XCTAssertEqual(rec.object?["recipients"]?.arrayValue?.count, 2)
            XCTAssertEqual(rec.object?["target"]?.objectValue?["kind"]?.stringValue, "multicast")
            XCTAssertEqual(rec.object?["recipients"]?.arrayValue?.compactMap { $0.objectValue?["message_id"]?.stringValue }, ids)
        }
    }

    func testLongPollWakesOnConcurrentSend() throws {
        let before = items(try client.get("/api/v1/devices/a1/messages?wait=0"))
        XCTAssertEqual(before.count, 0)
        let port = server.port
        let sender = Thread {
            let c = HTTPTestClient(port: port)
            // The poll below is already waiting when this send arrives, or it finds the message at
            // once: either way it returns with one entry without sleeping for the whole wait.
            _ = try? c.sendJSON(#"{"to":"a1","data":{"k":"late"}}"#)
        }
        let start = Date()
        sender.start()
        let r = try client.get("/api/v1/devices/a1/messages?wait=30&min=1")
        XCTAssertEqual(items(r).count, 1)
        XCTAssertEqual(items(r).first?["data"]?.objectValue?["k"]?.stringValue, "late")
        XCTAssertLessThan(Date().timeIntervalSince(start), 25, "the long poll returned because of the send, not the deadline")
        // min=2 with one entry and a short wait: returns what there is when the wait ends.
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages?wait=0.2&min=2")).count, 1)
        // min above limit: a full page meets it (it waited out the whole wait before).
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        let full = Date()
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages?wait=30&min=5&limit=2")).count, 2)
        XCTAssertLessThan(Date().timeIntervalSince(full), 25, "a full page answers a min above the limit")
        XCTAssertEqual(try client.get("/api/v1/devices/a1/messages?wait=61").status, 400)
        // A device that does not exist: 404 at once without a wait; a wait that ends without
        // it is an empty page (tokens register on first send here).
        XCTAssertEqual(try client.get("/api/v1/devices/nobody/messages").status, 404)
        let empty = try client.get("/api/v1/devices/nobody/messages?wait=0.3")
        XCTAssertEqual(empty.status, 200)
        XCTAssertEqual(items(empty).count, 0)
    }

    func testResetWithoutFixturesForgetsEverythingButProjects() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3600}"#).status, 200)
        let r = try client.post("/api/v1/reset?fixtures=false")
        XCTAssertEqual(r.status, 204)
        XCTAssertEqual(r.body.count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/devices")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/messages")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/projects")).count, 2)
        XCTAssertEqual(try client.get("/api/v1/clock").object?["offset_s"]?.numberValue?.int64, 0)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":-1}"#).status, 400)
        let both = try client.post("/api/v1/clock", #"{"advance_s":10,"reset":true}"#)
        XCTAssertEqual(both.status, 400, "one or the other, not a silent reset")
        XCTAssertTrue(both.text.contains("not both"), both.text)
        // Sends still work after a reset (unknown tokens register again).
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
    }

    /// A reset returns to the state right after start: the fixtures' devices come back with their
    /// platform, state and online flag, their subscriptions and groups (with the same key).
    func testResetReappliesTheFixtures() throws {
        let fixture = #"""
            {"projects":[{"sender_id":"555","server_keys":["key-555"],
                          "apps":[{"app":"com.f","platform":"android"},{"app":"com.f.ios","platform":"ios"}]}],
             "devices":[{"token":"fx-a","sender_id":"555","app":"com.f"},
                        {"token":"fx-off","sender_id":"555","app":"com.f","online":false},
                        {"token":"fx-ios","sender_id":"555","app":"com.f.ios","platform":"ios"}],
             "subscriptions":{"news":["fx-a","fx-ios"]},
             "groups":[{"notification_key_name":"team","sender_id":"555","members":["fx-a","fx-off"]}]}
            """#
        let s = try TestServer(fixtures: [fixture])
        defer { s.stop() }
        let c = s.client()
        func state() throws -> [String] {
            let devices = items(try c.get("/api/v1/devices")).map { d in
                ["token", "platform", "state", "online", "topics", "pending"].map { d[$0]?.serialized() ?? "-" }.joined(separator: " ")
            }
            let groups = items(try c.get("/api/v1/groups")).map { g in
                "\(g["notification_key"]?.stringValue ?? "") \(g["members"]?.serialized() ?? "")"
            }
            return devices + groups + ["topic news: " + (try c.get("/api/v1/topics/news").object?["subscribers"]?.serialized() ?? "none")]
        }
        let atStart = try state()
        XCTAssertEqual(atStart.count, 5, atStart.joined(separator: "\n"))
        XCTAssertTrue(atStart[1].hasPrefix(#""fx-off" "android" "registered" false"#), atStart[1])
        // Change all of it: online flags, an uninstall, a subscription, a group member, new devices.
        XCTAssertEqual(try c.patch("/api/v1/devices/fx-off", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices/fx-ios:unregister").status, 200)
        XCTAssertEqual(try c.delete("/api/v1/devices/fx-a/topics/news").status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"token":"made-later","sender_id":"555"}"#).status, 201)
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"unknown-token-1"}"#, key: "key-555")))
        XCTAssertEqual(try c.post("/api/v1/devices/fx-off:refresh").status, 200)
        XCTAssertEqual(try c.delete("/api/v1/devices/fx-a").status, 204)
        XCTAssertNotEqual(try state(), atStart)

        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try state(), atStart, "the state right after start, group keys included")
        XCTAssertEqual(items(try c.get("/api/v1/messages")).count, 0)
        // The offline fixture device holds a message as an offline device does: it was not
        // re-created as an unknown online one.
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"fx-off","data":{"k":"v"}}"#, key: "key-555")))
        XCTAssertEqual(items(try c.get("/api/v1/devices/fx-off/messages")).first?["status"]?.stringValue, "pending")
        XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"fx-ios","notification":{"title":"t"}}"#, key: "key-555")), nil,
                       "the uninstalled iOS device is registered again")

        XCTAssertEqual(try c.post("/api/v1/reset?fixtures=false").status, 204)
        XCTAssertEqual(items(try c.get("/api/v1/devices")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/groups")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/topics")).count, 0)
        XCTAssertEqual(try c.post("/api/v1/reset?fixtures=true").status, 204)
        XCTAssertEqual(try state(), atStart)
        let bad = try c.post("/api/v1/reset?fixtures=maybe")
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.object?["error"]?.objectValue?["code"]?.stringValue, "bad_request")
        XCTAssertEqual(try state(), atStart, "a refused reset changes nothing")
    }

    /// What a reset puts back is in the store too: a restart on the same file shows it.
    func testResetFixturesSurviveARestart() throws {
        let dir = try temporaryDirectory("reset")
        let fixture = #"{"projects":[{"sender_id":"556","server_keys":["k556"]}],"devices":[{"token":"r-1","sender_id":"556","online":false},{"token":"r-2","sender_id":"556"}]}"#
        let first = try TestServer(fixtures: [fixture], db: dir + "/s.sqlite")
        let c = first.client()
        func devices(_ c: HTTPTestClient) throws -> [String] {
            items(try c.get("/api/v1/devices")).map { d in ["token", "state", "online"].map { d[$0]?.serialized() ?? "" }.joined(separator: " ") }
        }
        let atStart = try devices(c)
        XCTAssertEqual(try c.patch("/api/v1/devices/r-1", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices/r-2:unregister").status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"token":"r-3","sender_id":"556"}"#).status, 201)
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try devices(c), atStart)
        c.disconnect()
        first.stop()
        let second = try TestServer(fixtures: [fixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        XCTAssertEqual(try devices(second.client()), atStart, "the store holds what the reset put back")
    }

    /// HTTP v1 names a project by its id: `project-{sender_id}` unless given, unique, and any
    /// `{project}` path takes either; it survives a restart and fixtures can give it.
    func testProjectIDs() throws {
        let dir = try temporaryDirectory("project-id")
        let fixture = #"{"projects":[{"sender_id":"777","project_id":"shop-prod","server_keys":["k777"]}]}"#
        let s = try TestServer(fixtures: [fixture], db: dir + "/s.sqlite")
        let c = s.client()
        let fromFixture = try c.get("/api/v1/projects/shop-prod")
        XCTAssertEqual(fromFixture.status, 200)
        XCTAssertEqual(fromFixture.object?.keys.prefix(3), ["sender_id", "project_id", "server_keys"])
        XCTAssertEqual(fromFixture.object?["sender_id"]?.stringValue, "777")
        let plain = try c.post("/api/v1/projects", #"{"sender_id":"888"}"#)
        XCTAssertEqual(plain.object?["project_id"]?.stringValue, "project-888")
        XCTAssertEqual(try c.get("/api/v1/projects/project-888").object?["sender_id"]?.stringValue, "888")
        let taken = try c.post("/api/v1/projects", #"{"sender_id":"999","project_id":"shop-prod"}"#)
        XCTAssertEqual(taken.status, 409)
        XCTAssertEqual(taken.object?["error"]?.objectValue?["message"]?.stringValue,
                       "project_id 'shop-prod' is already the id of project '777'")
        for bad in ["", "a b", "a/b", "a:b"] {
            XCTAssertEqual(try c.post("/api/v1/projects", "{\"sender_id\":\"1000\",\"project_id\":\"\(bad)\"}").status, 400, bad)
        }
        XCTAssertEqual(try c.post("/api/v1/projects", #"{"sender_id":"1000","project_id":5}"#).status, 400)
        c.disconnect()
        s.stop()
        let again = try TestServer(fixtures: [fixture], db: dir + "/s.sqlite")
        defer { again.stop() }
        let c2 = again.client()
        XCTAssertEqual(try c2.get("/api/v1/projects/shop-prod").object?["sender_id"]?.stringValue, "777", "kept in the store")
        XCTAssertEqual(try c2.get("/api/v1/projects/project-888").status, 200)
        XCTAssertEqual(try c2.delete("/api/v1/projects/project-888").status, 204, "deleted by its project id")
        XCTAssertEqual(try c2.get("/api/v1/projects/888").status, 404)
    }

    func testControlTokenProtectsTheAPIButNotHealth() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--control-token", "s3cret"])
        defer { s.stop() }
        let c = s.client()
        XCTAssertEqual(try c.get("/api/v1/health").status, 200)
        let denied = try c.get("/api/v1/devices")
        XCTAssertEqual(denied.status, 401)
        XCTAssertEqual(denied.object?["error"]?.objectValue?["code"]?.stringValue, "unauthorized")
        XCTAssertEqual(try c.request("GET", "/api/v1/devices", headers: [("Authorization", "Bearer s3cret")]).status, 200)
    }
}
