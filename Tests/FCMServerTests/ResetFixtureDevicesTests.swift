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
}
