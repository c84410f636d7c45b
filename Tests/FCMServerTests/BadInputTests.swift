import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import Platform
import XCTest

/// The issue's batch of hostile input: each gets a documented answer, never a crash or a 500,
/// and nothing that was accepted goes missing.
final class BadInputTests: ServerTestCase {
    func testBatch() throws {
        let batch: [(String, [UInt8], Int, String?)] = [
            ("invalid UTF-8", Array(#"{"to":"a1","data":{"k":""#.utf8) + [0xFF, 0xFE] + Array(#""}}"#.utf8), 400, nil),
            ("truncated", Array(#"{"to":"a1","data":{"#.utf8), 400, nil),
            ("duplicate keys", Array(#"{"to":"a1","data":{"k":"1","k":"2"}}"#.utf8), 400, nil),
            ("null string", Array(#"{"to":"a1","restricted_package_name":null}"#.utf8), 400, nil),
            ("huge number", Array(#"{"to":"a1","time_to_live":1e999999}"#.utf8), 200, "InvalidTtl"),
            ("huge integer", Array("{\"to\":\"a1\",\"time_to_live\":\(String(repeating: "9", count: 5000))}".utf8), 200, "InvalidTtl"),
            ("negative TTL", Array(#"{"to":"a1","time_to_live":-100}"#.utf8), 200, "InvalidTtl"),
            ("non-array registration_ids", Array(#"{"registration_ids":{"a":"a1"}}"#.utf8), 400, nil),
            ("empty registration_ids", Array(#"{"registration_ids":[]}"#.utf8), 200, "MissingRegistration"),
            ("deep nesting", Array(("{\"to\":\"a1\",\"data\":{\"k\":" + String(repeating: "[", count: 10000) + String(repeating: "]", count: 10000) + "}}").utf8), 400, nil),
            ("NUL in token", Array("{\"to\":\"a\\u0000b\"}".utf8), 200, "InvalidRegistration"),
            ("not JSON at all", Array("registration_id=a1".utf8), 400, nil),
            ("only whitespace", Array("   ".utf8), 400, nil),
            ("top-level string", Array(#""to""#.utf8), 400, nil),
            ("BOM", [0xEF, 0xBB, 0xBF] + Array(#"{"to":"a1"}"#.utf8), 400, nil),
        ]
        for (name, body, status, error) in batch {
            let r = try client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111")], body: body)
            XCTAssertEqual(r.status, status, "\(name): \(r.text.prefix(200))")
            if status == 400 {
                XCTAssertEqual(r.headers["content-type"], "text/plain; charset=UTF-8", name)
                XCTAssertTrue(r.text.hasSuffix("\n") && r.text.count < 400, "\(name): a short reason: \(r.text.prefix(200))")
            }
            if let error { XCTAssertEqual(singleError(r), error, name) }
        }
        // The server is still healthy and nothing was half-stored.
        XCTAssertEqual(try client.get("/api/v1/health").status, 200)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
    }

    func testOversizedBodyGets413AndTheConnectionStaysUsable() throws {
        let huge = [UInt8](repeating: UInt8(ascii: "x"), count: (1 << 20) + 1)
        let r = try client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111")], body: huge)
        XCTAssertEqual(r.status, 413)
        XCTAssertTrue(client.isConnected, "the same keep-alive connection is still open")
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)), "and serves the next request")
        let api = try client.request("POST", "/api/v1/devices", headers: [("Content-Type", "application/json")], body: huge)
        XCTAssertEqual(api.status, 413)
        XCTAssertEqual(api.object?["error"]?.objectValue?["code"]?.stringValue, "payload_too_large")
        // Exactly 1 MiB is accepted (and then judged on its content).
        let head = Array("{\"to\":\"a1\",\"data\":{\"k\":\"".utf8), tail = Array("\"}}".utf8)
        let limit = head + [UInt8](repeating: UInt8(ascii: "y"), count: (1 << 20) - head.count - tail.count) + tail
        XCTAssertEqual(limit.count, 1 << 20)
        XCTAssertEqual(singleError(try client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111")], body: limit)), "MessageTooBig")
    }

    func testWrongMethodAndUnknownPaths() throws {
        let get = try client.get("/fcm/send")
        XCTAssertEqual(get.status, 405)
        XCTAssertEqual(get.headers["allow"], "POST")
        XCTAssertEqual(try client.get("/nothing").status, 404)
    }

    func testEveryAcceptedMessageIsStoredUnderConcurrentLoad() throws {
        // Eight clients send at once; every id answered must be found afterwards.
        let port = server.port
        let answered = LockedIDs()
        let threads = (0..<8).map { t in
            Thread {
                let c = HTTPTestClient(port: port)
                for i in 0..<40 {
                    let body = "{\"registration_ids\":[\"a1\",\"a2\",\"fresh-\(t)-\(i)\"],\"data\":{\"i\":\"\(i)\"}}"
                    if let r = try? c.sendJSON(body) {
                        for res in r.object?["results"]?.arrayValue ?? [] {
                            if let id = res.objectValue?["message_id"]?.stringValue { answered.add(id) }
                        }
                    }
                }
                answered.done()
            }
        }
        threads.forEach { $0.start() }
        answered.waitForDone(count: 8)
        let ids = answered.all()
        XCTAssertEqual(ids.count, 8 * 40 * 3)
        let stored = try storedRecipientIDs(client)
        XCTAssertTrue(Set(ids).isSubset(of: stored), "\(Set(ids).subtracting(stored).count) answered ids are missing")
    }
}

/// Ids collected by several threads.
final class LockedIDs: @unchecked Sendable {
    // Safe: every access goes through `lock`.
    private let lock = ConditionLock()
    private var ids: [String] = []
    private var finished = 0

    func add(_ id: String) { lock.withLock { ids.append(id) } }
    func done() {
        lock.withLock { finished += 1 }
        lock.broadcast()
    }
    func waitForDone(count: Int) { lock.withLock { while finished < count { lock.wait() } } }
    func all() -> [String] { lock.withLock { ids } }
}
