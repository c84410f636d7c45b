import APNs
import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// `fcm-mock apns-cert`: the built binary against a running one with an HTTPS port.
final class APNsCertCommandTests: XCTestCase {
    func testWritesTheCertificateAndKeyAsOneOwnerOnlyPEM() throws {
        let dir = NSTemporaryDirectory() + "apns-cert-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--https-port", "0", "--tls-dir", dir + "/tls"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let file = dir + "/apns.pem"
        let r = try runBinary(["apns-cert", "--server", url, "--bundle-id", "com.example.demo.ios", "--environment", "both", "--out", file])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        let pem = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(pem.hasPrefix("-----BEGIN CERTIFICATE-----\n") && pem.contains("-----BEGIN PRIVATE KEY-----\n"), pem)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int, 0o600)
        let read = try APNsClientCertificate(pem: pem)
        XCTAssertEqual(r.stdout, "wrote \(file): certificate \(read.serial), com.example.demo.ios, sandbox and production\n")
        XCTAssertEqual(read.environments, [.sandbox, .production])
        let listed = try s.client().get("/api/v1/apns/certificates").text
        XCTAssertTrue(listed.contains(#""id":"\#(read.serial)","bundle_id":"com.example.demo.ios""#), listed)
        // Several apps, JSON out: the answer without the key, which is in the file.
        let two = try runBinary(["apns-cert", "--server", url, "--bundle-id", "com.a", "--bundle-id", "com.b", "--days", "7",
                                 "--json", "--out", dir + "/two.pem"])
        XCTAssertEqual(two.status, 0, two.stdout + two.stderr)
        let o = try XCTUnwrap(JSONParser.parse(two.stdout).objectValue)
        XCTAssertEqual(o["topics"]?.arrayValue?.count, 6)
        XCTAssertNil(o["private_key_pem"])
        XCTAssertEqual(o["out"]?.stringValue, dir + "/two.pem")
        // The server's refusal: exit 1 with its message (64 apps besides the first, over its 63).
        let many = (1...64).flatMap { ["--bundle-id", "com.b\($0)"] }
        let bad = try runBinary(["apns-cert", "--server", url, "--bundle-id", "com.a"] + many)
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stdout.contains("HTTP 400") && bad.stdout.contains("at most 63"), bad.stdout)
        // A value the command checks itself is a bad option: exit 2; so is no --bundle-id.
        let staging = try runBinary(["apns-cert", "--server", url, "--bundle-id", "com.a", "--environment", "staging"])
        XCTAssertEqual(staging.status, 2)
        XCTAssertTrue(staging.stderr.contains("sandbox, production or both"), staging.stderr)
        XCTAssertEqual(try runBinary(["apns-cert", "--server", url]).status, 2, "--bundle-id is required")
    }
}
