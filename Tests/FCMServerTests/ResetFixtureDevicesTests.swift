import FCMCore
import HTTPServer
import FCMTesting
import XCTest

/// What a reset puts back of the start-up fixtures' devices when there are several fixture files:
/// the engine remembers each fixture device by its place in all the files' devices, so each one
/// must come back as its own file declares it (platform, app, online flag, fid, APNs token and
/// environment), under its old id, in the order the list had at start. (One made again gets a new
/// creation time, and a new fid when its file gives none.)
final class ResetFixtureDevicesTests: XCTestCase {
    func testAResetPutsBackEachFilesDevicesAsThatFileDeclaresThem() throws {
        let first = #"""
            {"projects":[{"sender_id":"601","server_keys":["k601"],
                          "apps":[{"app":"com.one","platform":"android"},{"app":"com.one.ios","platform":"ios"}]}],
             "devices":[{"token":"one-a","sender_id":"601","app":"com.one"},
                        {"token":"one-b","sender_id":"601","app":"com.one","online":false,"fid":"cAAAAAAAAAAAAAAAAAAAAA"}]}
            """#
        let second = #"""
            {"projects":[{"sender_id":"602","server_keys":["k602"],"apps":[{"app":"com.two.ios","platform":"ios"}]}],
             "devices":[{"token":"two-a","sender_id":"602","platform":"ios","online":false,
                         "apns_token":"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
                         "apns_environment":"production"},
                        {"token":"two-b","sender_id":"601","app":"com.one.ios","platform":"ios"}],
             "subscriptions":{"both":["one-b","two-a"]}}
            """#
        let s = try TestServer(fixtures: [first, second])
        defer { s.stop() }
        let c = s.client()
        func state() throws -> [String] {
            let devices = items(try c.get("/api/v1/devices?limit=100")).map { d in
                ["token", "sender_id", "app", "platform", "state", "online", "apns_token", "apns_environment", "topics"]
                    .map { d[$0]?.serialized() ?? "-" }.joined(separator: " ")
            }
            return devices + ["both: " + (try c.get("/api/v1/topics/both").object?["subscribers"]?.serialized() ?? "none")]
        }
        let atStart = try state()
        XCTAssertEqual(atStart.count, 5, atStart.joined(separator: "\n"))
        XCTAssertTrue(atStart[2].contains(#""production""#), atStart[2])
        XCTAssertTrue(atStart[2].contains("abcdef0123456789abcdef"), atStart[2])
        func fid(_ token: String) throws -> String? { try c.get("/api/v1/devices/" + token).object?["fid"]?.stringValue }
        XCTAssertEqual(try fid("one-b"), "cAAAAAAAAAAAAAAAAAAAAA")
        let kept = try fid("one-a")

        // Every fixture device changed or gone, in both files, and one more made.
        XCTAssertEqual(try c.delete("/api/v1/devices/two-a").status, 204)
        XCTAssertEqual(try c.delete("/api/v1/devices/one-b").status, 204)
        XCTAssertEqual(try c.patch("/api/v1/devices/one-a", #"{"online":false}"#).status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices/two-b:unregister").status, 200)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"token":"later","sender_id":"602"}"#).status, 201)
        XCTAssertNotEqual(try state(), atStart)

        for _ in 0..<2 {
            XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
            XCTAssertEqual(try state(), atStart, "each device as its own file declares it, under its old id")
            XCTAssertEqual(try fid("one-b"), "cAAAAAAAAAAAAAAAAAAAAA", "the fid its file gives")
            XCTAssertEqual(try fid("one-a"), kept, "a device kept keeps its fid")
        }
        XCTAssertEqual(try c.post("/api/v1/reset?fixtures=false").status, 204)
        XCTAssertEqual(items(try c.get("/api/v1/devices")).count, 0)
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try state(), atStart, "made again from the files after a reset that kept none")
    }

    /// A fixture device may be declared `unregistered` (an uninstalled app): it starts so, sends
    /// to it answer NotRegistered, and a reset puts it back so; `refreshed` is refused.
    func testAFixtureDeviceMayBeUnregistered() throws {
        let fixture = #"""
            {"projects":[{"sender_id":"701","server_keys":["k701"],"apps":[{"app":"com.seven","platform":"android"}]}],
             "devices":[{"token":"gone-app","sender_id":"701","state":"unregistered"},{"token":"here","sender_id":"701"}]}
            """#
        let s = try TestServer(fixtures: [fixture])
        defer { s.stop() }
        let c = s.client()
        func state(_ token: String) throws -> String? { try c.get("/api/v1/devices/" + token).object?["state"]?.stringValue }
        XCTAssertEqual(try state("gone-app"), "unregistered")
        XCTAssertEqual(try state("here"), "registered")
        func send(_ token: String) throws -> String? {
            let r = try c.postJSON("/fcm/send", #"{"to":"\#(token)"}"#, headers: [("Authorization", "key=k701")])
            return r.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue
        }
        XCTAssertEqual(try send("gone-app"), "NotRegistered")
        XCTAssertNil(try send("here"))
        XCTAssertEqual(try c.post("/api/v1/devices/here:unregister").status, 200)
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try state("gone-app"), "unregistered", "as its fixture declares it")
        XCTAssertEqual(try state("here"), "registered")
        // The control API takes the same field; a refreshed device cannot be declared.
        let made = try c.post("/api/v1/devices", #"{"token":"made-gone","sender_id":"701","state":"unregistered"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(made.object?["state"]?.stringValue, "unregistered")
        let refused = try c.post("/api/v1/devices", #"{"sender_id":"701","state":"refreshed"}"#)
        XCTAssertEqual(refused.status, 400)
        XCTAssertTrue(refused.text.contains("state must be registered or unregistered"), refused.text)
    }
}
