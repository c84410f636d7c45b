import HTTPServer
import FCMCore
import FCMStore
import FCMTesting
import Foundation
import XCTest

/// Firebase installation ids of fake devices: made, given, unique, found, kept across restarts.
final class FidTests: XCTestCase {
    static let fidPattern = try! NSRegularExpression(pattern: "^[c-f][A-Za-z0-9_-]{21}$")

    func isFID(_ s: String?) -> Bool {
        guard let s else { return false }
        return Self.fidPattern.numberOfMatches(in: s, range: NSRange(s.startIndex..., in: s)) == 1
    }

    func testEveryDeviceHasOneAndIsFoundByIt() throws {
        let server = try TestServer(fixtures: [v1Fixture])
        defer { server.stop() }
        let client = server.client()
        let devices = items(try client.get("/api/v1/devices"))
        XCTAssertEqual(devices.count, 6)
        XCTAssertTrue(devices.allSatisfy { isFID($0["fid"]?.stringValue) }, "\(devices.map { $0["fid"] })")
        XCTAssertEqual(Set(devices.compactMap { $0["fid"]?.stringValue }).count, 6, "all different")
        XCTAssertEqual(devices.first?["fid"]?.stringValue, "dFixedInstallationId01", "the fixture's")
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["token"]?.stringValue, "a1")
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["fid"]?.stringValue, "dFixedInstallationId01")
        XCTAssertEqual(try client.get("/api/v1/devices/eNoSuchInstallation012").status, 404)
        // Given on creation, unique, well-formed.
        let made = try client.post("/api/v1/devices", #"{"sender_id":"111","fid":"fGivenInstallationId_9"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(made.object?["fid"]?.stringValue, "fGivenInstallationId_9")
        let clash = try client.post("/api/v1/devices", #"{"sender_id":"111","fid":"fGivenInstallationId_9"}"#)
        XCTAssertEqual(clash.status, 409)
        XCTAssertEqual(clash.object?["error"]?.objectValue?["code"]?.stringValue, "conflict")
        for bad in ["aBadFirstCharacter0123", "short", "dHas+InvalidCharacter1"] {
            let r = try client.post("/api/v1/devices", #"{"sender_id":"111","fid":"\#(bad)"}"#)
            XCTAssertEqual(r.status, 400, bad)
            XCTAssertEqual(r.object?["error"]?.objectValue?["message"]?.stringValue,
                           "fid must be 22 characters of base64url (A-Z a-z 0-9 - _) starting with c, d, e or f")
        }
        // A device registered by a send to an unknown token gets one too.
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"brand-new-token"}"#)))
        XCTAssertTrue(isFID(try client.get("/api/v1/devices/brand-new-token").object?["fid"]?.stringValue))
        // A deleted device's fid is free again; a refreshed one's follows its new token, and the
        // reset puts the fixture's device back with it.
        XCTAssertEqual(try client.delete("/api/v1/devices/a2").status, 204)
        let fresh = try XCTUnwrap(try client.post("/api/v1/devices/a1:refresh").object)
        XCTAssertEqual(fresh["fid"]?.stringValue, "dFixedInstallationId01")
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["token"]?.stringValue, fresh["token"]?.stringValue)
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["token"]?.stringValue, "a1")
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["state"]?.stringValue, "registered")
    }

    /// fids are stored; a store from before schema 10 gives its devices fids once, and keeps them.
    func testFIDsSurviveRestartsAndOldStoresGetThem() throws {
        let dir = try temporaryDirectory("fid")
        let db = dir + "/fcm.db"
        var server = try TestServer(fixtures: [v1Fixture], db: db)
        var client = server.client()
        let before = try XCTUnwrap(try client.get("/api/v1/devices/a2").object?["fid"]?.stringValue)
        let fresh = try XCTUnwrap(try client.post("/api/v1/devices/a1:refresh").object?["token"]?.stringValue)
        server.stop()
        server = try TestServer(db: db)
        client = server.client()
        XCTAssertEqual(try client.get("/api/v1/devices/a2").object?["fid"]?.stringValue, before)
        XCTAssertEqual(try client.get("/api/v1/devices/dFixedInstallationId01").object?["token"]?.stringValue, fresh)
        server.stop()
        // As a store written before fids: every fid gone.
        let store = try Store(path: db)
        try store.wait(for: store.submit([{ c in try c.run("UPDATE devices SET fid = NULL", []) }]))
        store.close()
        server = try TestServer(db: db)
        client = server.client()
        let given = try XCTUnwrap(try client.get("/api/v1/devices/a2").object?["fid"]?.stringValue)
        XCTAssertTrue(isFID(given))
        let oldA1 = try client.get("/api/v1/devices/a1").object?["fid"]?.stringValue
        XCTAssertTrue(isFID(oldA1))
        XCTAssertEqual(try client.get("/api/v1/devices/\(fresh)").object?["fid"]?.stringValue, oldA1, "the refreshed token's device shares it")
        XCTAssertEqual(try client.get("/api/v1/devices/\(oldA1!)").object?["token"]?.stringValue, fresh)
        server.stop()
        server = try TestServer(db: db)
        defer { server.stop() }
        XCTAssertEqual(try server.client().get("/api/v1/devices/a2").object?["fid"]?.stringValue, given, "written back at the first start")
    }
}
