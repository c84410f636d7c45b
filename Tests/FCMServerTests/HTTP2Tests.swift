import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// HTTP/2 with prior knowledge (h2c) on the plain HTTP port, driven by real clients: curl,
/// nghttp and h2load (Debian's nghttp2-client, which `make test` installs).
final class HTTP2Tests: XCTestCase {
    /// The path of `tool`; fails the test (never skips it) when it is missing.
    static func tool(_ name: String) throws -> String {
        for dir in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        XCTFail("\(name) is not installed: `make test` installs it (apt-get install nghttp2-client curl)")
        throw TestError("\(name) missing")
    }

    static let send = ["-H", "Authorization: key=\(DemoProject.serverKey)", "-H", "Content-Type: application/json",
                       "-d", #"{"to":"demo-android-1","data":{"via":"h2c"}}"#]

    func testCurlWithPriorKnowledgeAndHTTP1OnTheSamePort() throws {
        let s = try TestServer()
        defer { s.stop() }
        let r = try runProcess(try Self.tool("curl"), ["-sS", "-i", "--max-time", "20", "--http2-prior-knowledge"] + Self.send
                               + ["http://127.0.0.1:\(s.port)/fcm/send"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("HTTP/2 200"), r.stdout)
        XCTAssertTrue(r.stdout.contains(#""success":1,"failure":0"#), r.stdout)
        // HTTP/1.1 still works, with keep-alive, next to it.
        let c = s.client()
        XCTAssertEqual(try c.get("/api/v1/health").status, 200)
        XCTAssertEqual(try c.get("/api/v1/health").status, 200)
        let h1 = try runProcess(try Self.tool("curl"), ["-sS", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                                                        "http://127.0.0.1:\(s.port)/api/v1/health"])
        XCTAssertEqual(h1.stdout, "1.1 200")
    }

    func testNghttpHundredStreamsOnOneConnection() throws {
        let s = try TestServer()
        defer { s.stop() }
        let r = try runProcess(try Self.tool("nghttp"), ["-nv", "-m", "100", "http://127.0.0.1:\(s.port)/api/v1/projects"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let statuses = r.stdout.components(separatedBy: "\n").filter { $0.contains(":status: ") }
        XCTAssertEqual(statuses.count, 100, r.stdout.suffix(2000).description)
        XCTAssertTrue(statuses.allSatisfy { $0.hasSuffix(":status: 200") })
        // Every stream id an odd number of its own: one connection, 100 streams.
        let ids = Set(statuses.compactMap { line in line.range(of: "stream_id=").map { String(line[$0.upperBound...].prefix { $0.isNumber }) } })
        XCTAssertEqual(ids.count, 100)
        XCTAssertEqual(r.stdout.components(separatedBy: "recv SETTINGS frame").count - 1, 2, "one connection: SETTINGS and its ACK")
    }

    func testH2loadConcurrentSendsAllStored() throws {
        let s = try TestServer()
        defer { s.stop() }
        let body = NSTemporaryDirectory() + "fcm-h2load-\(UUID().uuidString).json"
        try #"{"to":"demo-android-1","data":{"via":"h2load"}}"#.write(toFile: body, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: body) }
        let r = try runProcess(try Self.tool("h2load"), ["-n", "200", "-c", "2", "-m", "20", "-d", body,
                                                         "-H", "Authorization: key=\(DemoProject.serverKey)",
                                                         "-H", "Content-Type: application/json",
                                                         "http://127.0.0.1:\(s.port)/fcm/send"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("200 succeeded, 0 failed, 0 errored"), r.stdout)
        XCTAssertTrue(r.stdout.contains("status codes: 200 2xx"), r.stdout)
        let messages = try s.client().get("/api/v1/messages?limit=500")
        XCTAssertEqual(messages.status, 200)
        XCTAssertEqual(messages.text.components(separatedBy: "\"h2load\"").count - 1, 200, "every send stored once")
    }

    func testGoAwayOnShutdown() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let control = s.client()
        let token = try XCTUnwrap(try control.post("/api/v1/projects/demo-project/access-tokens").object?["access_token"]?.stringValue)
        // A v1 send held in flight by a delay fault when SIGTERM arrives: it is still answered, with
        // the answer decided for it (a stopping server sends held answers at once).
        XCTAssertEqual(try control.post("/api/v1/faults", #"{"when":{"transport":"http_v1"},"then":{"delay_ms":5000},"times":1}"#).status, 201)
        let body = NSTemporaryDirectory() + "fcm-goaway-\(UUID().uuidString).json"
        try #"{"message":{"token":"demo-android-1","data":{"via":"h2 at shutdown"}}}"#.write(toFile: body, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: body) }
        // A stream held open (a long poll of the event stream) and the held send, each on its own
        // connection; then SIGTERM: GOAWAY on both, the send answered, the connections closed.
        let events = try nghttp(["-nv", "http://127.0.0.1:\(s.httpPort)/api/v1/events"])
        let send = try nghttp(["-v", "-d", body, "-H", "authorization: Bearer \(token)", "-H", "content-type: application/json",
                               "http://127.0.0.1:\(s.httpPort)/v1/projects/demo-project/messages:send"])
        usleep(500_000)
        XCTAssertTrue(send.process.isRunning, "the send is still in flight when SIGTERM arrives")
        XCTAssertEqual(s.stop(), 0)
        let text = events.finish(), answer = send.finish()
        for out in [text, answer] {
            XCTAssertTrue(out.contains("recv GOAWAY frame"), out)
            XCTAssertTrue(out.contains("error_code=NO_ERROR"), out)
        }
        let goaway = try XCTUnwrap(answer.range(of: "recv GOAWAY frame"), answer)
        let status = try XCTUnwrap(answer.range(of: ":status: 200"), answer)
        XCTAssertLessThan(goaway.lowerBound, status.lowerBound, "GOAWAY first, then the held stream's answer: \(answer)")
        XCTAssertTrue(answer.contains(#"{"name":"projects/demo-project/messages/0:"#), answer)
        XCTAssertEqual(send.process.terminationStatus, 0, answer)
    }

    /// nghttp started with `arguments`, its stdout collected.
    func nghttp(_ arguments: [String]) throws -> RunningTool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try Self.tool("nghttp"))
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        return RunningTool(process: p, output: out)
    }
}

/// A client process that should end with the server: `finish` waits up to 10 s for it (failing
/// the test, and ending it, if it does not) and returns what it printed.
struct RunningTool {
    let process: Process
    let output: Pipe

    func finish(file: StaticString = #filePath, line: UInt = #line) -> String {
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        XCTAssertFalse(process.isRunning, "\(process.arguments ?? []) ended with the server", file: file, line: line)
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}
