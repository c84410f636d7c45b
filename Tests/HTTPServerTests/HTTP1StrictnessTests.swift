import Dispatch
@testable import HTTPServer
import Platform
import XCTest

/// Where the plain port's own HTTP/1.1 loop is stricter or more exact than libmicrohttpd was
/// (each case below was wrong there), a streamed answer over HTTP/1.1, and the pure parts
/// (head parser, chunked decoder) on their own.
final class HTTP1StrictnessTests: XCTestCase {
    func testAnInvalidContentLengthGetsOne400AndACloseWithoutTheHandler() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\nabc")
            guard let a = c.readAnswer() else { return XCTFail("no answer") }
            XCTAssertEqual(a.status, 400)
            assertClosed(c, "one answer, then the close")
            XCTAssertEqual(seen.withLock { $0.count }, 0)
        }
    }

    func testHeaderValuesLoseTrailingWhitespace() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("GET / HTTP/1.1\r\nHost: t\r\nX-Test:  Value \t\r\n\r\n")
            assertEcho(c, "")
            XCTAssertEqual(seen.withLock { $0.first?.header("x-test") }, "Value")
        }
    }

    func testWhitespaceBeforeAChunkExtensionIsAccepted() throws {
        try onEveryPort {
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5 ;name=value\r\nhello\r\n0\r\n\r\n")
            assertEcho(c, "hello")
        }
    }

    func testChunkLinesMustEndInCRLFExactly() throws {
        try onEveryPort {
            // RFC 9112 §7.1: each line ends in CRLF and each chunk's data is followed by CRLF. Parsers
            // that guess otherwise disagree on where the body ends ("funky chunks" smuggling).
            let (server, seen) = try echoServer()
            let bodies = [
                "5\nhello\r\n0\r\n\r\n",  // a size line ending in a bare LF
                "5;ext=1\nhello\r\n0\r\n\r\n",  // the same after an extension
                "5\r\nhello\n0\r\n\r\n",  // data followed by a bare LF
                "5\r\nhelloXY0\r\n\r\n",  // data followed by other bytes
                "5\r\nhello\r\n0\n\r\n",  // the last chunk's line with a bare LF
                "5\r\nhello\r\n0\r\nT: v\n\r\n",  // a trailer line with a bare LF
                "5\r\nhello\r\n0\r\n\n",  // the final line a bare LF
                "5;a\rb\r\nhello\r\n0\r\n\r\n",  // a bare CR inside a size line
                "\r\n5\r\nhello\r\n0\r\n\r\n",  // an empty size line
            ]
            for body in bodies {
                let c = try RawHTTP1(server)
                c.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
                guard let a = c.readAnswer() else {
                    XCTFail("no answer to \(body.debugDescription)")
                    continue
                }
                XCTAssertEqual(a.status, 400, body.debugDescription)
                assertClosed(c, body.debugDescription)
            }
            XCTAssertEqual(seen.withLock { $0.count }, 0, "no refused body reaches the handler")
            // The same body with every CRLF in place is served.
            let c = try RawHTTP1(server)
            c.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: v\r\n\r\n")
            assertEcho(c, "hello")
        }
    }

    func testBothFramingsAtOnceAreRefusedAndClosed() throws {
        try onEveryPort {
            let (server, seen) = try echoServer()
            let c = try RawHTTP1(server)
            // A request smuggler's opening: the two framings disagree on where the body ends.
            c.write("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
            guard let a = c.readAnswer() else { return XCTFail("no answer") }
            XCTAssertEqual(a.status, 400)
            assertClosed(c)
            XCTAssertEqual(seen.withLock { $0.count }, 0)
        }
    }

    func testARequestWithoutHostIsStillServed() throws {
        try onEveryPort {
            // RFC 9112 asks for 400; libmicrohttpd served it, and clients written against the mock
            // keep working.
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            c.write("GET /nohost HTTP/1.1\r\n\r\n")
            assertEcho(c, "", path: "/nohost")
        }
    }

    func testHTTP10KeepAliveStaysOpen() throws {
        try onEveryPort {
            let (server, _) = try echoServer()
            let c = try RawHTTP1(server)
            for i in 0..<2 {
                c.write("GET /k\(i) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                guard let a = c.readAnswer() else { return XCTFail("request \(i) not answered") }
                XCTAssertEqual(a.header("connection")?.lowercased(), "keep-alive")
                XCTAssertEqual(a.header("x-path"), "/k\(i)")
            }
        }
    }

    func testALargeBodyIsHandledOffTheLoopSoSmallRequestsGoOn() throws {
        try onEveryPort {
            // The large request's handler waits for the small one's: on the loop itself it would
            // wait in vain (the small request is read only after it returns).
            let smallSeen = DispatchSemaphore(value: 0)
            let server = try serve { r, responder in
                if r.path == "/small" {
                    smallSeen.signal()
                    return responder.send(HTTPResponse(status: 200, body: Array("small".utf8)))
                }
                let overlapped = smallSeen.wait(timeout: .now() + 5) == .success
                responder.send(HTTPResponse(status: 200, body: Array("\(r.body.count) \(overlapped)".utf8)))
            }
            let big = try RawHTTP1(server)
            big.write(HTTP1WireTests.post("/big", String(repeating: "x", count: 100_000)))
            usleep(50_000)
            let small = try RawHTTP1(server)
            small.write(HTTP1WireTests.post("/small", "y"))
            XCTAssertEqual(small.readAnswer()?.text, "small")
            XCTAssertEqual(big.readAnswer()?.text, "100000 true")
        }
    }

    func testNoStray100ContinueAfterAClosingAnswer() throws {
        try onEveryPort {
            let server = try serve { r, responder in
                spawnThread {
                    usleep(100_000)
                    responder.send(HTTPResponse(status: 200, body: Array(r.path.utf8)))
                }
            }
            let c = try RawHTTP1(server)
            // A slow request, then one that waits for 100-continue but whose first chunk is garbage.
            c.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\nPOST /p HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\nzz\r\n")
            XCTAssertEqual(c.readAnswer()?.text, "/slow")
            XCTAssertEqual(c.readAnswer()?.status, 400)
            assertClosed(c, "nothing after the closing 400, no 100 Continue")
        }
    }

    func testAStreamBehindAnUnsentAnswerIsReleasedWhenTheClientLeaves() throws {
        try onEveryPort {
            let released = DispatchSemaphore(value: 0)
            let handed = DispatchSemaphore(value: 0)
            let server = try serve { r, responder in
                guard r.path == "/events" else {
                    return spawnThread {
                        usleep(300_000)
                        responder.send(HTTPResponse(status: 200))
                    }
                }
                let stream = HTTPStream()
                stream.onClose { released.signal() }
                var answer = HTTPResponse(status: 200)
                answer.stream = stream
                responder.send(answer)
                handed.signal()
            }
            let c = try RawHTTP1(server)
            c.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            // The client leaves once the stream exists (on a loaded machine the pipelined request
            // may take longer than a fixed pause to be read, over TLS most of all).
            XCTAssertEqual(handed.wait(timeout: .now() + 10), .success, "the pipelined /events was handed over")
            c.hangUp()
            XCTAssertEqual(released.wait(timeout: .now() + 5), .success, "the stream's producer was told its reader is gone")
        }
    }

    func testAClientThatDoesNotReadStopsBeingRead() throws {
        try onEveryPort {
            let handled = Locked(0)
            let server = try serve { _, responder in
                handled.withLock { $0 += 1 }
                responder.send(HTTPResponse(status: 200, body: [UInt8](repeating: 120, count: 256 * 1024)))
            }
            let c = try RawHTTP1(server)
            // Requests until the socket takes no more (the server stopped reading), never reading
            // an answer; 64 to a write, so a socket pair's per-write overhead (over TLS the
            // test's bytes go through one) does not fill it first.
            let request = Array("GET / HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
            let batch = Array([[UInt8]](repeating: request, count: 64).joined())
            var written = 0
            while written < 100_000 && c.writeWithoutWaiting(batch) { written += 64 }
            usleep(300_000)
            let n = handled.withLock { $0 }
            XCTAssertGreaterThan(written, 1000)
            XCTAssertLessThan(n, 200, "\(n) of \(written) requests handed over: answers piled up for a client that reads none")
        }
    }

    func testAStreamedAnswerIsChunkedAndTheConnectionGoesOnAfterIt() throws {
        try onEveryPort {
            let server = try serve { r, responder in
                guard r.path == "/stream" else { return responder.send(HTTPResponse(status: 200, body: Array("after".utf8))) }
                let stream = HTTPStream()
                var answer = HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")])
                answer.stream = stream
                responder.send(answer)
                spawnThread {
                    for i in 0..<3 {
                        usleep(20_000)
                        stream.write(Array("data: \(i)\n\n".utf8))
                    }
                    stream.finish()
                }
            }
            let c = try RawHTTP1(server)
            c.write("GET /stream HTTP/1.1\r\nHost: t\r\n\r\nGET /next HTTP/1.1\r\nHost: t\r\n\r\n")
            guard let a = c.readAnswer() else { return XCTFail("stream not answered") }
            XCTAssertEqual(a.header("transfer-encoding"), "chunked")
            XCTAssertEqual(a.text, "data: 0\n\ndata: 1\n\ndata: 2\n\n")
            guard let b = c.readAnswer() else { return XCTFail("the request after the stream was not answered") }
            XCTAssertEqual(b.text, "after")
        }
    }

    /// A client that closes its connection while a stream is sent has left: the stream's
    /// producer hears so at once, with nothing written (no failed write needed to find out).
    func testAStreamsClientClosingIsItsLeaving() throws {
        try onEveryPort {
            let handed = DispatchSemaphore(value: 0)
            let (server, released) = try streamServer { stream in
                stream.write(Array("data: 1\n\n".utf8))
                handed.signal()
            }
            let c = try RawHTTP1(server)
            c.write("GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            XCTAssertEqual(handed.wait(timeout: .now() + 10), .success)
            XCTAssertNotNil(c.readHead())
            c.hangUp()
            XCTAssertEqual(released.wait(timeout: .now() + 2), .success, "the stream's producer was told its reader left")
        }
    }

    /// A stream cut by its producer while its client reads nothing (the event bus dropping a
    /// reader too far behind): the connection closes at once with what it held, though its
    /// socket never drains (nothing else would look at the stream again).
    func testACutStreamClosesTheConnectionOfAClientThatReadsNothing() throws {
        try onEveryPort {
            let cut = DispatchSemaphore(value: 0)
            let (server, released) = try streamServer { stream in
                spawnThread {
                    // More than the sockets and the connection take: the rest waits in the stream.
                    for _ in 0..<256 { stream.write([UInt8](repeating: 120, count: 64 * 1024)) }
                    usleep(200_000)
                    stream.cut()
                    cut.signal()
                }
            }
            let c = try RawHTTP1(server)
            c.write("GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            XCTAssertEqual(cut.wait(timeout: .now() + 10), .success)
            XCTAssertEqual(released.wait(timeout: .now() + 5), .success, "the connection let the stream go unread")
            let rest = c.readUntilClosed()
            XCTAssertTrue(rest.closed, "the connection closed")
            XCTAssertLessThan(rest.bytes.count, 16 << 20, "what was cut was not sent")
        }
    }

    /// A server answering every request with a stream, handed to `produce` once answered;
    /// `released` is signalled when the stream's connection lets it go.
    func streamServer(_ produce: @escaping @Sendable (HTTPStream) -> Void) throws -> (HTTPServer, released: DispatchSemaphore) {
        let released = DispatchSemaphore(value: 0)
        let server = try serve { _, responder in
            let stream = HTTPStream()
            stream.onClose { released.signal() }
            var answer = HTTPResponse(status: 200)
            answer.stream = stream
            responder.send(answer)
            produce(stream)
        }
        return (server, released)
    }

    func testAStreamedAnswerToHTTP10EndsWithTheConnection() throws {
        try onEveryPort {
            let server = try serve { _, responder in
                let stream = HTTPStream()
                var answer = HTTPResponse(status: 200)
                answer.stream = stream
                responder.send(answer)
                stream.write(Array("one\n".utf8))
                stream.finish()
            }
            let c = try RawHTTP1(server)
            c.write("GET /stream HTTP/1.0\r\n\r\n")
            guard let a = c.readAnswer() else { return XCTFail("no answer") }
            XCTAssertNil(a.header("transfer-encoding"), "HTTP/1.0 knows no chunked coding")
            XCTAssertEqual(a.text, "one\n")
        }
    }
}

/// A stream's backlog on its own: bytes come out in order, and what it reserves stays within a
/// block of what it holds (one growing array had 8 MiB reserved for a reader 4 MiB behind).
final class StreamBacklogTests: XCTestCase {
    func testBytesComeOutInOrderAndTheReserveStaysNearTheBytesHeld() {
        var b = StreamBacklog()
        var written: [UInt8] = []
        var n = 0
        while b.count < 4 << 20 {
            let event = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: 300 + n % 200)
            b.append(event)
            written += event
            n += 1
        }
        XCTAssertEqual(b.count, written.count)
        func assertNearHeld() {
            XCTAssertLessThanOrEqual(b.reservedBytes, b.count + b.count / 50 + StreamBacklog.blockBytes,
                                     "\(b.reservedBytes) bytes reserved for \(b.count)")
        }
        assertNearHeld()
        var read: [UInt8] = []
        while b.count > 0 {
            read += b.take(max: 16 * 1024)
            if read.count % (1 << 20) < 16 * 1024 { assertNearHeld() }
        }
        XCTAssertEqual(read, written)
        XCTAssertEqual(b.reservedBytes, 0)
        XCTAssertTrue(b.take(max: 10).isEmpty)
    }

    func testAWriteLargerThanABlockIsKeptWhole() {
        var b = StreamBacklog()
        b.append([1, 2, 3])
        b.append([UInt8](repeating: 7, count: StreamBacklog.blockBytes + 1))
        b.append([9])
        XCTAssertEqual(Array(b.take(max: 100)), [1, 2, 3], "a take stops at the end of a block")
        XCTAssertEqual(b.take(max: 1 << 20).count, StreamBacklog.blockBytes + 1)
        XCTAssertEqual(Array(b.take(max: 100)), [9])
        XCTAssertEqual(b.count, 0)
    }
}

/// The head parser and the chunked decoder, without a socket.
final class HTTP1ParserTests: XCTestCase {
    /// The head as one line: method, path, query, version, framing, keep-alive.
    func parse(_ text: String) -> Result<String, HTTP1Refusal> {
        let bytes: [UInt8] = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { b in
            do throws(HTTP1Refusal) {
                let h = try HTTP1Parser.parseHead(b)
                let query = h.rawQuery.map { pair in pair.1.map { "\(pair.0)=\($0)" } ?? pair.0 }.joined(separator: " ")
                return .success("\(h.method) \(h.path) [\(query)] 1.\(h.minorVersion) \(h.framing) \(h.keepAlive ? "keep" : "close")")
            } catch {
                return .failure(error)
            }
        }
    }

    func testHeads() {
        XCTAssertEqual(try parse("\r\nGET /a?x=1&y HTTP/1.1\r\nHost: h\r\n\r\n").get(), "GET /a [x=1 y] 1.1 none keep")
        XCTAssertEqual(try parse("POST http://host:80/p HTTP/1.0\nContent-Length: 5\n\n").get(), "POST /p [] 1.0 length(5) close")
        XCTAssertEqual(try parse("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: Close\r\n\r\n").get(),
                       "PUT / [] 1.1 chunked close")
        XCTAssertEqual(try parse("OPTIONS * HTTP/1.1\r\n\r\n").get(), "OPTIONS * [] 1.1 none keep")
        XCTAssertEqual(parse("GET / HTTP/2.0\r\n\r\n"), .failure(.unsupportedVersion))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), .failure(.unsupportedCoding))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").map { _ in "" },
                       .failure(.badRequest("conflicting Content-Length fields")))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n").map { _ in "" }, .failure(.badRequest("folded header line")))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n").map { _ in "" }, .failure(.badRequest("bad header name")))
        XCTAssertEqual(parse("GET /\u{7f} HTTP/1.1\r\n\r\n").map { _ in "" }, .failure(.badRequest("bad request target")))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n").map { _ in "" }, .failure(.badRequest("bad header value")))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nX: a\u{0}b\r\n\r\n").map { _ in "" }, .failure(.badRequest("bad header value")))
        XCTAssertEqual(try parse("GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n").get(), "GET / [] 1.1 none close")
    }

    func testAnswerHeadsKeepTheHandlersFieldsInOrderAndTheFramingOurs() {
        var out: [UInt8] = []
        HTTP1Answer.appendHead(status: 201, headers: [("Content-Type", "a/b"), ("content-length", "999"), ("X-Evil", "v\r\nSet-Cookie: x"),
                                                      ("Transfer-Encoding", "gzip"), ("Connection", "keep-alive"), ("Tail", "t")],
                               length: 3, chunked: false, close: true, date: Array("D".utf8), into: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self),
                       "HTTP/1.1 201 Created\r\nDate: D\r\nConnection: close\r\nContent-Type: a/b\r\n"
                       + "X-Evil: vSet-Cookie: x\r\nTail: t\r\nContent-Length: 3\r\n\r\n")
    }

    func testChunkSizesAreLowerCaseHex() {
        var out: [UInt8] = []
        for n in [0, 9, 10, 15, 16, 0x1a2f] {
            HTTP1Answer.appendHex(n, into: &out)
            out.append(32)
        }
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "0 9 a f 10 1a2f ")
    }

    func testChunkedDecoderTakesAnyPieces() throws {
        try onEveryPort {
            let wire = Array("3;x=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nNEXT".utf8)
            // Fed one byte more at a time, as a slow client sends it.
            var decoder = ChunkedDecoder()
            var pending: [UInt8] = []
            var body: [UInt8] = []
            var used = 0
            for b in wire where decoder.state != .done {
                pending.append(b)
                let n = try pending.withUnsafeBufferPointer { try decoder.feed($0) { body += $0 } }
                pending.removeFirst(n)
                used += n
            }
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "abc0123456789abcdef")
            XCTAssertEqual(used, wire.count - 4, "the bytes after the body are left for the next request")
            var bad = ChunkedDecoder()
            XCTAssertThrowsError(try Array("zz\r\n".utf8).withUnsafeBufferPointer { try bad.feed($0) { _ in } })
            // The CR after a chunk's data waits for its LF; anything else there is refused at once.
            var split = ChunkedDecoder()
            XCTAssertEqual(try Array("3\r\nabc\r".utf8).withUnsafeBufferPointer { try split.feed($0) { _ in } }, 6)
            XCTAssertEqual(split.state, .dataEnd)
            var early = ChunkedDecoder()
            XCTAssertThrowsError(try Array("3\r\nabc\n".utf8).withUnsafeBufferPointer { try early.feed($0) { _ in } })
        }
    }
}
