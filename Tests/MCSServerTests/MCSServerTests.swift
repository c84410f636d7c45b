import Foundation
import MCSServer
import Platform
import Protobuf
import XCTest

/// The MCS listener over real sockets and TLS: the version byte, login, heartbeats, stream ids,
/// acknowledgements, closes in order, and every hostile input of real-clients.md §3.7.
final class MCSServerTests: XCTestCase {
    private var delegate: RecordingDelegate!
    private var server: MCSServer!

    override func setUpWithError() throws {
        delegate = RecordingDelegate()
        server = try TestServer.start(delegate)
    }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func restart(limits: MCSLimits = MCSLimits(), delegate d: RecordingDelegate = RecordingDelegate()) throws {
        server.stop()
        delegate = d
        server = try TestServer.start(d, limits: limits)
    }

    private func connection(_ id: String) -> MCSConnection? {
        server.connections.first { $0.id == id }
    }

    func testAcceptedLoginStartsWithVersionAndLoginResponse() throws {
        let c = try MCSTestClient(port: server.port)
        c.write(MCSTestClient.loginRequest(persistentIDs: ["0:1%abc", "0:2%abc"]), version: true)
        let r = try c.read(LoginResponse.self)
        XCTAssertEqual(Array(c.received.prefix(2)), [0x29, 0x03], "version 41, then LoginResponse's tag")
        XCTAssertEqual(r, LoginResponse(id: "chrome-120.0", lastStreamIDReceived: 1, serverTimestamp: RecordingDelegate.now))
        XCTAssertTrue(delegate.wait { $0.loggedIn == ["m1"] })
        let request = try XCTUnwrap(delegate.log.withLock { $0.logins.first })
        XCTAssertEqual(request.receivedPersistentIDs, ["0:1%abc", "0:2%abc"])
        XCTAssertEqual(request.authService, .androidID)
        XCTAssertEqual(request.settings, [Setting(name: "new_vc", value: "1")])
        let conn = try XCTUnwrap(connection("m1"))
        XCTAssertEqual(conn.user, "5012345678901234567")
        XCTAssertEqual(conn.androidID, 5012345678901234567)
        XCTAssertTrue(conn.remote.hasPrefix("127.0.0.1:"), conn.remote)
        XCTAssertEqual(server.connectionCount, 1)
        XCTAssertEqual(conn.clientPacketsReceived, 1)
        XCTAssertEqual(conn.serverPacketsSent, 1)
    }

    func testRefusedLoginGetsErrorThenClose() throws {
        try restart(delegate: RecordingDelegate(verdict: { _ in .refuse(code: 401, message: "the android id and security token do not match") }))
        let c = try MCSTestClient(port: server.port)
        c.write(MCSTestClient.loginRequest(), version: true)
        let r = try c.read(LoginResponse.self)
        XCTAssertEqual(Array(c.received.prefix(2)), [0x29, 0x03])
        XCTAssertEqual(r.id, "chrome-120.0")
        XCTAssertEqual(r.error, ErrorInfo(code: 401, message: "the android id and security token do not match"))
        _ = try c.read(Close.self)
        XCTAssertTrue(c.waitForEnd())
        XCTAssertEqual(delegate.closeReason("m1"), "login refused: 401 the android id and security token do not match")
        XCTAssertTrue(delegate.log.withLock { $0.loggedIn.isEmpty })
    }

    func testHeartbeatsAreAnsweredAndCounted() throws {
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        c.write(HeartbeatPing(lastStreamIDReceived: 1))
        let ack = try c.read(HeartbeatAck.self)
        XCTAssertEqual(ack.lastStreamIDReceived, 2, "the LoginRequest and the ping")
        c.write(HeartbeatAck(lastStreamIDReceived: 2))
        XCTAssertTrue(delegate.wait { $0.heartbeats.count == 2 })
        XCTAssertEqual(delegate.log.withLock { $0.acks.map(\.1) }, [1, 2])
        XCTAssertEqual(connection("m1")?.lastHeartbeatAt, RecordingDelegate.now)
        XCTAssertEqual(connection("m1")?.clientPacketsReceived, 3)
    }

    func testStreamIDsSendsFromAnotherThreadAndAcks() throws {
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 1 })
        let conn = try XCTUnwrap(connection("m1"))
        let numbers = Locked<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            for i in 1...3 {
                let n = conn.send(DataMessageStanza(id: "m\(i)", from: "1234", to: "tok", category: "org.chromium.linux",
                                                    persistentID: "0:\(i)%x", lastStreamIDReceived: 99, immediateAck: true))
                numbers.withLock { $0.append(n) }
            }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(numbers.withLock { $0 }, [2, 3, 4], "the LoginResponse was 1")
        for i in 1...3 {
            let d = try c.read(DataMessageStanza.self)
            XCTAssertEqual(d.persistentID, "0:\(i)%x")
            XCTAssertEqual(d.lastStreamIDReceived, 1, "the client's count, not the caller's")
            XCTAssertEqual(d.immediateAck, true)
        }
        // Chromium's StreamAck, then firebase-messaging's SelectiveAck.
        c.write(IqStanza(type: .set, id: "", extension: Extension(id: Extension.streamAck, data: []), lastStreamIDReceived: 4))
        let selective = SelectiveAck(ids: ["0:1%x", "0:2%x"]).encode()
        c.write(IqStanza(type: .set, id: "sa", extension: Extension(id: Extension.selectiveAck, data: selective)))
        // An upstream data message: ignored, but its ack counts.
        c.write(DataMessageStanza(from: "x", category: "y", lastStreamIDReceived: 4))
        XCTAssertTrue(delegate.wait { $0.selective.count == 1 && $0.acks.count == 2 })
        XCTAssertEqual(delegate.log.withLock { $0.acks.map(\.1) }, [4, 4])
        XCTAssertEqual(delegate.log.withLock { $0.selective.first?.1 }, ["0:1%x", "0:2%x"])
        XCTAssertTrue(delegate.wait { _ in conn.clientPacketsReceived == 4 })
        XCTAssertEqual(conn.send(iq: IqStanza(type: .set, id: "x")), 5)
        XCTAssertEqual(try c.read(IqStanza.self).lastStreamIDReceived, 4)
        XCTAssertEqual(conn.sendHeartbeatPing(), 6)
        XCTAssertEqual(try c.read(HeartbeatPing.self).lastStreamIDReceived, 4)
    }

    /// A client's `last_stream_id_received` past the packets the server has made (a counter kept
    /// from an earlier connection) is no count of this connection's packets: it acknowledges
    /// nothing, not even the packets there are, nor a packet written later.
    func testACountPastThePacketsMadeAcknowledgesNothing() throws {
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 1 })
        let conn = try XCTUnwrap(connection("m1"))
        c.write(HeartbeatPing(lastStreamIDReceived: 100))
        _ = try c.read(HeartbeatAck.self)
        XCTAssertEqual(conn.send(DataMessageStanza(id: "m", from: "1234", to: "tok", category: "c", persistentID: "0:9%x")), 3)
        _ = try c.read(DataMessageStanza.self)
        c.write(IqStanza(type: .set, id: "", extension: Extension(id: Extension.streamAck, data: []), lastStreamIDReceived: 100))
        c.write(IqStanza(type: .set, id: "", extension: Extension(id: Extension.streamAck, data: []), lastStreamIDReceived: 3))
        XCTAssertTrue(delegate.wait { $0.acks.count == 1 })
        XCTAssertEqual(delegate.log.withLock { $0.acks.map(\.1) }, [3], "only the count that is one of this connection's")
    }

    /// A client silent after a data message that asked for an immediate acknowledgement gets a
    /// HeartbeatPing once (Chromium can drop its stream ack); its HeartbeatAck acknowledges. A
    /// client that answers, or a message that asked for no immediate ack, gets no ping.
    func testASilentClientAfterAnImmediateAckWriteIsPingedOnce() throws {
        try restart(limits: MCSLimits(ackNudge: .milliseconds(300)))
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 1 })
        let conn = try XCTUnwrap(connection("m1"))
        XCTAssertEqual(conn.send(DataMessageStanza(from: "1234", category: "app", persistentID: "0:1%x", immediateAck: true)), 2)
        XCTAssertEqual(try c.read(DataMessageStanza.self).persistentID, "0:1%x")
        let ping = try c.read(HeartbeatPing.self)
        XCTAssertEqual(ping.lastStreamIDReceived, 1)
        c.write(HeartbeatAck(lastStreamIDReceived: 3))
        XCTAssertTrue(delegate.wait { $0.acks.map(\.1) == [3] })
        // Answered at once: no ping.
        XCTAssertEqual(conn.send(DataMessageStanza(from: "1234", category: "app", persistentID: "0:2%x", immediateAck: true)), 4)
        XCTAssertEqual(try c.read(DataMessageStanza.self).persistentID, "0:2%x")
        c.write(IqStanza(type: .set, id: "", extension: Extension(id: Extension.streamAck, data: []), lastStreamIDReceived: 4))
        // No immediate ack asked: no ping either.
        XCTAssertEqual(conn.send(DataMessageStanza(from: "1234", category: "app", persistentID: "0:3%x")), 5)
        XCTAssertEqual(try c.read(DataMessageStanza.self).persistentID, "0:3%x")
        Thread.sleep(forTimeInterval: 0.8)
        XCTAssertEqual(conn.send(iq: IqStanza(type: .set, id: "x")), 6, "no ping was queued before it")
        XCTAssertEqual(try c.read(IqStanza.self).id, "x")
        // A packet that does not reach the write (sent before the client had it) leaves the ping due.
        XCTAssertEqual(conn.send(DataMessageStanza(from: "1234", category: "app", persistentID: "0:4%x", immediateAck: true)), 7)
        c.write(HeartbeatPing(lastStreamIDReceived: 6))
        XCTAssertEqual(try c.read(DataMessageStanza.self).persistentID, "0:4%x")
        XCTAssertEqual(try c.read(HeartbeatAck.self).lastStreamIDReceived, 4, "the client's own ping answered")
        XCTAssertEqual(try c.read(HeartbeatPing.self).lastStreamIDReceived, 4, "then the server's")
    }

    func testLoggedInCallbackMaySendAtOnce() throws {
        try restart(delegate: RecordingDelegate(onLoggedIn: { $0.send(DataMessageStanza(from: "1", category: "app", persistentID: "held")) }))
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertEqual(try c.read(DataMessageStanza.self).persistentID, "held")
    }

    func testOrderlyClosesSendClose() throws {
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 1 })
        try XCTUnwrap(connection("m1")).close(sendingClose: true, reason: "a newer login")
        _ = try c.read(Close.self)
        XCTAssertTrue(c.waitForEnd())
        XCTAssertEqual(delegate.closeReason("m1"), "a newer login")
        XCTAssertEqual(server.connectionCount, 0)
    }

    func testClientCloseAndStreamErrorEndTheConnection() throws {
        let (a, _) = try MCSTestClient.loggedIn(port: server.port)
        a.write(Close())
        XCTAssertTrue(a.waitForEnd())
        XCTAssertEqual(delegate.closeReason("m1"), "the client sent Close")
        let (b, _) = try MCSTestClient.loggedIn(port: server.port)
        b.write(StreamErrorStanza(type: "bad", text: "oops"))
        XCTAssertTrue(b.waitForEnd())
        XCTAssertEqual(delegate.closeReason("m2"), "the client's stream error: bad oops")
        XCTAssertEqual(a.received.count, b.received.count, "nothing after the LoginResponse")
    }

    func testIdleConnectionGetsCloseAfterTheIdleTime() throws {
        try restart(limits: MCSLimits(idleTimeout: .milliseconds(400)))
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        _ = try c.read(Close.self)
        XCTAssertTrue(c.waitForEnd())
        XCTAssertTrue(delegate.closeReason("m1")?.hasPrefix("idle") == true)
    }

    func testStopSendsCloseToEveryLoggedInConnection() throws {
        let (a, _) = try MCSTestClient.loggedIn(port: server.port)
        let (b, _) = try MCSTestClient.loggedIn(port: server.port)
        let quiet = try MCSTestClient(port: server.port)  // past its handshake, not logged in
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 2 })
        server.stop()
        for c in [a, b] {
            _ = try c.read(Close.self)
            XCTAssertTrue(c.waitForEnd())
        }
        XCTAssertTrue(quiet.waitForEnd())
        XCTAssertTrue(quiet.received.isEmpty)
        XCTAssertTrue(delegate.wait { $0.closed.count == 3 })
        XCTAssertEqual(Set(delegate.log.withLock { $0.closed.map(\.1) }), ["the server is shutting down"])
    }

    // MARK: Hostile input (§3.7): closed at once, nothing written, nobody else touched.

    /// Opens a logged-in bystander, runs `attack` on a new connection, checks that it ended
    /// with nothing more written than `expectedBytes` and that the bystander still works.
    private func assertHostile(_ name: String, tls: Bool = true, version: Bool = true, loginFirst: Bool = false, reason: String? = nil,
                               file: StaticString = #filePath, line: UInt = #line,
                               _ attack: (MCSTestClient) -> Void) throws {
        let (bystander, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        let before = delegate.log.withLock { $0.closed.count }
        let c = try MCSTestClient(port: server.port, tls: tls)
        var expected: [UInt8] = []
        if loginFirst {
            c.write(MCSTestClient.loginRequest(), version: true)
            _ = try c.read(LoginResponse.self)
            expected = c.received
        } else if tls && version {
            c.write([mcsVersion])
        }
        attack(c)
        XCTAssertTrue(c.waitForEnd(), "\(name): the connection stays open", file: file, line: line)
        XCTAssertEqual(c.received, expected, "\(name): written after the attack", file: file, line: line)
        XCTAssertTrue(delegate.wait { $0.closed.count == before + 1 }, name, file: file, line: line)
        if let reason {
            let got = delegate.log.withLock { $0.closed.last?.1 } ?? ""
            XCTAssertTrue(got.contains(reason), "\(name): reason \(got)", file: file, line: line)
        }
        bystander.write(HeartbeatPing())
        XCTAssertNoThrow(try bystander.read(HeartbeatAck.self), "\(name): the bystander", file: file, line: line)
        bystander.write(Close())
        XCTAssertTrue(bystander.waitForEnd())
        XCTAssertTrue(delegate.wait { $0.closed.count == before + 2 })
    }

    func testHostileInputClosesOnlyThatConnection() throws {
        let login = mcsPacket(MCSTestClient.loginRequest())
        try assertHostile("plain TCP", tls: false) { $0.write([mcsVersion] + login) }
        try assertHostile("first byte not 41", version: false, reason: "version 40") { $0.write([40] + login) }
        // (assertHostile wrote the version byte already for the rest.)
        try assertHostile("size varint over 5 bytes", reason: "over 5 bytes") { $0.write([2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]) }
        try assertHostile("70 KiB packet", reason: "over 65536") {
            $0.write(mcsPacket(tag: 2, payload: [UInt8](repeating: 0x0A, count: 70 << 10)))
        }
        try assertHostile("unparsable payload", reason: "does not parse") { $0.write(mcsPacket(tag: 2, payload: [0x0A, 0x7F, 1])) }
        var missing = ProtoWriter()
        for (n, v) in [(1, "id"), (2, "mcs.android.com"), (3, "1"), (4, "1")] { missing.string(n, v) }  // no auth_token
        try assertHostile("missing required field", reason: "auth_token") { $0.write(mcsPacket(tag: 2, payload: missing.bytes)) }
        try assertHostile("first packet not a LoginRequest", reason: "not a LoginRequest") { $0.write(mcsPacket(HeartbeatPing())) }
        try assertHostile("unknown tag", reason: "unknown tag 5") { $0.write([5, 0]) }
        try assertHostile("second LoginRequest", loginFirst: true, reason: "second LoginRequest") { $0.write(login) }
        try assertHostile("unknown tag after login", loginFirst: true, reason: "unknown tag 9") { $0.write([9, 0]) }
        try assertHostile("IQ without its id", loginFirst: true, reason: "IqStanza") {
            var w = ProtoWriter()
            w.int32(2, 1)
            $0.write(mcsPacket(tag: 7, payload: w.bytes))
        }
        try assertHostile("selective ack that does not parse", loginFirst: true, reason: "SelectiveAck") {
            $0.write(IqStanza(type: .set, id: "x", extension: Extension(id: 12, data: [0x0A, 0x09])))
        }
    }

    func testConnectionsPastTheLimitAreClosedAfterTheHandshake() throws {
        try restart(limits: MCSLimits(maxConnections: 2))
        let (a, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        let (b, _) = try MCSTestClient.loggedIn(port: server.port, user: "2")
        let third = try MCSTestClient(port: server.port)  // the handshake succeeds
        third.write([mcsVersion] + mcsPacket(MCSTestClient.loginRequest()))
        XCTAssertTrue(third.waitForEnd())
        XCTAssertTrue(third.received.isEmpty)
        XCTAssertEqual(delegate.closeReason("m3"), "the server holds 2 connections, the most it takes")
        XCTAssertEqual(server.connectionCount, 2)
        for c in [a, b] {
            c.write(HeartbeatPing())
            XCTAssertNoThrow(try c.read(HeartbeatAck.self))
        }
        a.write(Close())
        XCTAssertTrue(a.waitForEnd())
        XCTAssertTrue(delegate.wait { _ in self.server.connectionCount == 1 })
        XCTAssertNoThrow(try MCSTestClient.loggedIn(port: server.port, user: "4"), "a place is free again")
    }

    /// Random frames after a login, on many connections: the server never crashes and a bystander
    /// is served throughout.
    func testFuzzRandomFrames() throws {
        let (bystander, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        var rng = SystemRandomNumberGenerator()
        let valid: [[UInt8]] = [mcsPacket(HeartbeatPing(lastStreamIDReceived: 1)),
                                mcsPacket(IqStanza(type: .set, id: "i", extension: Extension(id: 12, data: SelectiveAck(ids: ["a"]).encode()))),
                                mcsPacket(DataMessageStanza(from: "f", category: "c", appData: [AppData(key: "k", value: "v")]))]
        for round in 0..<40 {
            let c = try MCSTestClient(port: server.port)
            var bytes: [UInt8] = [mcsVersion] + mcsPacket(MCSTestClient.loginRequest(user: "\(round + 10)"))
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                var frame = valid.randomElement(using: &rng)!
                if Bool.random(using: &rng) {
                    frame[Int.random(in: 0..<frame.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
                if round % 5 == 0 {
                    frame = (0..<Int.random(in: 1...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                }
                bytes += frame
            }
            c.write(bytes)
            c.write(Close())
            c.finishWriting()  // a frame that swallowed the Close still ends
            XCTAssertTrue(c.waitForEnd(), "round \(round)")
        }
        bystander.write(HeartbeatPing())
        XCTAssertNoThrow(try bystander.read(HeartbeatAck.self))
        XCTAssertTrue(delegate.wait { $0.closed.count == 40 })
    }
}
