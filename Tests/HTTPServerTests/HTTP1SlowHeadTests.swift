import Foundation
import HTTPServer
import Platform
import XCTest

/// Clients slow to send a request head ("slowloris"), against the plain port over real sockets:
/// a head has `HTTP1Limits.headTimeoutMillis` to arrive (then 408, or a plain close when nothing
/// came), and connections waiting for one are bounded, the longest waiting closed first, so
/// thousands of them never lock a new client out. The time-outs are short here so the tests are
/// fast.
final class HTTP1SlowHeadTests: XCTestCase {
    func serve(headTimeoutMillis: Int, maxWaitingForHead: Int = 4096) throws -> HTTPServer {
        var limits = HTTP1Limits()
        limits.headTimeoutMillis = headTimeoutMillis
        limits.maxWaitingForHead = maxWaitingForHead
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, http1Limits: limits) { r, responder in
            responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: r.path))
        }
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }

    func testAHeadThatDoesNotArriveInTimeGets408AndTheConnectionCloses() throws {
        let server = try serve(headTimeoutMillis: 300)
        let slow = try RawHTTP1(port: server.port)
        let started = Date()
        slow.write("GET /slow HT")
        guard let a = slow.readAnswer() else { return XCTFail("no 408") }
        XCTAssertEqual(a.status, 408, a.head)
        XCTAssertEqual(a.header("connection"), "close")
        XCTAssertEqual(a.text, "request timeout: the request head did not arrive in time\n")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.29)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5)
        assertClosed(slow, "after the 408")

        // Bytes sent slowly keep no head alive past its time: the clock runs from the first byte.
        let trickle = try RawHTTP1(port: server.port)
        trickle.write("GET /trickle HTTP/1.1\r\n")
        for _ in 0..<4 {
            usleep(100_000)
            trickle.write("X-A: b\r\n")
        }
        XCTAssertEqual(trickle.readAnswer()?.status, 408)

        // The clock of a head pipelined behind an answer runs from that answer; an idle
        // keep-alive connection (nothing sent since) is not on it.
        let kept = try RawHTTP1(port: server.port)
        kept.write("GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(kept.readAnswer()?.text, "/first")
        let behind = try RawHTTP1(port: server.port)
        behind.write("GET /one HTTP/1.1\r\nHost: t\r\n\r\nGET /two")
        XCTAssertEqual(behind.readAnswer()?.text, "/one")
        XCTAssertEqual(behind.readAnswer()?.status, 408)
        usleep(600_000)
        kept.write("GET /second HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(kept.readAnswer()?.text, "/second", "an idle keep-alive connection stays open")
    }

    /// A body has as long again from its head's end: a byte now and then keeps none open for
    /// ever (408, the request's own text, then close); one that comes in time is answered.
    func testABodyThatDoesNotArriveInTimeGets408() throws {
        let server = try serve(headTimeoutMillis: 300)
        let slow = try RawHTTP1(port: server.port)
        let started = Date()
        slow.write("POST /slow-body HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc")
        for _ in 0..<3 {
            usleep(100_000)
            slow.write("d")
        }
        guard let a = slow.readAnswer() else { return XCTFail("no 408") }
        XCTAssertEqual(a.status, 408, a.head)
        XCTAssertEqual(a.text, "request timeout: the request body did not arrive in time\n")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.29)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.5)
        assertClosed(slow, "after the 408")
        // A head that took most of its time still leaves its body the whole period (a longer
        // period here: the margins hold on a loaded machine).
        let roomy = try serve(headTimeoutMillis: 1500)
        let late = try RawHTTP1(port: roomy.port)
        late.write("POST /late HTTP/1.1\r\nHost: t\r\n")
        usleep(1_000_000)
        late.write("Content-Length: 3\r\n\r\n")
        usleep(1_000_000)
        late.write("xyz")
        XCTAssertEqual(late.readAnswer()?.text, "/late")
    }

    func testAConnectionThatSendsNothingIsClosedWithoutAnAnswer() throws {
        let server = try serve(headTimeoutMillis: 300)
        let silent = try RawHTTP1(port: server.port, seconds: 10)
        let started = Date()
        // The peek for the HTTP/2 preface waits up to 2 s, then the head's clock runs.
        assertClosed(silent, "a silent connection")
        XCTAssertLessThan(Date().timeIntervalSince(started), 4)
        let fresh = try RawHTTP1(port: server.port)
        fresh.write("GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(fresh.readAnswer()?.text, "/after")
    }

    /// The attack that locked every new client out before: thousands of connections that each
    /// sent one byte. The longest waiting are closed as new ones come, and a new client is
    /// answered at once (the head time-out is long here: the bound alone does it).
    func testConnectionsThatSentOneByteDoNotLockNewClientsOut() throws {
        let bound = 64, flood = 3000
        let server = try serve(headTimeoutMillis: 60_000, maxWaitingForHead: bound)
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for _ in 0..<flood {
            let fd = try ConnectSocket.open(host: "127.0.0.1", port: server.port, receiveTimeout: 5)
            _ = send(fd, "G", 1, Int32(MSG_NOSIGNAL))
            fds.append(fd)
        }
        let started = Date()
        let c = try RawHTTP1(port: server.port)
        c.write("GET /new HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(c.readAnswer()?.text, "/new")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "the new client was answered at once")
        // The server closed all but the newest `bound` of the flood (the new client no longer
        // waits: its head came).
        var closed = 0
        let deadline = Date().addingTimeInterval(5)
        repeat {
            closed = fds.filter { fd in
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 0) == 1 else { return false }
                var b: UInt8 = 0
                return recv(fd, &b, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) <= 0
            }.count
            if closed >= flood - bound { break }
            usleep(50_000)
        } while Date() < deadline
        XCTAssertGreaterThanOrEqual(closed, flood - bound)
        XCTAssertLessThanOrEqual(closed, flood - bound + 1)
        // The ones kept are the newest.
        var p = pollfd(fd: fds[flood - 1], events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&p, 1, 0), 0, "the newest is still open")
    }

    /// The same against the thread that peeks at new connections for the HTTP/2 preface: silent
    /// connections and ones that stop inside the preface hold up neither an HTTP/1.1 client
    /// nor an h2c one.
    func testSilentAndPartialPrefaceConnectionsDoNotHoldUpThePeek() throws {
        let server = try serve(headTimeoutMillis: 60_000, maxWaitingForHead: 64)
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        for i in 0..<2000 {
            let fd = try ConnectSocket.open(host: "127.0.0.1", port: server.port, receiveTimeout: 5)
            if i % 4 == 0 { _ = send(fd, "PRI * HTTP/2.0\r\n", 16, Int32(MSG_NOSIGNAL)) }
            fds.append(fd)
        }
        var started = Date()
        let c = try RawHTTP1(port: server.port)
        c.write("GET /h1 HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(c.readAnswer()?.text, "/h1")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        started = Date()
        let h2 = try H2RawClient(port: server.port)
        h2.sendRequest(1, "GET", "/h2")
        XCTAssertEqual(h2.collect([1])[1]?.text, "/h2")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
    }
}
