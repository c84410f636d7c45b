// Long because: every RFC 6455 behaviour of the server gets its end-to-end test through a real
// socket here, over one small handler and one raw client.
@testable import HTTPServer
import Foundation
import Platform
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// WebSocket on the HTTP/1.1 loop, through a real server on port 0 and raw sockets: the
/// handshake and its refusals, frames both ways, every close the server sends and why, the
/// deadlines, the connection limit, back-pressure, shutdown, and `wss://` on the HTTPS port.
final class WebSocketTests: XCTestCase {
    private func open(_ server: HTTPServer, extra: String = "", file: StaticString = #filePath, line: UInt = #line) throws -> RawWebSocket {
        let c = try RawWebSocket(port: server.port)
        let a = c.upgrade(extra: extra)
        XCTAssertEqual(a?.status, 101, a?.head ?? "no answer", file: file, line: line)
        XCTAssertTrue(a?.head.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n") ?? false, a?.head ?? "no answer", file: file, line: line)
        return c
    }

    private func assertEcho(_ c: RawWebSocket, _ text: String, file: StaticString = #filePath, line: UInt = #line) {
        c.write(WSFrame.text(text))
        let f = c.readFrame()
        XCTAssertEqual(f?.opcode, 1, file: file, line: line)
        XCTAssertEqual(f?.fin, true, file: file, line: line)
        XCTAssertEqual(f?.text, text, file: file, line: line)
    }

    /// The server closes with `code`; the client answers with its close, then the TCP connection
    /// ends. Returns the reason.
    @discardableResult
    private func assertServerCloses(_ c: RawWebSocket, _ code: UInt16, file: StaticString = #filePath, line: UInt = #line) -> String? {
        guard let close = c.readClose(file: file, line: line) else { return nil }
        XCTAssertEqual(close.code, code, close.reason, file: file, line: line)
        c.write(WSFrame.close(close.code))
        XCTAssertTrue(c.waitForClose(), "TCP connection not closed after the close handshake", file: file, line: line)
        return close.reason
    }

    // MARK: the handshake

    func testRFC6455HandshakeExampleAndNoExtensionsEvenWhenOffered() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try RawWebSocket(port: server.port)
        let a = try XCTUnwrap(c.upgrade(extra: "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                                            + "Sec-WebSocket-Protocol: chat\r\n"))
        XCTAssertEqual(a.status, 101)
        XCTAssertEqual(a.header("Upgrade"), "websocket")
        XCTAssertEqual(a.header("Connection"), "Upgrade")
        XCTAssertEqual(a.header("Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        XCTAssertNil(a.header("Sec-WebSocket-Extensions"))
        XCTAssertNil(a.header("Sec-WebSocket-Protocol"), "the handler chose none")
        XCTAssertNil(a.header("Content-Length"))
        assertEcho(c, "hello")
        XCTAssertEqual(server.openWebSockets, 1)
        XCTAssertEqual(h.record.withLock { $0.opened.count }, 1)
        let ws = try XCTUnwrap(h.record.withLock { $0.connections.first })
        XCTAssertTrue(ws.remote.hasPrefix("127.0.0.1:"), ws.remote)
        XCTAssertFalse(ws.isSecure)
        XCTAssertGreaterThan(ws.id, 0)
    }

    func testSubprotocolIsEchoedOnlyWhenTheHandlerPassesIt() throws {
        let server = try webSocketServer(EchoWebSocketHandler(), subprotocol: "push-notification")
        let c = try RawWebSocket(port: server.port)
        XCTAssertEqual(c.upgrade(extra: "Sec-WebSocket-Protocol: other, push-notification\r\n")?.header("Sec-WebSocket-Protocol"),
                       "push-notification")
        let d = try RawWebSocket(port: server.port)
        let a = d.upgrade(extra: "Sec-WebSocket-Protocol: other\r\n")
        XCTAssertEqual(a?.status, 101)
        XCTAssertNil(a?.header("Sec-WebSocket-Protocol"))
    }

    func testRefusalsAndTheConnectionStaysUsableAfterThem() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        let c = try RawWebSocket(port: server.port)
        c.write("GET /ws HTTP/1.1\r\nHost: t\r\n\r\n")
        var a = try XCTUnwrap(c.readAnswer())
        XCTAssertEqual(a.status, 426)
        XCTAssertTrue(a.head.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"), a.head)
        XCTAssertEqual(a.header("Upgrade"), "websocket")
        XCTAssertEqual(a.header("Connection"), "Upgrade")
        XCTAssertTrue(a.header("Content-Type")?.hasPrefix("text/plain") ?? false)
        XCTAssertFalse(a.text.isEmpty)
        c.write(RawWebSocket.request(version: "12"))
        a = try XCTUnwrap(c.readAnswer())
        XCTAssertEqual(a.status, 426)
        XCTAssertEqual(a.header("Sec-WebSocket-Version"), "13")
        for key in ["short", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25j!Q==", "dGhlIHNhbXBsZSBub25jZQ==AAAA"] {
            c.write(RawWebSocket.request(key: key))
            XCTAssertEqual(c.readAnswer()?.status, 400, key)
        }
        c.write(RawWebSocket.request().replacingOccurrences(of: "GET", with: "POST") )
        XCTAssertEqual(c.readAnswer()?.status, 400, "not a GET")
        // Still HTTP, in step: and an upgrade on the same connection works.
        XCTAssertEqual(c.upgrade()?.status, 101)
        assertEcho(c, "after the refusals")
    }

    func testUpgradeFunctionsInProcess() {
        func request(_ headers: [(String, String)], method: String = "GET") -> HTTPRequest {
            HTTPRequest(method: method, path: "/ws", headers: headers.map { (name: $0.0, value: $0.1) })
        }
        let good = [("Upgrade", "WebSocket"), ("Connection", "keep-alive, Upgrade"), ("Sec-WebSocket-Version", "13"),
                    ("Sec-WebSocket-Key", RawWebSocket.sampleKey), ("Sec-WebSocket-Protocol", " a ,b,, c ")]
        XCTAssertTrue(WebSocketUpgrade.isUpgrade(request(good)))
        XCTAssertNil(WebSocketUpgrade.refusal(request(good)))
        XCTAssertEqual(WebSocketUpgrade.offeredProtocols(request(good)), ["a", "b", "c"])
        XCTAssertFalse(WebSocketUpgrade.isUpgrade(request([("Upgrade", "h2c"), ("Connection", "Upgrade")])))
        XCTAssertFalse(WebSocketUpgrade.isUpgrade(request([("Upgrade", "websocket"), ("Connection", "keep-alive")])))
        var h2 = request(good)
        h2.isHTTP2 = true
        XCTAssertEqual(WebSocketUpgrade.refusal(h2)?.status, 426)
        XCTAssertEqual(WebSocketUpgrade.accept(h2, subprotocol: nil, handler: EchoWebSocketHandler(), options: .init()).status, 426)
        var old = request(good)
        old.isHTTP10 = true
        XCTAssertEqual(WebSocketUpgrade.refusal(old)?.status, 426)
        let accepted = WebSocketUpgrade.accept(request(good), subprotocol: "b", handler: EchoWebSocketHandler(), options: .init())
        XCTAssertEqual(accepted.status, 101)
        XCTAssertTrue(accepted.headers.contains { $0 == ("Sec-WebSocket-Protocol", "b") })
        XCTAssertEqual(WebSocketUpgrade.base64([]), "")
        XCTAssertEqual(WebSocketUpgrade.base64(Array("f".utf8)), "Zg==")
        XCTAssertEqual(WebSocketUpgrade.base64(Array("fo".utf8)), "Zm8=")
        XCTAssertEqual(WebSocketUpgrade.base64(Array("foobar".utf8)), "Zm9vYmFy")
    }

    func testA101ReachingAnHTTP2StreamOrAPlainRequestBecomes426() throws {
        let h = EchoWebSocketHandler()
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 16) { _, responder in
            // A route that skipped the checks: the 101 carries a handler whatever the request was.
            var a = HTTPResponse(status: 101, headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")])
            a.webSocket = WebSocketAccept(handler: h, options: WebSocketOptions())
            responder.send(a)
        }
        try server.start()
        addTeardownBlock { server.stop() }
        let c = try H2RawClient(port: server.port)
        c.sendRequest(1, "GET", "/ws")
        XCTAssertEqual(c.collect([1])[1]?.status, 426)
        let plain = try RawWebSocket(port: server.port)
        plain.write("GET /ws HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(plain.readAnswer()?.status, 426)
        XCTAssertEqual(h.record.withLock { $0.opened.count }, 0)
        XCTAssertEqual(server.openWebSockets, 0)
    }

    func testAnHTTPAnswerPipelinedBeforeTheUpgradeComesFirstAndFramesInTheSameReadAreRead() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        let c = try RawWebSocket(port: server.port)
        c.write("GET /other HTTP/1.1\r\nHost: t\r\n\r\n" + RawWebSocket.request())
        XCTAssertEqual(c.readAnswer()?.status, 404)
        XCTAssertEqual(c.readHead()?.status, 101)
        assertEcho(c, "then frames")
        let d = try RawWebSocket(port: server.port)
        XCTAssertEqual(d.upgrade(then: WSFrame.text("early") + WSFrame.client(9, Array("p".utf8)))?.status, 101)
        XCTAssertEqual(d.readFrame(), RawWebSocket.Frame(fin: true, opcode: 1, payload: Array("early".utf8)))
        XCTAssertEqual(d.readFrame(), RawWebSocket.Frame(fin: true, opcode: 10, payload: Array("p".utf8)))
    }

    // MARK: frames

    func testFragmentedTextIsReassembledAcrossAUTF8CharacterAndPingsBetween() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server)
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        c.write(WSFrame.client(1, Array("cost ".utf8) + euro[0..<2], fin: false))
        c.write(WSFrame.client(9, []))
        c.write(WSFrame.client(0, [euro[2]] + Array("3".utf8), fin: false))
        c.write(WSFrame.client(0, Array("!".utf8)))
        XCTAssertEqual(c.readFrame(), RawWebSocket.Frame(fin: true, opcode: 10, payload: []))
        XCTAssertEqual(c.readFrame()?.text, "cost €3!")
        XCTAssertTrue(h.wait { $0.frames == 4 }, "sawFrame for every frame")
    }

    func testPingGetsPongWithTheSamePayloadAndPongIsIgnored() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        let c = try open(server)
        let payload = Array((0..<125).map { UInt8($0) })
        c.write(WSFrame.client(10, Array("unsolicited".utf8)))
        c.write(WSFrame.client(9, payload))
        let f = try XCTUnwrap(c.readFrame())
        XCTAssertEqual([f.fin ? 0x80 | f.opcode : f.opcode], [0x8A])
        XCTAssertEqual(f.payload, payload)
        assertEcho(c, "still open")
    }

    func testClientCloseIsEchoedWithItsCodeThenTheConnectionCloses() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server)
        c.write(WSFrame.close(4001, "bye"))
        XCTAssertEqual(c.readFrame(), RawWebSocket.Frame(fin: true, opcode: 8, payload: [0x0F, 0xA1]))
        XCTAssertTrue(c.waitForClose())
        let d = try open(server)
        d.write(WSFrame.close(nil))
        XCTAssertEqual(d.readFrame(), RawWebSocket.Frame(fin: true, opcode: 8, payload: []))
        XCTAssertTrue(d.waitForClose())
        XCTAssertTrue(h.wait { $0.closed.count == 2 })
        XCTAssertEqual(h.record.withLock { $0.closed.map { "\($0.code) \($0.reason)" } }, ["4001 bye", "1005 "])
        XCTAssertTrue(waitFor { server.openWebSockets == 0 })
    }

    func testEachProtocolErrorIsClosedWith1002() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let cases: [(String, [UInt8])] = [
            ("unmasked", WSFrame.client(1, Array("x".utf8), masked: false)),
            ("RSV1", WSFrame.client(1, Array("x".utf8), rsv: 4)),
            ("RSV2", WSFrame.client(9, [], rsv: 2)),
            ("opcode 3", WSFrame.client(3, [])),
            ("opcode 7", WSFrame.client(7, [1])),
            ("opcode 11", WSFrame.client(11, [])),
            ("opcode 15", WSFrame.client(15, [])),
            ("fragmented ping", WSFrame.client(9, [], fin: false)),
            ("ping over 125", WSFrame.client(9, [UInt8](repeating: 7, count: 126))),
            ("continuation first", WSFrame.client(0, Array("x".utf8))),
            ("text inside a fragmented message", WSFrame.text("a", fin: false) + WSFrame.text("b")),
            ("64-bit length with its top bit", [0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
            ("close of one byte", WSFrame.client(8, [3])),
            ("close code 1005", WSFrame.close(1005)),
            ("close code 999", WSFrame.close(999)),
            ("close code 2000", WSFrame.close(2000)),
            ("close reason not UTF-8", WSFrame.client(8, [0x03, 0xE8, 0xFF])),
        ]
        for (name, bytes) in cases {
            let c = try open(server)
            c.write(bytes)
            guard let close = c.readClose() else { return XCTFail(name) }
            XCTAssertEqual(close.code, 1002, "\(name): \(close.reason)")
            c.write(WSFrame.close(1002))
            XCTAssertTrue(c.waitForClose(), name)
        }
        XCTAssertTrue(h.wait { $0.closed.count == cases.count })
        XCTAssertEqual(Set(h.record.withLock { $0.closed.map(\.code) }), [1002])
        XCTAssertTrue(waitFor { server.openWebSockets == 0 })
    }

    func testBinaryIs1003AndBadUTF8Is1007() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        var c = try open(server)
        c.write(WSFrame.client(2, [1, 2, 3]))
        assertServerCloses(c, 1003)
        c = try open(server)
        c.write(WSFrame.client(1, [0x61, 0xED, 0xA0, 0x80]))  // a surrogate
        assertServerCloses(c, 1007)
        c = try open(server)
        c.write(WSFrame.client(1, [0x61, 0xF0, 0x9F], fin: false) + WSFrame.client(0, [0x98]))  // cut short at the end
        assertServerCloses(c, 1007)
    }

    func testOversizeFrameAndMessageAndAHugeDeclaredLengthClose1009() throws {
        var options = WebSocketOptions()
        options.maxMessageBytes = 1000
        let server = try webSocketServer(EchoWebSocketHandler(), options: options)
        var c = try open(server)
        assertEcho(c, String(repeating: "a", count: 1000))
        c.write(WSFrame.text(String(repeating: "a", count: 1001)))
        assertServerCloses(c, 1009)
        c = try open(server)
        c.write(WSFrame.text(String(repeating: "a", count: 600), fin: false) + WSFrame.client(0, Array(String(repeating: "b", count: 401).utf8)))
        assertServerCloses(c, 1009)
        // 2^62 bytes declared, none sent: the close comes at once.
        c = try open(server)
        c.write([0x81, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4])
        XCTAssertEqual(c.readClose()?.code, 1009)
    }

    // MARK: deadlines

    func testFirstMessageDeadlineCloses1008WithTheReason() throws {
        var options = WebSocketOptions()
        options.firstMessageSeconds = 1
        options.firstMessageReason = "say hello first"
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h, options: options)
        let c = try open(server)
        c.write(WSFrame.client(9, []))  // a ping is no message
        XCTAssertEqual(c.readFrame()?.opcode, 10)
        XCTAssertEqual(assertServerCloses(c, 1008), "say hello first")
        // A message in time keeps it open past the deadline.
        let d = try open(server)
        assertEcho(d, "hello")
        XCTAssertTrue(d.quietFor(millis: 2200))
        assertEcho(d, "still here")
        XCTAssertEqual(h.record.withLock { $0.closed.map(\.code) }, [1008])
    }

    func testIdleConnectionIsClosed1000() throws {
        var options = WebSocketOptions()
        options.idleSeconds = 1
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h, options: options)
        let c = try open(server)
        XCTAssertEqual(assertServerCloses(c, 1000), "idle")
        XCTAssertTrue(h.wait { $0.closed.map(\.code) == [1000] })
    }

    // MARK: the room's side

    func testSendFromAnotherThreadArrivesInOrder() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        let c = try open(server)
        c.write(WSFrame.text("send 200"))
        for i in 0..<200 { XCTAssertEqual(c.readFrame()?.text, "message \(i)") }
    }

    func testServerCloseSendsItsCodeAndReasonAndTouchesOnlyItsConnection() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server), other = try open(server)
        c.write(WSFrame.text("close me 4000 going away"))
        let f = try XCTUnwrap(c.readFrame())
        XCTAssertEqual([0x80 | f.opcode] + f.payload, [0x88, 0x0F, 0xA0] + Array("going away".utf8))
        XCTAssertTrue(h.wait { $0.closed.count == 1 })
        XCTAssertEqual(h.record.withLock { "\($0.closed[0].code) \($0.closed[0].reason)" }, "4000 going away")
        // Data after the close is not read as messages; the client's close ends it.
        c.write(WSFrame.text("ignored") + WSFrame.close(4000))
        XCTAssertTrue(c.waitForClose())
        assertEcho(other, "unaffected")
        XCTAssertEqual(h.record.withLock { $0.received }, ["close me 4000 going away", "unaffected"])
        XCTAssertEqual(server.openWebSockets, 1)
    }

    func testServerCloseEndsTheTCPConnectionAfterTwoSecondsWithoutTheClientsClose() throws {
        let server = try webSocketServer(EchoWebSocketHandler())
        let c = try open(server)
        c.write(WSFrame.text("close me 1000 done"))
        XCTAssertEqual(c.readClose()?.code, 1000)
        let started = monotonicNanos()
        XCTAssertTrue(c.waitForClose())
        XCTAssertGreaterThan(monotonicNanos() - started, 1_000_000_000, "the client had its time to answer")
    }

    func testClientThatGoesAwayIsClosed1006() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server)
        assertEcho(c, "x")
        c.hangUp()
        XCTAssertTrue(h.wait { $0.closed.count == 1 })
        XCTAssertEqual(h.record.withLock { "\($0.closed[0].code) \($0.closed[0].reason)" }, "1006 connection lost")
        XCTAssertTrue(waitFor { server.openWebSockets == 0 })
        // Sending to it now is dropped, quietly.
        h.record.withLock { $0.connections[0] }.send(text: "nobody")
    }

    func testServerStopCloses1001() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server), d = try open(server)
        assertEcho(c, "x")
        let stopped = Locked(false)
        spawnThread {
            server.stop()
            stopped.withLock { $0 = true }
        }
        for client in [c, d] {
            let close = client.readClose()
            XCTAssertEqual(close?.code, 1001)
            XCTAssertEqual(close?.reason, "server shutting down")
        }
        c.write(WSFrame.close(1001))  // one answers, the other does not
        XCTAssertTrue(h.wait { $0.closed.count == 2 })
        XCTAssertEqual(h.record.withLock { $0.closed.map(\.code) }, [1001, 1001])
        XCTAssertTrue(waitFor(seconds: 3) { stopped.withLock { $0 } })
        XCTAssertEqual(server.openWebSockets, 0)
    }

    // MARK: limits

    func testTheConnectionPastTheLimitGets503AndTheCountComesBack() throws {
        var limits = HTTP1Limits()
        limits.maxWebSockets = 4
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h, limits: limits)
        var open4 = try (0..<4).map { _ in try open(server) }
        XCTAssertEqual(server.openWebSockets, 4)
        let fifth = try RawWebSocket(port: server.port)
        let a = try XCTUnwrap({ fifth.write(RawWebSocket.request()); return fifth.readAnswer() }())
        XCTAssertEqual(a.status, 503)
        XCTAssertNotNil(a.header("Retry-After"))
        XCTAssertTrue(a.header("Content-Type")?.hasPrefix("text/plain") ?? false)
        XCTAssertTrue(fifth.waitForClose())
        XCTAssertEqual(h.record.withLock { $0.opened.count }, 4, "the handler never heard of the fifth")
        open4[0].write(WSFrame.close(1000))
        XCTAssertTrue(open4[0].waitForClose())
        open4.removeFirst()
        XCTAssertTrue(waitFor { server.openWebSockets == 3 })
        open4.append(try open(server))
        assertEcho(open4[3], "room again")
    }

    func testThe1025thConnectionGets503() throws {
        var rl = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)
        // 1,024 connections, both ends in this process: the soft limit is raised to the hard one.
        XCTAssertGreaterThanOrEqual(rl.rlim_max, 3000, "needs 3000 descriptors; RLIMIT_NOFILE's hard limit is \(rl.rlim_max)")
        if rl.rlim_cur < 3000 {
            rl.rlim_cur = min(rl.rlim_max, 4096)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)
        }
        let server = try webSocketServer(EchoWebSocketHandler())
        var clients: [RawWebSocket] = []
        for i in 0..<1024 {
            let c = try RawWebSocket(port: server.port)
            c.write(RawWebSocket.request())
            clients.append(c)
            if i % 64 == 63 { XCTAssertEqual(clients.suffix(64).compactMap { $0.readHead()?.status }, Array(repeating: 101, count: 64)) }
        }
        XCTAssertEqual(server.openWebSockets, 1024)
        let last = try RawWebSocket(port: server.port)
        last.write(RawWebSocket.request())
        XCTAssertEqual(last.readAnswer()?.status, 503)
        assertEcho(clients[1023], "the 1024th works")
    }

    func testAPingFloodFromAClientThatDoesNotReadHoldsNoServerUp() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let flooder = try open(server)
        let ping = WSFrame.client(9, [UInt8](repeating: 0x2A, count: 125))
        let wrote = Locked(0)
        let done = Locked(false)
        spawnThread {
            // Blocks once the server stops reading (then its send time-out ends it).
            for _ in 0..<100 {
                guard flooder.write(Array([[UInt8]](repeating: ping, count: 100).joined())) else { break }
                wrote.withLock { $0 += 100 }
            }
            done.withLock { $0 = true }
        }
        let other = try open(server)
        assertEcho(other, "served meanwhile")
        XCTAssertTrue(waitFor(seconds: 10) { done.withLock { $0 } })
        assertEcho(other, "and after")
        // Reading paused (or the connection dropped): 10,000 pongs would be 1.27 MB.
        let count = wrote.withLock { $0 }
        XCTAssertGreaterThan(count, 0)
        flooder.hangUp()
        XCTAssertTrue(h.wait { $0.closed.count == 1 })
    }

    func testAClientThatReadsNothingOfWhatTheRoomSendsIsDroppedPast4MiB() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h)
        let c = try open(server)
        var small: Int32 = 64 * 1024
        setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        c.write(WSFrame.text("big 400"))  // 24 MB, never read
        XCTAssertTrue(h.wait(seconds: 10) { !$0.closed.isEmpty })
        XCTAssertEqual(h.record.withLock { "\($0.closed[0].code) \($0.closed[0].reason)" }, "1006 client does not read")
        XCTAssertTrue(waitFor { server.openWebSockets == 0 })
        let other = try open(server)
        assertEcho(other, "still serving")
    }

    // MARK: wss

    func testWSSThroughTheHTTPSListener() throws {
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h, https: HTTPSListenerOptions(port: 0, credentials: try WirePort.credentials()))
        let c = try RawWebSocket(port: try XCTUnwrap(server.httpsPort), tls: true)
        let a = try XCTUnwrap(c.upgrade())
        XCTAssertEqual(a.status, 101)
        XCTAssertEqual(a.header("Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        assertEcho(c, "over TLS ✓")
        c.write(WSFrame.client(9, Array("p".utf8)))
        XCTAssertEqual(c.readFrame()?.opcode, 10)
        let ws = try XCTUnwrap(h.record.withLock { $0.connections.first })
        XCTAssertTrue(ws.isSecure)
        XCTAssertTrue(ws.remote.hasPrefix("127.0.0.1:"), ws.remote)
        XCTAssertNotEqual(ws.remote, "unknown")
        c.write(WSFrame.text("close me 1000 bye"))
        XCTAssertEqual(assertServerCloses(c, 1000), "bye")
    }
}

extension XCTestCase {
    /// Waits (up to `seconds`) until `done` holds.
    func waitFor(seconds: Double = 5, _ done: () -> Bool) -> Bool {
        let end = monotonicNanos() + UInt64(seconds * 1e9)
        while monotonicNanos() < end {
            if done() { return true }
            usleep(5_000)
        }
        return done()
    }
}
