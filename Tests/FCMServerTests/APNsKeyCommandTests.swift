import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// `fcm-mock apns-key`: the built binary against a running one.
final class APNsKeyCommandTests: XCTestCase {
    func testWritesAnOwnerOnlyP8AndPrintsTheKeyID() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let dir = NSTemporaryDirectory() + "apns-key-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/AuthKey.p8"
        // A file already there, readable by all: the key written over it is the owner's only.
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("old".utf8), attributes: [.posixPermissions: 0o644]))
        let r = try runBinary(["apns-key", "--server", url, "--team", "TEAM123456", "--bundle-id", "com.a", "--bundle-id", "com.b",
                               "--key-id", "KEY1234567", "--out", file])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertEqual(r.stdout, "wrote \(file): key id KEY1234567, team TEAM123456\n")
        let pem = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), pem)
        XCTAssertNoThrow(try P256PrivateKey(pem: pem))
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int, 0o600)
        let teams = try s.client().get("/api/v1/apns/teams").text
        XCTAssertTrue(teams.contains(#""team_id":"TEAM123456","bundle_ids":["com.a","com.b"]"#), teams)
        // The same key id again: the server's refusal, exit 1; no --team: exit 2.
        let again = try runBinary(["apns-key", "--server", url, "--team", "TEAM123456", "--key-id", "KEY1234567"])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stdout.contains("HTTP 409"), again.stdout)
        XCTAssertEqual(try runBinary(["apns-key", "--server", url]).status, 2, "--team is required")
        let printed = try runBinary(["apns-key", "--server", url, "--team", "TEAM123456", "--json"])
        XCTAssertEqual(printed.status, 0)
        XCTAssertNotNil(try JSONParser.parse(printed.stdout).objectValue?["private_key_pem"]?.stringValue)
    }
}
