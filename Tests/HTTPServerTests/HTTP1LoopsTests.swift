import FCMTesting
import Foundation
import HTTPServer
import Platform
import XCTest

/// HTTP/1.1 served from several loops (`HTTPServer(http1Loops:)`), over real sockets: new
/// connections are dealt to the loops in turn and stay on theirs; an answer, an event stream's
/// bytes or an end of the stream that comes from another loop's thread reaches its connection;
/// each loop calls `afterBatch` for its own round; one loop and two both serve everything.
final class HTTP1LoopsTests: XCTestCase {
    /// The thread a handler ran on (each loop is a thread of its own).
    static func threadID() -> UInt { UInt(pthread_self()) }

    func serve(loops: Int?, afterBatch: (@Sendable () -> Void)? = nil, _ handler: @escaping HTTPHandler) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 16, http1Loops: loops, afterBatch: afterBatch,
                               handler: handler)
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }

    func testConnectionsAreSpreadOverEveryLoopAndAllAnswered() throws {
        for loops in [1, 2, 3] {
            let threads = Locked<[Int: Set<UInt>]>([:])
            let server = try serve(loops: loops) { r, responder in
                let connection = Int(r.header("x-connection") ?? "") ?? -1
                threads.withLock { _ = $0[connection, default: []].insert(Self.threadID()) }
                responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: r.path))
            }
            XCTAssertEqual(server.http1Loops, loops)
            let connections = 4 * loops + 1, requests = 20
            let ok = Locked(0)
            let group = DispatchGroup()
            for c in 0..<connections {
                group.enter()
                spawnThread {
                    defer { group.leave() }
                    let client = HTTPTestClient(port: server.port)
                    for i in 0..<requests {
                        guard let r = try? client.request("GET", "/\(c)/\(i)", headers: [("X-Connection", "\(c)")]),
                              r.status == 200, r.text == "/\(c)/\(i)" else { return }
                        ok.withLock { $0 += 1 }
                    }
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
            XCTAssertEqual(ok.withLock { $0 }, connections * requests, "\(loops) loops: every request answered")
            let seen = threads.withLock { $0 }
            XCTAssertEqual(seen.count, connections)
            XCTAssertTrue(seen.values.allSatisfy { $0.count == 1 }, "\(loops) loops: each connection stays on one loop: \(seen)")
            XCTAssertEqual(Set(seen.values.flatMap { $0 }).count, loops, "\(loops) loops: every loop serves connections")
        }
    }

    /// The shape of a long poll: a request parked on one loop is answered from the other loop's
    /// thread (the handler of a request on another connection), as a commit that another loop
    /// ran answers it; a connection whose answer is late still serves its next request.
    func testARequestParkedOnOneLoopIsAnsweredFromTheOther() throws {
        let parked = Locked<(responder: HTTPResponder, thread: UInt)?>(nil)
        let wakerThread = Locked<UInt>(0)
        let server = try serve(loops: 2) { r, responder in
            switch r.path {
            case "/wait":
                parked.withLock { $0 = (responder, Self.threadID()) }
            case "/wake":
                wakerThread.withLock { $0 = Self.threadID() }
                let waiting = parked.withLock { $0 }
                waiting?.responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: "woken by \(r.header("x-who") ?? "")"))
                responder.send(HTTPResponse(status: waiting == nil ? 409 : 204))
            default:
                responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: r.path))
            }
        }
        let answer = Locked<(first: WireResponse?, again: WireResponse?)>((nil, nil))
        let done = DispatchSemaphore(value: 0)
        let port = server.port
        spawnThread {
            let waiter = HTTPTestClient(port: port)
            let first = try? waiter.request("GET", "/wait")
            answer.withLock { $0 = (first, try? waiter.request("GET", "/again")) }
            done.signal()
        }
        let deadline = Date().addingTimeInterval(5)
        while parked.withLock({ $0 == nil }) && Date() < deadline { usleep(2000) }
        XCTAssertNotNil(parked.withLock { $0 }, "the poll reached the handler")
        // The next connection goes to the other loop.
        let waker = HTTPTestClient(port: server.port)
        XCTAssertEqual(try waker.request("POST", "/wake", headers: [("X-Who", "the other loop")]).status, 204)
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(answer.withLock { $0.first }?.text, "woken by the other loop")
        XCTAssertNotEqual(parked.withLock { $0 }?.thread, wakerThread.withLock { $0 }, "the two requests were on different loops")
        XCTAssertEqual(answer.withLock { $0.again }?.text, "/again", "the waiter's connection goes on")
        XCTAssertEqual(try waker.request("GET", "/again").text, "/again")
    }

    /// An event stream served by one loop, written and ended from the other loop's thread.
    func testAStreamOnOneLoopIsFedFromTheOther() throws {
        let stream = HTTPStream()
        let server = try serve(loops: 2) { r, responder in
            switch r.path {
            case "/events":
                var response = HTTPResponse(status: 200, contentType: "text/event-stream", body: "")
                response.stream = stream
                responder.send(response)
            case "/say":
                stream.write(Array("data: \(String(decoding: r.body, as: UTF8.self))\n\n".utf8))
                responder.send(HTTPResponse(status: 204))
            default:
                stream.finish()
                responder.send(HTTPResponse(status: 204))
            }
        }
        let events = try SSEClient(port: server.port, path: "/events")
        XCTAssertEqual(try events.status(), 200)
        let other = HTTPTestClient(port: server.port)
        for word in ["one", "two"] {
            XCTAssertEqual(try other.request("POST", "/say", body: Array(word.utf8)).status, 204)
            XCTAssertEqual(try events.next()?.data, word)
        }
        XCTAssertEqual(try other.request("POST", "/end").status, 204)
        XCTAssertNil((try? events.next(timeout: 1)) ?? nil, "the stream ended")
        XCTAssertEqual(try other.request("GET", "/still").status, 204, "the other loop goes on")
    }

    /// Each loop calls `afterBatch` on its own thread after the requests of its round.
    func testEveryLoopRunsItsOwnAfterBatch() throws {
        let batches = Locked<[UInt: Int]>([:])
        let handled = Locked<Set<UInt>>([])
        let server = try serve(loops: 2, afterBatch: { batches.withLock { $0[HTTP1LoopsTests.threadID(), default: 0] += 1 } }) { r, responder in
            handled.withLock { _ = $0.insert(Self.threadID()) }
            responder.send(HTTPResponse(status: r.inBatch ? 200 : 500))
        }
        let clients = [HTTPTestClient(port: server.port), HTTPTestClient(port: server.port)]
        for _ in 0..<5 {
            for c in clients { XCTAssertEqual(try c.request("GET", "/").status, 200, "requests on a loop are in its batch") }
        }
        let threads = handled.withLock { $0 }
        XCTAssertEqual(threads.count, 2)
        XCTAssertEqual(Set(batches.withLock { $0.keys }), threads, "afterBatch ran on each loop that handled requests")
    }

    /// The default is one loop per core the process may use: its CPU affinity, not the
    /// machine's count (a thread pinned to one CPU counts one).
    func testTheDefaultFollowsTheAffinity() throws {
        XCTAssertGreaterThanOrEqual(HTTPServer.availableCores, 1)
        XCTAssertLessThanOrEqual(HTTPServer.availableCores, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let server = try serve(loops: nil) { _, responder in responder.send(HTTPResponse(status: 204)) }
        XCTAssertEqual(server.http1Loops, HTTPServer.availableCores)
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
        let pinned = Locked<Int>(0)
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            // This thread alone, to CPU 0 (pid 0: the calling thread).
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity") else {
                pinned.withLock { $0 = -2 }
                done.signal()
                return
            }
            var mask = [UInt64](repeating: 0, count: 16)
            mask[0] = 1
            let rc = mask.withUnsafeBytes { unsafeBitCast(symbol, to: SetAffinity.self)(0, $0.count, $0.baseAddress!) }
            pinned.withLock { $0 = rc == 0 ? HTTPServer.availableCores : -1 }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(pinned.withLock { $0 }, 1)
    }
}

