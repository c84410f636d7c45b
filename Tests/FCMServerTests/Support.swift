import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

let demoKey = DemoProject.serverKey
let jsonType = "application/json; charset=UTF-8"

/// A second project and devices of every kind the error table needs.
let errorTableFixture = """
    {"projects": [
       {"sender_id": "111", "server_keys": ["key-111"],
        "apps": [{"app": "com.a", "platform": "android"},
                 {"app": "com.a.ios", "platform": "ios", "apns_credential": "valid"},
                 {"app": "com.a.ios.nocred", "platform": "ios", "apns_credential": "missing"}]},
       {"sender_id": "222", "server_keys": ["key-222"], "apps": [{"app": "com.b", "platform": "android"}]}],
     "devices": [
       {"token": "a1", "sender_id": "111", "app": "com.a"},
       {"token": "a2", "sender_id": "111", "app": "com.a"},
       {"token": "ios-ok", "sender_id": "111", "app": "com.a.ios", "platform": "ios"},
       {"token": "ios-nocred", "sender_id": "111", "app": "com.a.ios.nocred", "platform": "ios"},
       {"token": "a-offline", "sender_id": "111", "app": "com.a", "online": false},
       {"token": "b1", "sender_id": "222", "app": "com.b"}]}
    """

extension HTTPTestClient {
    /// POST /fcm/send with a JSON body and a server key.
    func sendJSON(_ json: String, key: String? = "key-111", path: String = "/fcm/send") throws -> WireResponse {
        var headers = [("Content-Type", "application/json")]
        if let key { headers.append(("Authorization", "key=\(key)")) }
        return try request("POST", path, headers: headers, body: Array(json.utf8))
    }

    /// POST /fcm/send with a plain-text (form) body.
    func sendPlain(_ body: String, key: String? = "key-111", contentType: String? = "application/x-www-form-urlencoded;charset=UTF-8") throws -> WireResponse {
        var headers: [(String, String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let key { headers.append(("Authorization", "key=\(key)")) }
        return try request("POST", "/fcm/send", headers: headers, body: Array(body.utf8))
    }

    func get(_ path: String) throws -> WireResponse { try request("GET", path) }

    func post(_ path: String, _ json: String = "") throws -> WireResponse {
        try request("POST", path, headers: [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    func patch(_ path: String, _ json: String) throws -> WireResponse {
        try request("PATCH", path, headers: [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    func delete(_ path: String) throws -> WireResponse { try request("DELETE", path) }
}

/// The `results` of a JSON send answer.
func results(_ r: WireResponse, file: StaticString = #filePath, line: UInt = #line) -> [JSONObject] {
    XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
    return r.object?["results"]?.arrayValue?.compactMap(\.objectValue) ?? []
}

/// The single error of a one-recipient JSON answer, checking the envelope on the way.
func singleError(_ r: WireResponse, file: StaticString = #filePath, line: UInt = #line) -> String? {
    let res = results(r, file: file, line: line)
    XCTAssertEqual(res.count, 1, r.text, file: file, line: line)
    if let e = res.first?["error"]?.stringValue {
        XCTAssertEqual(r.object?["failure"]?.numberValue?.int64, 1, file: file, line: line)
        XCTAssertEqual(r.object?["success"]?.numberValue?.int64, 0, file: file, line: line)
        XCTAssertEqual(res.first?.keys, ["error"], file: file, line: line)
        return e
    }
    return nil
}

func items(_ r: WireResponse, file: StaticString = #filePath, line: UInt = #line) -> [JSONObject] {
    XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
    return r.object?["items"]?.arrayValue?.compactMap(\.objectValue) ?? []
}

let messageIDPattern = try! NSRegularExpression(pattern: "^0:[0-9]{16}%[0-9a-f]{16}$")

func isMessageID(_ s: String?) -> Bool {
    guard let s else { return false }
    return messageIDPattern.numberOfMatches(in: s, range: NSRange(s.startIndex..., in: s)) == 1
}

/// Percent-encodes a path segment (message ids contain `%` and `:`).
func pathEncode(_ s: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-_.")
    return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
}

extension XCTestCase {
    /// A new empty directory, removed with its contents when the test ends.
    func temporaryDirectory(_ label: String) throws -> String {
        let dir = NSTemporaryDirectory() + "fcm-\(label)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }
}

/// End-to-end tests against an in-process server with `errorTableFixture`, a fresh one per test.
class ServerTestCase: XCTestCase {
    var server: TestServer!
    var client: HTTPTestClient!

    override func setUpWithError() throws {
        server = try TestServer(fixtures: [errorTableFixture])
        client = server.client()
    }

    override func tearDown() {
        client?.disconnect()
        server?.stop()
    }

    /// Waits (at most 10 s) until `n` event-stream readers are attached.
    func waitForReaders(_ n: Int64) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64) != n {}
    }
}

/// Every recipient message id the server has recorded, paging through `GET /api/v1/messages`.
func storedRecipientIDs(_ client: HTTPTestClient) throws -> Set<String> {
    var stored = Set<String>()
    var cursor = ""
    repeat {
        let page = try client.get("/api/v1/messages?limit=1000" + (cursor.isEmpty ? "" : "&cursor=\(cursor)"))
        for m in items(page) {
            for r in m["recipients"]?.arrayValue ?? [] {
                if let id = r.objectValue?["message_id"]?.stringValue { stored.insert(id) }
            }
        }
        cursor = page.object?["next"]?.stringValue ?? ""
    } while !cursor.isEmpty
    return stored
}

@testable import FCMEngine
@testable import FCMModel
import FCMServer

/// `RateLimit.parse` as `[count, periodMillis]`, for table tests.
func RateLimitParse(_ s: String) -> [Int64]? {
    RateLimit.parse(s).map { [Int64($0.count), $0.periodMillis] }
}

/// HMAC-SHA256 of `message` keyed with `key`, by openssl's command line: what an attacker signs
/// an HS256 JWT with when the key is a service account's public key PEM (the classic
/// algorithm-confusion attack), so the refusal is tested with a correctly signed token.
func hmacSHA256(key: [UInt8], message: [UInt8]) throws -> [UInt8] {
    let file = NSTemporaryDirectory() + "fcm-mock-hmac-\(UUID().uuidString)"
    try Data(message).write(to: URL(fileURLWithPath: file))
    defer { try? FileManager.default.removeItem(atPath: file) }
    let hexKey = key.map { String(format: "%02x", $0) }.joined()
    let r = try runProcess("/usr/bin/openssl", ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", file])
    guard r.status == 0, let hex = r.stdout.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines),
          hex.count == 64 else { throw TestFailure("openssl could not compute an HMAC: \(r.stderr)") }
    var out: [UInt8] = []
    var i = hex.startIndex
    while i < hex.endIndex {
        let j = hex.index(i, offsetBy: 2)
        out.append(UInt8(hex[i..<j], radix: 16)!)
        i = j
    }
    return out
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// What curl prints with `-i`: the status, the header fields by lower-case name (the last of a
/// repeated one), and the body.
func curlAnswer(_ stdout: String) -> WireResponse {
    let parts = stdout.components(separatedBy: "\r\n\r\n")
    let head = parts[0].components(separatedBy: "\r\n")
    var fields: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    let status = head[0].split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return WireResponse(status: status, headers: fields, body: Array(parts.dropFirst().joined(separator: "\r\n\r\n").utf8))
}

extension XCTestCase {
    /// Polls `check` every 20 ms until it holds; fails the test naming `what` after `timeout`.
    func waitFor(_ what: String, timeout: TimeInterval = 10, _ check: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try check() { return }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(what)")
    }
}
