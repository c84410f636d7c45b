import FCMTesting
import Foundation
import HTTPServer
import Platform
import XCTest

/// HTTP/2 on the plain port (h2c with prior knowledge), frame by frame: streams, limits and the
/// known attacks, against the real server over real sockets.
final class HTTP2FramingTests: XCTestCase {
    func start(maxBody: Int = 1024, _ handler: @escaping HTTPHandler) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, handler: handler)
        try s.start()
        return s
    }

    /// Echoes method, path, query, a header and the body; answers after `x-delay-ms` from another thread.
    static let echo: HTTPHandler = { r, responder in
        let q = r.rawQuery.map { "\($0.0)=\($0.1 ?? "-")" }.joined(separator: "&")
        let text = r.bodyTooLarge ? "too large" : "\(r.method) \(r.path) \(q) \(r.header("host") ?? "-") \(String(decoding: r.body, as: UTF8.self))"
        let answer = HTTPResponse(status: r.bodyTooLarge ? 413 : 200, contentType: "text/plain", body: text, headers: [("X-Reply", "yes")])
        let delay = r.header("x-delay-ms").flatMap { UInt32($0) } ?? 0
        if delay == 0 { return responder.send(answer) }
        spawnThread {
            usleep(delay * 1000)
            responder.send(answer)
        }
    }

    /// A HEAD answer is the head alone: its fields with the length the body would have, the
    /// stream ended on HEADERS, no DATA (RFC 9110 §9.3.2).
    func testAHeadAnswerHasItsLengthAndNoBody() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "HEAD", "/h")
        var others: [H2RawClient.Frame] = []
        let a = try XCTUnwrap(c.collect([1], others: &others)[1])
        XCTAssertEqual(a.status, 200)
        XCTAssertEqual(a.headers.first { $0.0 == "content-length" }?.1, String("HEAD /h  localhost ".utf8.count))
        XCTAssertTrue(a.body.isEmpty)
        XCTAssertFalse(others.contains { $0.type == H2RawClient.data && $0.stream == 1 })
        // The connection goes on.
        c.sendRequest(3, "GET", "/g")
        XCTAssertEqual(c.collect([3])[3]?.text, "GET /g  localhost ")
    }

    func testManyConcurrentStreamsEachGetTheirOwnAnswer() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        var ids = Set<Int32>()
        for i in 0..<100 {
            let id = Int32(2 * i + 1)
            ids.insert(id)
            // Later streams answer sooner: the answers come back out of order.
            c.sendRequest(id, "POST", "/s/\(id)?n=\(i)", body: Array("body-\(id)".utf8), extra: [("x-delay-ms", String((100 - i) % 7 * 10))])
        }
        let answers = c.collect(ids)
        XCTAssertEqual(Set(answers.keys), ids)
        for id in ids {
            let a = try XCTUnwrap(answers[id])
            XCTAssertEqual(a.status, 200)
            XCTAssertEqual(a.text, "POST /s/\(id) n=\((id - 1) / 2) localhost body-\(id)")
            XCTAssertTrue(a.headers.contains { $0 == ("x-reply", "yes") })
            XCTAssertTrue(a.headers.contains { $0 == ("content-length", String(a.body.count)) })
        }
    }

    func testRequestsOfOneReadAreMarkedAndAfterBatchFollowsThem() throws {
        // The handler answers nothing itself: whatever it leaves pending, afterBatch answers. A
        // request that waited for anything else would never be answered.
        let held = Locked<(responders: [HTTPResponder], inBatch: [Bool], batches: Int)>(([], [], 0))
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, afterBatch: {
            let waiting = held.withLock { h -> [HTTPResponder] in
                h.batches += 1
                defer { h.responders = [] }
                return h.responders
            }
            for r in waiting { r.send(HTTPResponse(status: 200, contentType: "text/plain", body: "ok")) }
        }) { r, responder in
            held.withLock { h in
                h.responders.append(responder)
                h.inBatch.append(r.inBatch)
            }
        }
        try server.start()
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        // Ten requests in one write: one read on the server's side.
        var bytes: [UInt8] = []
        let ids = Set((0..<10).map { Int32(2 * $0 + 1) })
        for id in ids.sorted() {
            bytes += H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders | H2RawClient.endStream, id,
                                            H2RawClient.request("GET", "/batch/\(id)"))
        }
        XCTAssertTrue(c.write(bytes))
        let answers = c.collect(ids)
        XCTAssertEqual(Set(answers.keys), ids)
        XCTAssertTrue(answers.values.allSatisfy { $0.status == 200 && $0.text == "ok" })
        let (marked, batches) = held.withLock { ($0.inBatch, $0.batches) }
        XCTAssertEqual(marked, Array(repeating: true, count: 10))
        XCTAssertGreaterThanOrEqual(batches, 1)
        XCTAssertLessThan(batches, 10, "once a read, not once a request")
    }

    func testAfterBatchStillFollowsRequestsWhoseConnectionClosed() throws {
        // A client that sends and hangs up at once: what its requests left pending (a send's
        // queued writes) is still handed to afterBatch, not left for whoever comes next.
        let seen = Locked<(requests: Int, afterLast: Bool)>((0, false))
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, afterBatch: {
            seen.withLock { $0.afterLast = $0.requests == 3 }
        }) { _, _ in
            seen.withLock { $0.requests += 1; $0.afterLast = false }
        }
        try server.start()
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        var bytes: [UInt8] = []
        for id: Int32 in [1, 3, 5] {
            bytes += H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders | H2RawClient.endStream, id,
                                            H2RawClient.request("GET", "/gone/\(id)"))
        }
        XCTAssertTrue(c.write(bytes))
        // Hung up at once, unanswered. Shut for sending rather than closed: a closed socket
        // answers the server's first write (its SETTINGS) with a reset, which can discard the
        // requests before the server has read them when the machine is busy.
        shutdown(c.fd, Int32(SHUT_WR))
        let deadline = Date().addingTimeInterval(5)
        while !seen.withLock({ $0.afterLast }) && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(seen.withLock { $0.requests }, 3)
        XCTAssertTrue(seen.withLock { $0.afterLast }, "afterBatch after the last request")
    }

    func testWithoutAfterBatchNoRequestIsMarked() throws {
        let marked = Locked<[Bool]>([])
        let server = try start { r, responder in
            marked.withLock { $0.append(r.inBatch) }
            responder.send(HTTPResponse(status: 204))
        }
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/a")
        c.sendRequest(3, "GET", "/b")
        XCTAssertEqual(Set(c.collect([1, 3]).keys), [1, 3])
        XCTAssertEqual(marked.withLock { $0 }, [false, false])
        // HTTP/1.1 requests are never in a batch either.
        let m = try HTTPTestClient(port: server.port).request("GET", "/c")
        XCTAssertEqual(m.status, 204)
        XCTAssertEqual(marked.withLock { $0 }, [false, false, false])
    }

    func testAnswerFieldsAreLowerCasedAndConnectionSpecificOnesDropped() throws {
        let server = try start { _, responder in
            responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: "ok", headers: [
                ("X-Mixed-Case", "Kept As Sent"), ("Connection", "close"), ("keep-alive", "timeout=5"),
                ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Proxy-Connection", "x"), ("retry-after", "3"),
            ]))
        }
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/fields")
        let a = try XCTUnwrap(c.collect([1])[1])
        XCTAssertEqual(a.status, 200)
        let names = a.headers.map(\.0)
        XCTAssertEqual(names, names.map { $0.lowercased() }, "every field name in lower case")
        XCTAssertTrue(a.headers.contains { $0 == ("x-mixed-case", "Kept As Sent") }, "\(a.headers)")
        XCTAssertTrue(a.headers.contains { $0 == ("retry-after", "3") })
        XCTAssertTrue(a.headers.contains { $0 == ("content-type", "text/plain") })
        for dropped in ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"] {
            XCTAssertFalse(names.contains(dropped), dropped)
        }
    }

    func testHTTP1StillServedOnTheSamePort() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        let h2 = try H2RawClient(port: server.port)
        h2.sendRequest(1, "GET", "/h2")
        XCTAssertEqual(h2.collect([1])[1]?.text, "GET /h2  localhost ")
        let r = try HTTPTestClient(port: server.port).request("GET", "/h1?x=1")
        XCTAssertEqual(r.text, "GET /h1 x=1 127.0.0.1:\(server.port) ")
    }

    func testBodyOverTheLimitIsReadAndFlagged() throws {
        let server = try start(maxBody: 1000, Self.echo)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "POST", "/big", body: [UInt8](repeating: 65, count: 4000))
        c.sendRequest(3, "POST", "/small", body: Array("ok".utf8))
        let answers = c.collect([1, 3])
        XCTAssertEqual(answers[1]?.status, 413)
        XCTAssertEqual(answers[3]?.text, "POST /small  localhost ok")
    }

    /// A request has `requestSeconds` from its HEADERS to its last body byte (RST_STREAM CANCEL
    /// past it, however the bytes are paced), and the bodies a connection's open streams hold
    /// are bounded all together (GOAWAY ENHANCE_YOUR_CALM), each one under the body limit.
    func testSlowBodiesAreCancelledAndHeldBodiesAreBoundedPerConnection() throws {
        var limits = HTTP2Limits()
        limits.requestSeconds = 1
        limits.maxPendingBodyBytes = 64 * 1024
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 32 * 1024, http2Limits: limits, handler: Self.echo)
        try server.start()
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        let head = H2RawClient.request("POST", "/slow", extra: [("content-length", "100")])
        XCTAssertTrue(c.write(H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders, 1, head)))
        for _ in 0..<4 {
            _ = c.write(H2RawClient.frameBytes(H2RawClient.data, 0, 1, [65]))
            usleep(400_000)
        }
        c.sendRequest(3, "POST", "/quick", body: Array("ok".utf8))
        let answers = c.collect([1, 3])
        XCTAssertEqual(answers[1]?.reset, 8, "CANCEL")
        XCTAssertEqual(answers[3]?.text, "POST /quick  localhost ok", "the connection goes on")

        let many = try H2RawClient(port: server.port)
        var sent = 0
        for i in 0..<4 {
            let id = Int32(2 * i + 1)
            let h = H2RawClient.request("POST", "/held", extra: [("content-length", "30000")])
            _ = many.write(H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders, id, h))
            _ = many.write(H2RawClient.frameBytes(H2RawClient.data, 0, id, [UInt8](repeating: 66, count: 16_000)))
            _ = many.write(H2RawClient.frameBytes(H2RawClient.data, 0, id, [UInt8](repeating: 66, count: 13_000)))
            sent += 29_000
        }
        XCTAssertGreaterThan(sent, limits.maxPendingBodyBytes)
        XCTAssertEqual(many.readUntilGoAway()?.errorCode, 11, "ENHANCE_YOUR_CALM")
        let fresh = try H2RawClient(port: server.port)
        fresh.sendRequest(1, "GET", "/still-up")
        XCTAssertEqual(fresh.collect([1])[1]?.status, 200)
    }

    /// At the connection limit, the connection idle the longest (no stream) makes room for a new
    /// one (GOAWAY, as its idle time-out would); when every one has streams, the new one is closed.
    func testAtTheConnectionLimitTheLongestIdleMakesRoom() throws {
        var limits = HTTP2Limits()
        limits.maxConnections = 2
        let held = Locked<[HTTPResponder]>([])
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, http2Limits: limits) { r, responder in
            if r.path == "/hold" { held.withLock { $0.append(responder) } } else { Self.echo(r, responder) }
        }
        try server.start()
        defer { server.stop() }
        let first = try H2RawClient(port: server.port)
        first.sendRequest(1, "GET", "/one")
        XCTAssertEqual(first.collect([1])[1]?.status, 200)
        usleep(300_000)
        let second = try H2RawClient(port: server.port)
        second.sendRequest(1, "GET", "/two")
        XCTAssertEqual(second.collect([1])[1]?.status, 200)
        usleep(300_000)
        let third = try H2RawClient(port: server.port)
        third.sendRequest(1, "GET", "/three")
        XCTAssertEqual(third.collect([1])[1]?.status, 200, "room was made")
        XCTAssertNotNil(first.readUntilGoAway(), "the longest idle went")
        second.sendRequest(3, "GET", "/two-again")
        XCTAssertEqual(second.collect([3])[3]?.status, 200, "the other stays")
        // Both busy: a new connection is closed at once.
        second.sendRequest(5, "GET", "/hold")
        third.sendRequest(3, "GET", "/hold")
        var waited = 0
        while held.withLock({ $0.count }) < 2 && waited < 200 {
            usleep(10_000)
            waited += 1
        }
        let fourth = try H2RawClient(port: server.port)
        fourth.sendRequest(1, "GET", "/four")
        XCTAssertNil(fourth.collect([1])[1]?.status, "no room: closed")
        for r in held.withLock({ $0 }) { r.send(HTTPResponse(status: 204)) }
    }

    func testStreamsBeyondTheConcurrencyLimitAreRefused() throws {
        let held = Locked<[HTTPResponder]>([])
        let server = try start { _, responder in held.withLock { $0.append(responder) } }
        defer { server.stop() }
        // A client that has not yet acknowledged the server's SETTINGS may not know the limit:
        // its excess streams are refused, the connection goes on. (After the acknowledgement,
        // libnghttp2 treats a client over the limit as broken: GOAWAY PROTOCOL_ERROR.)
        let c = try H2RawClient(port: server.port)
        for i in 0..<1002 { c.sendRequest(Int32(2 * i + 1), "GET", "/wait") }
        // Streams 1,001 and 1,002 (ids 2001 and 2003) are refused; the 1,000 before them wait.
        var others: [H2RawClient.Frame] = []
        let answers = c.collect([2001, 2003], others: &others)
        XCTAssertEqual(answers[2001]?.reset, 7, "REFUSED_STREAM")
        XCTAssertEqual(answers[2003]?.reset, 7, "REFUSED_STREAM")
        XCTAssertFalse(others.contains { $0.type == H2RawClient.goAway })
        var waited = 0
        while held.withLock({ $0.count }) < 1000 && waited < 500 {
            usleep(10_000)
            waited += 1
        }
        XCTAssertEqual(held.withLock { $0.count }, 1000)
        for r in held.withLock({ $0 }) { r.send(HTTPResponse(status: 204)) }
        XCTAssertEqual(c.collect([1, 1999])[1999]?.status, 204)
    }

    func testHeaderListOverTheLimitGets431() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        // 70 KiB of fields in HEADERS plus CONTINUATION frames (16 KiB each).
        var block = H2RawClient.request("GET", "/big-headers")
        for i in 0..<7 { block += H2RawClient.literal("x-filler-\(i)", String(repeating: "v", count: 10_000)) }
        let chunks = stride(from: 0, to: block.count, by: 16_384).map { Array(block[$0..<min($0 + 16_384, block.count)]) }
        for (i, chunk) in chunks.enumerated() {
            let last = i == chunks.count - 1
            c.frame(i == 0 ? H2RawClient.headers : H2RawClient.continuation,
                    (last ? H2RawClient.endHeaders : 0) | (i == 0 ? H2RawClient.endStream : 0), 1, chunk)
        }
        c.sendRequest(3, "GET", "/after")
        let answers = c.collect([1, 3])
        XCTAssertEqual(answers[1]?.status, 431)
        XCTAssertEqual(answers[3]?.status, 200, "the connection stays usable")
    }

    func testHPACKBombIsRefusedWithoutDecodingIntoMemory() throws {
        let seen = Locked(0)
        let server = try start { r, responder in
            seen.withLock { $0 += r.headers.count }
            responder.send(HTTPResponse(status: 200, contentType: "text/plain", body: r.path))
        }
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        // One 4000-byte value enters the dynamic table, then 10 000 one-byte references to it:
        // 10 KB on the wire, 40 MB once decoded.
        var block = H2RawClient.request("GET", "/bomb") + H2RawClient.indexedLiteral("x-bomb", String(repeating: "b", count: 4000))
        block += [UInt8](repeating: H2RawClient.indexed(62)[0], count: 10_000)
        c.frame(H2RawClient.headers, H2RawClient.endHeaders | H2RawClient.endStream, 1, block)
        c.sendRequest(3, "GET", "/after")
        let answers = c.collect([1, 3])
        XCTAssertEqual(answers[1]?.status, 431)
        XCTAssertEqual(answers[3]?.text, "/after")
        XCTAssertLessThan(seen.withLock { $0 }, 20, "the bomb's fields never reached the handler")
    }

    func testContinuationFloodEndsTheConnection() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        // Endless empty CONTINUATION frames, and endless big ones: GOAWAY ENHANCE_YOUR_CALM.
        for fragment in [[UInt8](), H2RawClient.literal("x-flood", String(repeating: "f", count: 16_000))] {
            let c = try H2RawClient(port: server.port)
            c.frame(H2RawClient.headers, 0, 1, H2RawClient.request("GET", "/flood"))
            // 100 frames a write, until the server closes (or 100 000 frames, far past any limit).
            let batch = Array([[UInt8]](repeating: H2RawClient.frameBytes(H2RawClient.continuation, 0, 1, fragment), count: 100).joined())
            var writes = 0
            while writes < 1000 && c.write(batch) { writes += 1 }
            let goAway = c.readUntilGoAway()
            XCTAssertEqual(goAway?.errorCode, 11, "ENHANCE_YOUR_CALM")
            XCTAssertNil(c.readFrame(), "then the connection is closed")
        }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/still-up")
        XCTAssertEqual(c.collect([1])[1]?.status, 200)
    }

    func testRapidResetGetsGoAway() throws {
        let server = try start(Self.echo)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        var burst: [UInt8] = []
        for i in 0..<1000 {
            let id = Int32(2 * i + 1)
            burst += H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders | H2RawClient.endStream, id,
                                            H2RawClient.request("GET", "/r", extra: [("x-delay-ms", "50")]))
            burst += H2RawClient.frameBytes(H2RawClient.rstStream, 0, id, H2RawClient.uint32(8))  // CANCEL
        }
        c.write(burst)
        let goAway = c.readUntilGoAway()
        XCTAssertEqual(goAway?.errorCode, 11, "ENHANCE_YOUR_CALM")
        XCTAssertNil(c.readFrame(), "then the connection closes")
        let fresh = try H2RawClient(port: server.port)
        fresh.sendRequest(1, "GET", "/still-up")
        XCTAssertEqual(fresh.collect([1])[1]?.status, 200)
    }

    func testGoAwayOnShutdownStillAnswersStreamsInFlight() throws {
        let held = Locked<HTTPResponder?>(nil)
        let server = try start { r, responder in
            if r.path == "/wait" { held.withLock { $0 = responder } } else { responder.send(HTTPResponse(status: 200)) }
        }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/wait")
        var waited = 0
        while held.withLock({ $0 }) == nil && waited < 500 {
            usleep(10_000)
            waited += 1
        }
        server.refuseNewRequests()
        let goAway = c.readUntilGoAway()
        XCTAssertEqual(goAway?.errorCode, 0, "NO_ERROR")
        XCTAssertEqual(goAway?.lastStreamID, 1)
        held.withLock { $0 }?.send(HTTPResponse(status: 202, contentType: "text/plain", body: "late"))
        let a = c.collect([1])
        XCTAssertEqual(a[1]?.status, 202)
        XCTAssertEqual(a[1]?.text, "late")
        server.stop()
        XCTAssertNil(c.readFrame(), "closed after the last stream")
    }

    func testAccessLogCoversHTTP2() throws {
        let lines = Locked<[HTTPAccess]>([])
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 100, accessLog: { a in lines.withLock { $0.append(a) } },
                               handler: Self.echo)
        try s.start()
        defer { s.stop() }
        let c = try H2RawClient(port: s.port)
        c.sendRequest(1, "GET", "/logged?q=1", extra: [("authorization", "key=secret")])
        XCTAssertEqual(c.collect([1])[1]?.status, 200)
        let a = try XCTUnwrap(lines.withLock { $0.first })
        XCTAssertEqual(a.method, "GET")
        XCTAssertEqual(a.path, "/logged")
        XCTAssertEqual(a.status, 200)
        XCTAssertEqual(a.authorization, "key=secret")
    }
}
