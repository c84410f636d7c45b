import FCMTesting
import Foundation
import HTTPServer
import Platform
import XCTest

/// `HTTPResponder.continueOnConnection`: work done on another thread (a pool decrypting a Web
/// Push body) comes back to the thread serving the request's connection, runs in its round,
/// and that thread's `afterBatch` follows; when the connection's thread is gone, it runs where
/// it is, told it is not in a batch.
final class ContinueOnConnectionTests: XCTestCase {
    /// What ran where, in order: "handler", "pool", "continued", "afterBatch", each with its thread.
    final class Trace: Sendable {
        let events = Locked<[(String, UInt, Bool)]>([])
        func add(_ what: String, inBatch: Bool = false) { events.withLock { $0.append((what, UInt(pthread_self()), inBatch)) } }
        var all: [(String, UInt, Bool)] { events.withLock { $0 } }
    }

    func serve(_ trace: Trace) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 16, http1Loops: 2,
                               afterBatch: { trace.add("afterBatch") }) { r, responder in
            trace.add("handler")
            let path = r.path
            spawnThread {
                trace.add("pool")
                usleep(20_000)
                responder.continueOnConnection { inBatch in
                    trace.add("continued", inBatch: inBatch)
                    responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: "done \(path)"))
                }
            }
        }
        try s.start()
        return s
    }

    /// The continued part ran on the handler's thread, in a batch, before an afterBatch there.
    func assertCameBack(_ trace: Trace, file: StaticString = #filePath, line: UInt = #line) {
        let events = trace.all
        guard let handler = events.first(where: { $0.0 == "handler" }), let pool = events.first(where: { $0.0 == "pool" }),
              let i = events.firstIndex(where: { $0.0 == "continued" }) else {
            return XCTFail("missing events: \(events)", file: file, line: line)
        }
        XCTAssertNotEqual(pool.1, handler.1, file: file, line: line)
        XCTAssertEqual(events[i].1, handler.1, "continued on the connection's thread", file: file, line: line)
        XCTAssertTrue(events[i].2, "in a batch", file: file, line: line)
        XCTAssertTrue(events[(i + 1)...].contains { $0.0 == "afterBatch" && $0.1 == handler.1 }, "afterBatch followed: \(events)",
                      file: file, line: line)
    }

    func testHTTP1WorkComesBackToItsLoop() throws {
        let trace = Trace()
        let server = try serve(trace)
        defer { server.stop() }
        let c = HTTPTestClient(port: server.port)
        XCTAssertEqual(try c.request("POST", "/push", body: Array("x".utf8)).text, "done /push")
        assertCameBack(trace)
        XCTAssertEqual(try c.request("GET", "/next").text, "done /next", "the connection goes on")
    }

    func testHTTP2WorkComesBackToItsConnectionsThread() throws {
        let trace = Trace()
        let server = try serve(trace)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/h2")
        let answers = c.collect([1])
        XCTAssertEqual(answers[1]?.status, 200)
        XCTAssertEqual(answers[1]?.text, "done /h2")
        assertCameBack(trace)
    }

    /// Work that comes back after the server stopped runs on the calling thread, not in a batch
    /// (its answer goes nowhere; what it queued it must commit itself).
    func testWorkComingBackAfterTheServerStoppedRunsWhereItIs() throws {
        let parked = Locked<HTTPResponder?>(nil)
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, http1Loops: 2, afterBatch: {}) { _, responder in
            parked.withLock { $0 = responder }
        }
        try server.start()
        let fd = try ConnectSocket.open(host: "127.0.0.1", port: server.port, receiveTimeout: 5)
        defer { close(fd) }
        _ = "GET /park HTTP/1.1\r\nHost: t\r\n\r\n".withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let deadline = Date().addingTimeInterval(5)
        while parked.withLock({ $0 == nil }) && Date() < deadline { usleep(2000) }
        let responder = try XCTUnwrap(parked.withLock { $0 })
        server.stop()
        let ran = Locked<(UInt, Bool)?>(nil)
        responder.continueOnConnection { inBatch in ran.withLock { $0 = (UInt(pthread_self()), inBatch) } }
        XCTAssertEqual(ran.withLock { $0 }?.0, UInt(pthread_self()))
        XCTAssertEqual(ran.withLock { $0 }?.1, false)
    }
}
