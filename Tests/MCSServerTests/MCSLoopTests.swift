import Foundation
import MCSServer
import Platform
import Protobuf
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// What serving every connection from one loop thread must keep: many connections and no thread
/// each, a handshake that never ends holding up nobody, a client that stops reading closed
/// without stalling the others, sends from other threads while the loop reads, and a stop that
/// returns.
final class MCSLoopTests: XCTestCase {
    private var delegate: RecordingDelegate!
    private var server: MCSServer!

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func start(_ limits: MCSLimits = MCSLimits()) throws {
        delegate = RecordingDelegate()
        server = try TestServer.start(delegate, limits: limits)
    }

    private static func threads() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") } ?? ""
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).last ?? "") ?? 0
    }

    /// A heartbeat answered within a second.
    private func assertAnswers(_ c: MCSTestClient, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let t0 = monotonicNanos()
        c.write(HeartbeatPing())
        XCTAssertNoThrow(try c.read(HeartbeatAck.self), what, file: file, line: line)
        XCTAssertLessThan(monotonicNanos() - t0, 1_000_000_000, "\(what): the answer took over a second", file: file, line: line)
    }

    func testManyConnectionsShareOneThread() throws {
        try start()
        let before = Self.threads()
        var clients: [MCSTestClient] = []
        for i in 0..<150 { clients.append(try MCSTestClient.loggedIn(port: server.port, user: "\(i + 1)").0) }
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 150 })
        XCTAssertEqual(server.connectionCount, 150)
        XCTAssertLessThanOrEqual(Self.threads() - before, 1, "the loop's thread, none a connection")
        for (i, c) in clients.enumerated() where i % 10 == 0 { assertAnswers(c, "connection \(i)") }
        for c in clients { c.write(Close()) }
        XCTAssertTrue(delegate.wait { $0.closed.count == 150 })
        XCTAssertEqual(server.connectionCount, 0)
    }

    func testHandshakesThatNeverEndHoldUpNobodyAndTimeOut() throws {
        try start(MCSLimits(loginTimeout: .milliseconds(600)))
        // TCP and nothing more, and a ClientHello cut short.
        let silent = try (0..<5).map { _ in try MCSTestClient(port: server.port, tls: false) }
        let partial = try MCSTestClient(port: server.port, tls: false)
        partial.write([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03])
        let t0 = monotonicNanos()
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertLessThan(monotonicNanos() - t0, 500_000_000, "a login past the stalled handshakes")
        assertAnswers(c, "the logged-in client")
        for s in silent + [partial] { XCTAssertTrue(s.waitForEnd(), "a stalled handshake is closed") }
        XCTAssertTrue(delegate.wait { $0.closed.count == 6 })
        let reasons = delegate.log.withLock { $0.closed.map(\.1) }
        XCTAssertTrue(reasons.allSatisfy { $0.hasPrefix("no LoginRequest within") }, "\(reasons)")
        c.write(HeartbeatPing())
        XCTAssertNoThrow(try c.read(HeartbeatAck.self), "idle time-out, not the login's, for a logged-in client")
    }

    func testHandshakesPastTheAllowanceAreClosedAtOnce() throws {
        try start(MCSLimits(maxConnections: 1))
        // maxConnections and 64 more may be open at once, in their handshake or past it.
        let stalled = try (0..<65).map { _ in try MCSTestClient(port: server.port, tls: false) }
        XCTAssertTrue(delegate.wait { _ in self.server.connections.count == 65 })
        let late = try MCSTestClient(port: server.port, tls: false)
        XCTAssertTrue(late.waitForEnd())
        XCTAssertEqual(delegate.closeReason("m66"), "too many connections in their handshake")
        withExtendedLifetime(stalled) {}
    }

    /// Sends 64 KiB stanzas to `c` from this thread every `pauseMicros` until it closes (or
    /// `maxBytes` went); how many bytes were queued.
    private static func flood(_ c: MCSConnection, pauseMicros: UInt32, maxBytes: Int = 256 << 20) -> Int {
        let body = [UInt8](repeating: 0x61, count: 64 << 10)
        var queued = 0
        while queued < maxBytes {
            guard c.send(DataMessageStanza(from: "f", category: "c", persistentID: "p\(queued)", rawData: body)) > 0 else { break }
            queued += body.count
            if pauseMicros > 0 { usleep(pauseMicros) }
        }
        return queued
    }

    func testAClientThatStopsReadingTimesOutWithoutStallingOthers() throws {
        try start(MCSLimits(sendTimeout: .milliseconds(400), maxUnsentBytes: 1 << 30))
        let (reader, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        let (stuck, _) = try MCSTestClient.loggedIn(port: server.port, user: "2")
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 2 })
        let conn = try XCTUnwrap(server.connections.first { $0.user == "2" })
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            _ = Self.flood(conn, pauseMicros: 2000)
            done.signal()
        }
        // While the loop has bytes the stuck client will not take, the other is served.
        for i in 0..<5 {
            assertAnswers(reader, "heartbeat \(i)")
            usleep(100_000)
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the stuck client is closed")
        XCTAssertEqual(delegate.closeReason("m2", seconds: 10), "the client is gone or stopped reading")
        assertAnswers(reader, "after the close")
        withExtendedLifetime(stuck) {}
    }

    func testAClientThatStopsReadingIsClosedPastTheUnsentBound() throws {
        // A send time-out far away: past the bound the connection ends at once, even with a
        // write blocked half-way through a batch.
        try start(MCSLimits(sendTimeout: .seconds(300), maxUnsentBytes: 512 << 10))
        let (reader, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        let (stuck, _) = try MCSTestClient.loggedIn(port: server.port, user: "2")
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 2 })
        let conn = try XCTUnwrap(server.connections.first { $0.user == "2" })
        // Paced, so the loop takes batches as they come and one blocks half-written before the
        // bound is passed.
        let queued = Self.flood(conn, pauseMicros: 1000)
        XCTAssertLessThan(queued, 256 << 20, "sends stop being taken")
        XCTAssertTrue(delegate.closeReason("m2")?.hasPrefix("the client reads nothing") == true, "\(delegate.closeReason("m2") ?? "")")
        assertAnswers(reader, "the other client")
        withExtendedLifetime(stuck) {}
    }

    func testAServerNeverStartedStopsTwiceAndFreesItsPort() throws {
        let never = try MCSServer(host: "127.0.0.1", port: 0, tls: TestServer.credentials, delegate: RecordingDelegate())
        let port = never.port
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        never.stop()
        // The descriptor numbers the first stop gave back now all write into the pipe: a second
        // stop must signal none of them.
        let reused = (0..<3).map { _ in dup(fds[1]) }
        defer { for fd in fds + reused { close(fd) } }
        never.stop()
        var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&p, 1, 50), 0, "nothing was written into a reused descriptor")
        // The port is free again.
        let again = try MCSServer(host: "127.0.0.1", port: port, tls: TestServer.credentials, delegate: RecordingDelegate())
        again.stop()
    }

    func testSendsFromOtherThreadsWhileTheLoopReads() throws {
        try start()
        let (c, _) = try MCSTestClient.loggedIn(port: server.port)
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 1 })
        let conn = try XCTUnwrap(server.connections.first)
        let senders = 4, each = 150, pings = 50
        let numbers = Locked<[Int]>([])
        let group = DispatchGroup()
        for t in 0..<senders {
            group.enter()
            spawnThread {
                for i in 0..<each {
                    let n = conn.send(DataMessageStanza(from: "f", category: "c", appData: [AppData(key: "k", value: "v")], persistentID: "\(t):\(i)"))
                    numbers.withLock { $0.append(n) }
                }
                group.leave()
            }
        }
        // The client writes pings while the senders run, and reads everything.
        var data: [String: [Int]] = [:]
        var acks = 0
        var sentPings = 0
        while data.values.map(\.count).reduce(0, +) < senders * each || acks < pings {
            if sentPings < pings {
                c.write(HeartbeatPing())
                sentPings += 1
            }
            guard let (tag, payload) = c.readPacket() else { return XCTFail("the stream ended") }
            switch tag {
            case .heartbeatAck: acks += 1
            case .dataMessageStanza:
                let d = try DataMessageStanza(decoding: payload)
                let parts = (d.persistentID ?? "").split(separator: ":").compactMap { Int($0) }
                data[String(parts[0]), default: []].append(parts[1])
            default: XCTFail("unexpected \(tag)")
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        for t in 0..<senders { XCTAssertEqual(data["\(t)"], Array(0..<each), "sender \(t)'s stanzas, each once, in order") }
        let n = numbers.withLock { $0 }
        XCTAssertEqual(Set(n).count, senders * each, "a packet number each")
        XCTAssertFalse(n.contains(0))
        XCTAssertEqual(conn.serverPacketsSent, 1 + senders * each + pings)
        XCTAssertEqual(conn.clientPacketsReceived, 1 + pings)
    }

    func testStopReturnsWithAClientThatDoesNotRead() throws {
        try start()
        let (stuck, _) = try MCSTestClient.loggedIn(port: server.port, user: "1")
        let (other, _) = try MCSTestClient.loggedIn(port: server.port, user: "2")
        let quiet = try MCSTestClient(port: server.port, tls: false)  // in its handshake
        XCTAssertTrue(delegate.wait { $0.loggedIn.count == 2 })
        let conn = try XCTUnwrap(server.connections.first { $0.user == "1" })
        _ = Self.flood(conn, pauseMicros: 0, maxBytes: 12 << 20)  // more than the socket takes
        let t0 = monotonicNanos()
        server.stop()
        XCTAssertLessThan(monotonicNanos() - t0, 4_000_000_000, "stop returns")
        XCTAssertEqual(delegate.log.withLock { $0.closed.count }, 3, "every connection ended before stop returned")
        _ = try other.read(Close.self)
        XCTAssertTrue(other.waitForEnd())
        XCTAssertTrue(quiet.waitForEnd())
        server = nil
        withExtendedLifetime(stuck) {}
    }
}
