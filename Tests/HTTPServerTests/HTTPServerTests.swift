import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import Platform
import XCTest

/// The HTTP server on its own: answers now and later, waiting requests, limits, stop.
final class HTTPServerTests: XCTestCase {
    func start(_ handler: @escaping HTTPHandler, maxBody: Int = 1024) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, handler: handler)
        try s.start()
        return s
    }

    func testAnswersAtOnceWithRequestParts() throws {
        let server = try start { r, responder in
            let q = r.rawQuery.map { "\($0.0)=\($0.1 ?? "-")" }.joined(separator: "&")
            let body = "\(r.method) \(r.path) \(q) \(r.header("X-TEST") ?? "none") \(r.header("x-multi") ?? "") \(String(decoding: r.body, as: UTF8.self))"
            responder.send(HTTPResponse(status: 201, contentType: "text/plain", body: body, headers: [("X-Reply", "yes")]))
        }
        defer { server.stop() }
        let c = HTTPTestClient(port: server.port)
        let r = try c.request("POST", "/a%2Fb:verb?x=1%20&flag", headers: [("x-test", "Value"), ("X-Multi", "1"), ("x-multi", "2")],
                              body: Array("hello".utf8))
        XCTAssertEqual(r.status, 201)
        XCTAssertEqual(r.headers["x-reply"], "yes")
        // The path and query stay percent-encoded for the router to split first.
        XCTAssertEqual(r.text, "POST /a%2Fb:verb x=1%20&flag=- Value 1, 2 hello")
    }

    func testAnswersLaterFromAnotherThreadWithoutHoldingAThread() throws {
        let server = try start { r, responder in
            let delay = UInt32(r.header("x-delay-ms").flatMap { UInt32($0) } ?? 0)
            spawnThread {
                usleep(delay * 1000)
                responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: r.path))
                responder.send(HTTPResponse(status: 500, contentType: "text/plain", body: "second answers are ignored"))
            }
        }
        defer { server.stop() }
        // 64 requests suspended at once on a pool of 4 loop threads, all answered.
        let group = DispatchGroup()
        let ok = Locked(0)
        for i in 0..<64 {
            group.enter()
            spawnThread {
                let c = HTTPTestClient(port: server.port)
                if let r = try? c.request("GET", "/r\(i)", headers: [("x-delay-ms", "200")]), r.status == 200, r.text == "/r\(i)" {
                    ok.withLock { $0 += 1 }
                }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(ok.withLock { $0 }, 64)
        // Keep-alive after a late answer.
        let c = HTTPTestClient(port: server.port)
        XCTAssertEqual(try c.request("GET", "/one", headers: [("x-delay-ms", "10")]).text, "/one")
        XCTAssertEqual(try c.request("GET", "/two").text, "/two")
        XCTAssertTrue(c.isConnected)
    }

    func testBodyLimit() throws {
        let server = try start({ r, responder in
            responder.send(HTTPResponse(status: r.bodyTooLarge ? 413 : 200, contentType: "text/plain", body: "\(r.body.count)"))
        }, maxBody: 10)
        defer { server.stop() }
        let c = HTTPTestClient(port: server.port)
        XCTAssertEqual(try c.request("POST", "/", body: Array(repeating: 65, count: 10)).text, "10")
        let big = try c.request("POST", "/", body: Array(repeating: 65, count: 100_000))
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(big.text, "0", "the oversized body is dropped, not kept")
        XCTAssertEqual(try c.request("POST", "/", body: Array(repeating: 65, count: 3)).text, "3", "the connection stays usable")
    }

    func testStopAnswersSuspendedRequestsWith503() throws {
        let parked = Locked<[HTTPResponder]>([])
        let server = try start { _, responder in parked.withLock { $0.append(responder) } }
        let result = Locked<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            let c = HTTPTestClient(port: server.port)
            result.withLock { $0 = (try? c.request("GET", "/never"))?.status }
            done.signal()
        }
        while parked.withLock({ $0.isEmpty }) { usleep(1000) }
        server.stop()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(result.withLock { $0 }, 503)
    }

    func testAnswersSentJustBeforeStopAreWrittenOut() throws {
        // A resumed connection is written by its loop later; stop must wait for that, not only
        // for the requests still suspended.
        let parked = Locked<[HTTPResponder]>([])
        let server = try start { _, responder in parked.withLock { $0.append(responder) } }
        let count = 40
        let results = Locked<[Int?]>([])
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            spawnThread {
                let c = HTTPTestClient(port: server.port)
                let status = (try? c.request("GET", "/late"))?.status
                results.withLock { $0.append(status) }
                done.signal()
            }
        }
        while parked.withLock({ $0.count }) < count { usleep(1000) }
        for r in parked.withLock({ $0 }) { r.send(HTTPResponse(status: 200, body: Array("late answer\n".utf8))) }
        server.stop()
        for _ in 0..<count { XCTAssertEqual(done.wait(timeout: .now() + 10), .success) }
        XCTAssertEqual(results.withLock { $0 }, Array(repeating: 200, count: count))
    }

    func testASecondStopClosesNothing() throws {
        let server = try start { _, r in r.send(HTTPResponse(status: 200)) }
        server.stop()
        // A new listener most likely gets the descriptor number the first one had.
        let other = try start { _, r in r.send(HTTPResponse(status: 204)) }
        defer { other.stop() }
        server.stop()
        XCTAssertEqual(try HTTPTestClient(port: other.port).request("GET", "/").status, 204)
    }

    /// More than a thousand idle keep-alive connections do not lock new clients out (1020 was
    /// libmicrohttpd's default limit): the limit follows the descriptor limit, raised at start.
    func testMoreThanAThousandIdleConnectionsLeaveRoomForMore() throws {
        let server = try start { _, responder in responder.send(HTTPResponse(status: 204, contentType: "text/plain", body: "")) }
        defer { server.stop() }
        var rl = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)  // raised by start(), for this process too
        XCTAssertGreaterThanOrEqual(rl.rlim_cur, 2400, "this test needs 2 descriptors a connection in one process")
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<1100 { idle.append(try connectLoopback(port: server.port)) }
        let c = HTTPTestClient(port: server.port)
        XCTAssertEqual(try c.request("GET", "/after-1100").status, 204)
    }

    func testBusyPortIsAClearError() throws {
        let server = try start { _, r in r.send(HTTPResponse(status: 200)) }
        defer { server.stop() }
        XCTAssertThrowsError(try HTTPServer(host: "127.0.0.1", port: server.port, maxBodyBytes: 10) { _, r in r.send(HTTPResponse(status: 200)) }) { e in
            XCTAssertTrue("\(e)".contains("Address already in use"), "\(e)")
        }
        XCTAssertThrowsError(try HTTPServer(host: "no.such.host.invalid", port: 0, maxBodyBytes: 10) { _, r in r.send(HTTPResponse(status: 200)) })
    }

    /// Header names match in any ASCII case, never across lengths or other bytes; repeated
    /// fields are joined.
    func testHeaderLookUpIgnoresASCIICaseOnly() {
        let r = HTTPRequest(method: "GET", path: "/", headers: [
            (name: "Content-Type", value: "a"), (name: "X-MULTI", value: "1"), (name: "x-multi", value: "2"),
            (name: "X-Ünicode", value: "u"), (name: "X-Long-Name-Over-Fifteen-Bytes", value: "l"),
        ])
        XCTAssertEqual(r.header("content-type"), "a")
        XCTAssertEqual(r.header("CONTENT-TYPE"), "a")
        XCTAssertNil(r.header("content-typ"))
        XCTAssertNil(r.header("content-types"))
        XCTAssertEqual(r.header("X-Multi"), "1, 2")
        XCTAssertEqual(r.header("x-Ünicode"), "u")
        XCTAssertNil(r.header("x-ünicode"), "only ASCII letters fold")
        XCTAssertEqual(r.header("x-long-name-over-fifteen-bytes"), "l")
    }
}

