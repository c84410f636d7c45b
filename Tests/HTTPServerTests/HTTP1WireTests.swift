// Long because: the wire contract's cases and the raw client they all read answers with belong together.
import HTTPServer
import Foundation
import Platform
import TLS
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP/1.1 contract of every port that speaks it (plain, the HTTPS port's `http/1.1`,
/// `--http-tls`: each test runs on all three), byte by byte: what the server's loop must do for
/// a demanding client. Only what HTTP requires and clients
/// rely on is asserted (status codes, framing, the handler's bytes, keep-alive or close), never
/// a reason phrase, a Date header or the text of an error body.
final class HTTP1WireTests: XCTestCase {
    func testKeepAliveAnswersSeveralRequestsInOrderOnOneConnection() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            for i in 0..<5 {
                c.write(Self.post("/k\(i)", "body \(i)"))
                guard let a = c.readAnswer() else { return XCTFail("request \(i) not answered") }
                XCTAssertEqual("\(a.status) \(a.header("x-path") ?? "-") \(a.text)", "200 /k\(i) body \(i)")
                XCTAssertEqual(a.header("content-length"), "6")
                XCTAssertNotEqual(a.header("connection")?.lowercased(), "close")
            }
            c.write("GET /last HTTP/1.1\r\nHost: t\r\n\r\n")
            assertEcho(c, "", path: "/last")
            XCTAssertEqual(seen.withLock { $0.map(\.path) }, ["/k0", "/k1", "/k2", "/k3", "/k4", "/last"])
        }
    }

    func testPipelinedRequestsAreAnsweredInRequestOrderEvenWhenTheFirstAnswersLate() throws {
        try onEveryPort {
            let server = try serve { r, responder in
                let answer = HTTPResponse(status: 200, headers: [("X-Path", r.path)], body: r.body)
                guard r.path == "/late" else { return responder.send(answer) }
                spawnThread {
                    usleep(100_000)
                    responder.send(answer)
                }
            }
            for first in ["/now", "/late"] {
                let c = try RawHTTP1(server)
                c.write(Self.post(first, "one") + Self.post("/b", "two, a bit longer") + Self.post("/c", ""))
                assertEcho(c, "one", path: first)
                assertEcho(c, "two, a bit longer", path: "/b")
                assertEcho(c, "", path: "/c")
                // And the connection is still in step for one more.
                c.write(Self.post("/d", "four"))
                assertEcho(c, "four", path: "/d")
            }
        }
    }

    /// More pipelined requests in one write than the server takes at once (32): the ones past
    /// that wait in its buffer and are answered as answers make room, none left behind.
    func testMorePipelinedRequestsThanAreTakenAtOnceAreAllAnswered() throws {
        try onEveryPort {
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            c.write((0..<45).map { Self.post("/p\($0)", "n\($0)") }.joined())
            for i in 0..<45 { assertEcho(c, "n\(i)", path: "/p\(i)") }
        }
    }

    func testBodyWrittenInPiecesWithPausesIsHandedOverWhole() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            let body = Array("0123456789abcdefghij\r\n\r\nafter a blank line\u{0}\u{ff}".utf8)
            for b in "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n".utf8 {
                c.write([b])
                usleep(1000)
            }
            for piece in [body[0..<1], body[1..<10], body[10..<24], body[24...]] {
                usleep(30_000)
                c.write(Array(piece))
            }
            guard let a = c.readAnswer() else { return XCTFail("not answered") }
            XCTAssertEqual(a.status, 200)
            XCTAssertEqual(a.body, body)
            XCTAssertEqual(seen.withLock { $0.map(\.body) }, [body], "the handler is called once, with the whole body")
        }
    }

    func testChunkedBodyWithExtensionsAndTrailerIsHandedOverWhole() throws {
        try onEveryPort {
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            usleep(20_000)
            c.write("5;name=value\r\nhello\r\n")
            usleep(20_000)
            c.write("1A;a=\"quoted\";b\r\n, chunked world, 26 bytes!\r\n0\r\nX-Trailer: t\r\n\r\n")
            assertEcho(c, "hello, chunked world, 26 bytes!", path: "/chunked")
            // The trailer was consumed: the connection is in step for the next request.
            c.write(Self.post("/next", "x"))
            assertEcho(c, "x", path: "/next")
        }
    }

    func testExpect100ContinueGetsContinueBeforeTheBodyIsSent() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("POST /expect HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n")
            guard let interim = c.readHead() else { return XCTFail("no 100 Continue before the body") }
            XCTAssertTrue(interim.head.hasPrefix("HTTP/1.1 100"), interim.head)
            XCTAssertTrue(seen.withLock { $0.isEmpty }, "the handler waits for the body")
            c.write("payload")
            assertEcho(c, "payload", path: "/expect")
            c.write(Self.post("/after", "ok"))
            assertEcho(c, "ok", path: "/after")
        }
    }

    func testBodyOverTheLimitIsFlaggedAndDrainedAndTheConnectionStaysUsable() throws {
        try onEveryPort {
            let (server, seen) = try echoServer(maxBody: 10)
            let c = try RawHTTP1(server)
            let big = String(repeating: "A", count: 100_000)
            c.write(Self.post("/big", big))
            XCTAssertEqual(c.readAnswer()?.status, 413, "the handler saw bodyTooLarge")
            c.write(Self.post("/small", "0123456789"))
            assertEcho(c, "0123456789", path: "/small")
            // The same by chunks: the limit counts the decoded body.
            c.write("POST /big-chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n89abcdef\r\n0\r\n\r\n")
            XCTAssertEqual(c.readAnswer()?.status, 413)
            c.write(Self.post("/small", "fits"))
            assertEcho(c, "fits", path: "/small")
            let flags = seen.withLock { $0.map { "\($0.path) \($0.bodyTooLarge) \($0.body.count)" } }
            XCTAssertEqual(flags, ["/big true 0", "/small false 10", "/big-chunked true 0", "/small false 4"])
        }
    }

    func testHeadAnswersHeadersWithoutBodyBytes() throws {
        try onEveryPort {
            let server = try serve { r, responder in
                responder.send(HTTPResponse(status: 200, headers: [("X-Method", r.method)], body: Array("five!".utf8)))
            }
            let c = try RawHTTP1(server)
            c.write("HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n")
            guard let a = c.readAnswer(to: "HEAD") else { return XCTFail("HEAD not answered") }
            XCTAssertEqual(a.status, 200)
            XCTAssertEqual(a.header("x-method"), "HEAD")
            if let length = a.header("content-length") { XCTAssertEqual(length, "5", "a HEAD's Content-Length is the GET's") }
            XCTAssertTrue(c.quiet(millis: 200), "no body bytes after a HEAD answer")
            c.write("GET /h HTTP/1.1\r\nHost: t\r\n\r\n")
            XCTAssertEqual(c.readAnswer()?.text, "five!", "the connection is in step after a HEAD")
        }
    }

    func testHTTP10WithoutKeepAliveIsAnsweredThenClosed() throws {
        try onEveryPort {
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("POST /old HTTP/1.0\r\nContent-Length: 3\r\n\r\nold")
            guard let a = c.readAnswer() else { return XCTFail("HTTP/1.0 request not answered") }
            XCTAssertEqual(a.status, 200)
            XCTAssertEqual(a.text, "old")
            XCTAssertNotEqual(a.header("transfer-encoding"), "chunked", "HTTP/1.0 has no chunked encoding")
            assertClosed(c, "the server closes after answering HTTP/1.0")
        }
    }

    func testConnectionCloseRequestIsAnsweredThenClosed() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            // A request pipelined after the close is never handled.
            c.write(Self.post("/bye", "bye", extra: "Connection: close\r\n") + Self.post("/ignored", "no"))
            assertEcho(c, "bye", path: "/bye")
            assertClosed(c)
            XCTAssertEqual(seen.withLock { $0.map(\.path) }, ["/bye"])
        }
    }

    func testHandlerAskingToCloseSendsConnectionCloseAndCloses() throws {
        try onEveryPort {
            let server = try serve { r, responder in
                var answer = HTTPResponse(status: 200, body: Array(r.path.utf8))
                answer.closeConnection = r.path == "/close"
                responder.send(answer)
            }
            let c = try RawHTTP1(server)
            c.write("GET /open HTTP/1.1\r\nHost: t\r\n\r\n")
            XCTAssertEqual(c.readAnswer()?.text, "/open")
            c.write("GET /close HTTP/1.1\r\nHost: t\r\n\r\n")
            guard let a = c.readAnswer() else { return XCTFail("not answered") }
            XCTAssertEqual(a.text, "/close")
            XCTAssertEqual(a.header("connection")?.lowercased(), "close")
            assertClosed(c)
        }
    }

    /// Each case: a 4xx answer then close, or a close without a word; never a hang, never the
    /// handler; and the server goes on serving.
    func testMalformedRequestsAreRefusedWithoutReachingTheHandler() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let cases = [
                "GARBAGE\r\n\r\n",
                "GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n",
                "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            ]
            for (i, bytes) in cases.enumerated() {
                let c = try RawHTTP1(server)
                c.write(bytes)
                if let a = c.readAnswer() { XCTAssertEqual(a.status, 400, "case \(i)") }
                assertClosed(c, "case \(i)")
            }
            XCTAssertEqual(seen.withLock { $0.count }, 0, "the handler never sees a malformed request")
            let c = try RawHTTP1(server)
            c.write(Self.post("/fine", "still serving"))
            assertEcho(c, "still serving", path: "/fine")
        }
    }

    func testHeaderBlockOver64KiBIsRefusedWithoutReachingTheHandler() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let manyFields = (0..<1200).map { "X-Pad-\($0): \(String(repeating: "p", count: 50))\r\n" }.joined()
            let oneLongField = "X-Long: \(String(repeating: "l", count: 70_000))\r\n"
            for fields in [manyFields, oneLongField] {
                let c = try RawHTTP1(server)
                c.write("GET /huge HTTP/1.1\r\nHost: t\r\n\(fields)\r\n")
                // The client may still be writing when the server gives up: a reset may then eat
                // the answer, which leaves a close.
                if let a = c.readAnswer() { XCTAssertTrue((400..<500).contains(a.status), a.head) }
                assertClosed(c)
            }
            XCTAssertEqual(seen.withLock { $0.count }, 0)
            // The limit is about size: 16 KiB of header fields are served.
            let c = try RawHTTP1(server)
            c.write("POST /fine HTTP/1.1\r\nHost: t\r\nX-Long: \(String(repeating: "l", count: 16 * 1024))\r\nContent-Length: 2\r\n\r\nok")
            assertEcho(c, "ok", path: "/fine")
        }
    }

    func testPathQueryAndHeadersReachTheHandlerAsSent() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("GET /a%2Fb:verb?x=1%20&flag&e= HTTP/1.1\r\nHost: t\r\nX-Test:  Value\r\nX-Multi: 1\r\nx-multi: 2\r\n\r\n")
            assertEcho(c, "", path: "/a%2Fb:verb")
            guard let r = seen.withLock({ $0.first }) else { return XCTFail("handler not called") }
            XCTAssertEqual(r.method, "GET")
            XCTAssertEqual(r.path, "/a%2Fb:verb")
            XCTAssertEqual(r.rawQuery.map { "\($0.0)=\($0.1 ?? "nil")" }, ["x=1%20", "flag=nil", "e="])
            XCTAssertEqual(r.header("x-test"), "Value", "leading whitespace is not part of the value")
            XCTAssertEqual(r.header("host"), "t")
            XCTAssertEqual(r.header("X-MULTI"), "1, 2")
            XCTAssertEqual(r.headers.filter { $0.name.lowercased() == "x-multi" }.map { "\($0.name): \($0.value)" }, ["X-Multi: 1", "x-multi: 2"])
        }
    }

    func testClientGoneBeforeALateAnswerHarmsNothing() throws {
        try onEveryPort {
            let parked = Locked<[HTTPResponder]>([])
            let server = try serve { r, responder in
                if r.path == "/park" { return parked.withLock { $0.append(responder) } }
                responder.send(HTTPResponse(status: 200, body: Array(r.path.utf8)))
            }
            let c = try RawHTTP1(server)
            c.write("GET /park HTTP/1.1\r\nHost: t\r\n\r\n")
            let deadline = monotonicNanos() + 5_000_000_000
            while parked.withLock({ $0.isEmpty }) && monotonicNanos() < deadline { usleep(1000) }
            guard let responder = parked.withLock({ $0.first }) else { return XCTFail("handler not called") }
            c.hangUp()
            usleep(50_000)
            responder.send(HTTPResponse(status: 200, body: Array("too late".utf8)))
            responder.send(HTTPResponse(status: 500))
            usleep(50_000)
            for i in 0..<3 {
                let other = try RawHTTP1(server)
                other.write("GET /other\(i) HTTP/1.1\r\nHost: t\r\n\r\n")
                XCTAssertEqual(other.readAnswer()?.text, "/other\(i)")
            }
        }
    }

    func testResponseFramingMatchesTheBody() throws {
        try onEveryPort {
            var binary = Array("HTTP/1.1 200 OK\r\n\r\n".utf8) + [0, 255, 13, 10]
            for i in 0..<(1 << 20) { binary.append(UInt8(truncatingIfNeeded: i &* 31)) }
            let big = binary
            let server = try serve { r, responder in
                switch r.path {
                case "/empty": responder.send(HTTPResponse(status: 200))
                // A 204 has no body, even when the handler gives it one by mistake.
                case "/204": responder.send(HTTPResponse(status: 204, headers: [("X-Kind", "no content")], body: [65]))
                case "/created": responder.send(HTTPResponse(status: 201, contentType: "text/plain", body: "made"))
                case "/error": responder.send(HTTPResponse(status: 500, contentType: "application/json", body: "{\"e\":1}"))
                default: responder.send(HTTPResponse(status: 200, body: big))
                }
            }
            let c = try RawHTTP1(server)
            for (path, status, body) in [("/empty", 200, [UInt8]()), ("/204", 204, []), ("/created", 201, Array("made".utf8)),
                                         ("/big", 200, big), ("/error", 500, Array("{\"e\":1}".utf8)), ("/empty", 200, [])] {
                c.write("GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n")
                guard let a = c.readAnswer() else { return XCTFail("\(path) not answered") }
                XCTAssertEqual(a.status, status, path)
                XCTAssertTrue(a.body == body, "\(path): \(a.body.count) bytes, not \(body.count)")
                XCTAssertNil(a.header("transfer-encoding"), path)
                if status == 204 {
                    XCTAssertEqual(a.header("x-kind"), "no content")
                    XCTAssertTrue(c.quiet(millis: 100), "a 204 has no body")
                } else {
                    XCTAssertEqual(a.header("content-length"), "\(body.count)", path)
                }
            }
        }
    }
}

/// The wire tests' server and assertions (shared with HTTP1StrictnessTests).
extension XCTestCase {
    /// A server on port 0 answering with `handler` on the port `WirePort.current` names,
    /// stopped when the test ends, pass or fail.
    func serve(maxBody: Int = 1 << 20, _ handler: @escaping HTTPHandler) throws -> HTTPServer {
        let s: HTTPServer
        switch WirePort.current {
        case .plain:
            s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, handler: handler)
        case .httpsPort:
            s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody,
                               https: HTTPSListenerOptions(port: 0, credentials: try WirePort.credentials()), handler: handler)
        case .httpTLS:
            s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, tls: try WirePort.credentials(), handler: handler)
        }
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }

    /// Runs `body` once for every port that serves HTTP/1.1: the plain port, the HTTPS port
    /// (ALPN `http/1.1`) and the plain port with `tls` (`--http-tls`); a failure names the port.
    func onEveryPort(_ body: () throws -> Void) rethrows {
        for port in WirePort.allCases {
            WirePort.current = port
            defer { WirePort.current = .plain }
            let failuresBefore = testRun?.totalFailureCount ?? 0
            try body()
            if (testRun?.totalFailureCount ?? 0) > failuresBefore { XCTFail("(the failures above were on the \(port) port)") }
        }
    }

    /// A server that records every request it is handed and answers 200 (413 when the body
    /// was too large, as the application does) with the request's body and its path in X-Path.
    func echoServer(maxBody: Int = 1 << 20) throws -> (HTTPServer, Locked<[HTTPRequest]>) {
        let seen = Locked<[HTTPRequest]>([])
        let server = try serve(maxBody: maxBody) { r, responder in
            seen.withLock { $0.append(r) }
            responder.send(HTTPResponse(status: r.bodyTooLarge ? 413 : 200, headers: [("X-Path", r.path)], body: r.body))
        }
        return (server, seen)
    }

    static func post(_ path: String, _ body: String, extra: String = "") -> String {
        "POST \(path) HTTP/1.1\r\nHost: t\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// Asserts `c` gets a 200 answer whose body is `body` (and X-Path `path` when given).
    func assertEcho(_ c: RawHTTP1, _ body: String, path: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        guard let a = c.readAnswer() else { return XCTFail("no answer (connection ended or timed out)", file: file, line: line) }
        XCTAssertEqual(a.status, 200, a.head, file: file, line: line)
        XCTAssertEqual(a.text, body, file: file, line: line)
        if let path { XCTAssertEqual(a.header("x-path"), path, file: file, line: line) }
    }

    /// Asserts the server closes `c` with nothing more to say.
    func assertClosed(_ c: RawHTTP1, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        let rest = c.readUntilClosed()
        XCTAssertTrue(rest.closed, "not closed: \(message)", file: file, line: line)
        XCTAssertEqual(String(decoding: rest.bytes, as: UTF8.self), "", "bytes after the answer: \(message)", file: file, line: line)
    }
}

/// The ports the wire contract is checked on: one HTTP/1.1 implementation serves them all.
enum WirePort: CaseIterable, CustomStringConvertible {
    case plain, httpsPort, httpTLS

    /// The port the next `serve` and `RawHTTP1(server)` use (tests run one at a time).
    nonisolated(unsafe) static var current = WirePort.plain

    var description: String {
        switch self {
        case .plain: "plain"
        case .httpsPort: "HTTPS (ALPN http/1.1)"
        case .httpTLS: "--http-tls"
        }
    }

    /// A self-signed certificate for 127.0.0.1, made once.
    static func credentials() throws -> TLSCredentials {
        if let c = made.withLock({ $0 }) { return c }
        let c = try TLSCredentials.selfSigned(names: ["127.0.0.1", "localhost"], directory: NSTemporaryDirectory())
        made.withLock { $0 = c }
        return c
    }

    private static let made = Locked<TLSCredentials?>(nil)
}

/// One connection to the server spoken in raw bytes: what is written goes out as it is, and
/// answers are parsed here (Content-Length, chunked, or to the end), so nothing a client library
/// would smooth over is hidden. Every read is bounded (a receive time-out and a deadline). Over
/// TLS the bytes go through a socket pair that a thread of the test pumps through a TLS
/// session, so the same reads and writes (and closes) reach the server encrypted.
final class RawHTTP1 {
    struct Answer {
        var head: String
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8] = []
        var text: String { String(decoding: body, as: UTF8.self) }
        /// The first field called `name` (any case).
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    /// The server closed the connection.
    private var ended = false
    private let seconds: Int

    init(port: Int, seconds: Int = 5) throws {
        self.seconds = seconds
        fd = try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: seconds)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// A connection to `server`'s HTTP/1.1 port of `WirePort.current`: plain, or TLS with ALPN
    /// `http/1.1` through a pump.
    convenience init(_ server: HTTPServer, seconds: Int = 5) throws {
        switch WirePort.current {
        case .plain: try self.init(port: server.port, seconds: seconds)
        case .httpsPort: try self.init(tlsPort: server.httpsPort ?? 0, seconds: seconds)
        case .httpTLS: try self.init(tlsPort: server.port, seconds: seconds)
        }
    }

    private init(tlsPort: Int, seconds: Int) throws {
        self.seconds = seconds
        let tcp = try ConnectSocket.open(host: "127.0.0.1", port: tlsPort, receiveTimeout: seconds)
        let session: TLSSession
        do {
            session = try TLSSession(clientOn: tcp, host: "127.0.0.1", trust: .anyone, protocols: ["http/1.1"])
        } catch {
            close(tcp)
            throw error
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { throw SocketError("socketpair failed") }
        fd = pair[0]
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let local = pair[1]
        spawnThread { Self.pump(session, tcp, local) }
    }

    /// Copies both ways between the TLS session and the pair's end until either side ends; the
    /// server's close (or reset) closes the pair, the test's close sends the closing alert.
    static func pump(_ session: TLSSession, _ tcp: Int32, _ local: Int32) {
        defer {
            session.bye()
            close(tcp)
            close(local)
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var fromServer = session.hasBufferedData
            var fromTest = false
            if !fromServer {
                var fds = [pollfd(fd: tcp, events: Int16(POLLIN), revents: 0), pollfd(fd: local, events: Int16(POLLIN), revents: 0)]
                if poll(&fds, 2, 10_000) <= 0 { return }
                fromServer = fds[0].revents != 0
                fromTest = fds[1].revents != 0
            }
            if fromServer {
                let n = buffer.withUnsafeMutableBytes { session.read($0.baseAddress!, $0.count) }
                if n <= 0 { return }
                var off = 0
                while off < n {
                    let w = buffer[off..<n].withUnsafeBytes { send(local, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if w <= 0 { return }
                    off += w
                }
            }
            if fromTest {
                let n = buffer.withUnsafeMutableBytes { recv(local, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return }
                guard buffer.withUnsafeBytes({ session.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { return }
            }
        }
    }

    deinit { hangUp() }

    /// Closes the client's end.
    func hangUp() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Writes all of `bytes`; false when the server closed (a refused request may be cut short).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    @discardableResult
    func write(_ text: String) -> Bool { write(Array(text.utf8)) }

    /// Writes `bytes` whole if the socket takes them now; false when it would block.
    func writeWithoutWaiting(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } == bytes.count
    }

    /// Reads more into the buffer; false at the end of the connection, on an error or time-out.
    private func fill(until deadline: UInt64) -> Bool {
        guard monotonicNanos() < deadline else { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { buffer += chunk[0..<n] }
        // A reset counts as the end: a server that closes with input unread resets.
        ended = ended || n == 0 || (n < 0 && errno == ECONNRESET)
        return n > 0
    }

    private func deadline() -> UInt64 { monotonicNanos() + UInt64(seconds) * 1_000_000_000 }

    /// The bytes before the next `separator`, which is consumed too; nil if it never comes.
    private func take(upTo separator: [UInt8], by end: UInt64) -> [UInt8]? {
        while true {
            let n = separator.count
            if buffer.count >= n, let i = (0...(buffer.count - n)).first(where: { buffer[$0..<$0 + n].elementsEqual(separator) }) {
                defer { buffer.removeFirst(i + n) }
                return Array(buffer[0..<i])
            }
            guard fill(until: end) else { return nil }
        }
    }

    /// The next `count` bytes; nil if they never all come.
    private func take(_ count: Int, by end: UInt64) -> [UInt8]? {
        while buffer.count < count { guard fill(until: end) else { return nil } }
        defer { buffer.removeFirst(count) }
        return Array(buffer[0..<count])
    }

    /// A status line and header block (an interim 1xx included), without any body.
    func readHead() -> Answer? {
        guard let raw = take(upTo: [13, 10, 13, 10], by: deadline()) else { return nil }
        let head = String(decoding: raw, as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ", maxSplits: 2)
        guard lines[0].hasPrefix("HTTP/1."), parts.count >= 2, parts[1].count == 3, let status = Int(parts[1]) else { return nil }
        let fields = lines.dropFirst().compactMap { l -> (String, String)? in
            guard let colon = l.firstIndex(of: ":") else { return nil }
            return (String(l[..<colon]), l[l.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Answer(head: head, status: status, headers: fields)
    }

    /// One whole answer to a `method` request, framed as RFC 9112 §6.3 says; nil when the
    /// connection ended or time ran out first.
    func readAnswer(to method: String = "GET") -> Answer? {
        guard var a = readHead() else { return nil }
        let end = deadline()
        if method == "HEAD" || a.status < 200 || a.status == 204 || a.status == 304 { return a }
        if a.header("transfer-encoding")?.lowercased() == "chunked" {
            while let line = take(upTo: [13, 10], by: end),
                  let size = Int(String(decoding: line, as: UTF8.self).split(separator: ";").first?.trimmingCharacters(in: .whitespaces) ?? "", radix: 16) {
                guard size > 0 else { return take(upTo: [13, 10], by: end).map { _ in a } }  // no trailer expected
                guard let data = take(size + 2, by: end) else { return nil }
                a.body += data.dropLast(2)
            }
            return nil
        }
        if let length = a.header("content-length").flatMap({ Int($0) }) {
            guard let body = take(length, by: end) else { return nil }
            a.body = body
            return a
        }
        let rest = readUntilClosed()
        a.body = rest.bytes
        return rest.closed ? a : nil
    }

    /// Everything until the server closes: `closed` is false when time ran out first.
    func readUntilClosed() -> (bytes: [UInt8], closed: Bool) {
        let end = deadline()
        while fill(until: end) {}
        defer { buffer = [] }
        return (buffer, ended)
    }

    /// Whether nothing arrives (and the connection stays open) for `millis`.
    func quiet(millis: Int32) -> Bool {
        guard buffer.isEmpty else { return false }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, millis) == 0
    }
}
