import FCMCore
import FCMTesting
import Foundation
import XCTest

/// The client subcommands against a running server.
final class CLITests: XCTestCase {
    func testHealthDevicesSendMessages() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let health = try runBinary(["health", "--server", url])
        XCTAssertEqual(health.status, 0, health.stderr)
        XCTAssertTrue(health.stdout.hasPrefix("ok: fcm-mock") && health.stdout.split(separator: "\n").count == 1, health.stdout)
        let devices = try runBinary(["devices", "--server", url])
        XCTAssertEqual(devices.status, 0)
        XCTAssertTrue(devices.stdout.hasPrefix("TOKEN") && devices.stdout.contains("demo-android-offline"), devices.stdout)
        let json = try runBinary(["devices", "--server", url, "--json"])
        XCTAssertEqual((try JSONParser.parse(json.stdout)).objectValue?["items"]?.arrayValue?.count, 5)
        let sent = try runBinary(["send", "--server", url, "--to", "demo-android-1", "--data", "k=v", "--data", "n=1"])
        XCTAssertEqual(sent.status, 0, sent.stdout)
        XCTAssertTrue(sent.stdout.contains("\"success\":1"), sent.stdout)
        let inbox = try runBinary(["messages", "--server", url, "--token", "demo-android-1", "--wait", "5", "--json"])
        let entry = try XCTUnwrap((try JSONParser.parse(inbox.stdout)).objectValue?["items"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(entry["data"]?.serialized(), #"{"k":"v","n":"1"}"#)
        let list = try runBinary(["messages", "--server", url])
        XCTAssertTrue(list.stdout.hasPrefix("MESSAGE_ID") && list.stdout.contains("accepted"), list.stdout)
    }

    /// `devices` follows the pages past 1000; `messages --token` takes `--limit`.
    func testPagesAndLimits() throws {
        let dir = try temporaryDirectory("cli")
        let devices = (0..<1001).map { "{\"token\":\"d\($0)\",\"sender_id\":\"111\",\"app\":\"com.a\"}" }.joined(separator: ",")
        try #"{"projects":[{"sender_id":"111","server_keys":["key-111"],"apps":[{"app":"com.a","platform":"android"}]}],"devices":["#
            .appending(devices + "]}").write(toFile: dir + "/f.json", atomically: true, encoding: .utf8)
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--fixtures", dir + "/f.json"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let all = try runBinary(["devices", "--server", url, "--json"])
        XCTAssertEqual((try JSONParser.parse(all.stdout)).objectValue?["items"]?.arrayValue?.count, 1001)
        XCTAssertEqual(try runBinary(["devices", "--server", url]).stdout.split(separator: "\n").count, 1002, "a header and 1001 rows")
        for n in 1...2 {
            XCTAssertEqual(try runBinary(["send", "--server", url, "--key", "key-111", "--to", "d7", "--data", "n=\(n)"]).status, 0)
        }
        let one = try runBinary(["messages", "--server", url, "--token", "d7", "--limit", "1", "--json"])
        XCTAssertEqual((try JSONParser.parse(one.stdout)).objectValue?["items"]?.arrayValue?.count, 1)
    }

    /// Without --server or FCM_MOCK_URL the client finds the server where `serve` would put it
    /// from the same environment (a container's health check follows FCM_MOCK_HTTP_PORT).
    func testServerDefaultsToFCMMockHTTPPort() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let health = try runBinary(["health"], environment: ["FCM_MOCK_HTTP_PORT": String(s.httpPort)])
        XCTAssertEqual(health.status, 0, health.stdout)
        XCTAssertTrue(health.stdout.contains("at http://127.0.0.1:\(s.httpPort),"), health.stdout)
        let url = try runBinary(["health"], environment: ["FCM_MOCK_HTTP_PORT": "9", "FCM_MOCK_URL": "http://127.0.0.1:\(s.httpPort)"])
        XCTAssertEqual(url.status, 0, "FCM_MOCK_URL wins")
        let tls = try runBinary(["health"], environment: ["FCM_MOCK_HTTP_PORT": String(s.httpPort), "FCM_MOCK_HTTP_TLS": "true"])
        XCTAssertEqual(tls.status, 1, "https is asked of a plain port: \(tls.stdout)")
        XCTAssertTrue(tls.stdout.contains("https://127.0.0.1:\(s.httpPort)"), tls.stdout)
    }

    /// `service-account` writes an SDK's JSON: owner-only when written to a file.
    func testServiceAccount() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let dir = try temporaryDirectory("cli-sa")
        let file = dir + "/sa.json"
        let r = try runBinary(["service-account", "--server", url, "--project", "demo-project", "--out", file])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("wrote \(file): firebase-adminsdk-"), r.stdout)
        let json = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        XCTAssertEqual(json.objectValue?["type"]?.stringValue, "service_account")
        XCTAssertEqual(json.objectValue?["token_uri"]?.stringValue, url + "/token")
        XCTAssertTrue(json.objectValue?["private_key"]?.stringValue?.hasPrefix("-----BEGIN PRIVATE KEY-----") ?? false)
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        let printed = try runBinary(["service-account", "--server", url, "--project", "123456789012"])
        XCTAssertEqual(printed.status, 0)
        XCTAssertEqual((try JSONParser.parse(printed.stdout)).objectValue?["project_id"]?.stringValue, "demo-project")
        XCTAssertEqual(try runBinary(["service-account", "--server", url, "--project", "nope"]).status, 1)
        XCTAssertEqual(try runBinary(["service-account", "--server", url]).status, 2, "--project is required")
        XCTAssertEqual(items(try s.client().get("/api/v1/projects/123456789012/service-accounts")).count, 2)
    }

    /// A server that takes the connection and never answers is unhealthy after 10 s, not after
    /// the minute and more the other commands wait (a CI readiness loop must not hang on it).
    func testHealthGivesUpOnASilentServer() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &size) == 0 }
        }
        XCTAssertTrue(bound)
        let started = Date()
        let r = try runBinary(["health", "--server", "http://127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"], timeout: 30)
        XCTAssertEqual(r.status, 1, r.stdout)
        XCTAssertTrue(r.stdout.hasPrefix("unhealthy"), r.stdout)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
    }

    func testFailures() throws {
        // Nobody listens on this port: one line, exit 1.
        let dead = try runBinary(["health", "--server", "http://127.0.0.1:9"])
        XCTAssertEqual(dead.status, 1)
        XCTAssertEqual(dead.stdout.split(separator: "\n").count, 1)
        XCTAssertTrue(dead.stdout.hasPrefix("unhealthy"), dead.stdout)
        // With --json, JSON either way.
        let deadJSON = try runBinary(["health", "--json", "--server", "http://127.0.0.1:9"])
        XCTAssertEqual(deadJSON.status, 1)
        XCTAssertEqual(deadJSON.stdout, #"{"status":"unhealthy","server":"http://127.0.0.1:9","reason":"no answer"}"# + "\n")
        let badJSON = try runBinary(["health", "--json", "--server", "ftp://x"])
        XCTAssertEqual(badJSON.status, 1)
        XCTAssertEqual(badJSON.stdout, #"{"status":"unhealthy","server":null,"reason":"--server must be http://HOST:PORT or https://HOST:PORT, got 'ftp://x'"}"# + "\n")
        XCTAssertEqual(try runBinary(["devices", "--server", "http://127.0.0.1:9"]).status, 1)
        XCTAssertEqual(try runBinary(["devices", "--bogus"]).status, 2)
        XCTAssertEqual(try runBinary(["send", "--server", "http://127.0.0.1:9"]).status, 2, "send needs --to")
        // Bad option values are bad options (2), said before any request.
        for args in [["messages", "--limit", "abc"], ["messages", "--limit", "0"], ["messages", "--token", "t", "--wait", "61"],
                     ["messages", "--wait", "5"], ["apns-key", "--team", "abc"], ["apns-key", "--team", "TEAM123456", "--key-id", "short"],
                     ["apns-cert", "--bundle-id", "com.a", "--environment", "dev"], ["apns-cert", "--bundle-id", "com.a", "--days", "0"]] {
            let r = try runBinary(args + ["--server", "http://127.0.0.1:9"])
            XCTAssertEqual(r.status, 2, "\(args): \(r.stdout)\(r.stderr)")
            XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, "\(args): \(r.stderr)")
        }
        // health never exits 2 (Docker's HEALTHCHECK reserves it): bad arguments are unhealthy too.
        for args in [["health", "--server", "ftp://x"], ["health", "--server"], ["health", "--bogus"]] {
            let r = try runBinary(args)
            XCTAssertEqual(r.status, 1, "\(args)")
            XCTAssertEqual(r.stdout.split(separator: "\n").count, 1, "\(args)")
            XCTAssertTrue(r.stdout.hasPrefix("unhealthy: "), r.stdout)
        }
        // The control token is passed on.
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--control-token", "t0k"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        XCTAssertEqual(try runBinary(["devices", "--server", url]).status, 1)
        XCTAssertEqual(try runBinary(["devices", "--server", url, "--control-token", "t0k"]).status, 0)
    }
}
