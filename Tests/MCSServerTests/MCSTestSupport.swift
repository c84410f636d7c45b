import Foundation
import MCSServer
import Platform
import Protobuf
import TLS
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A delegate that records every call, accepts logins unless told otherwise, and says a fixed
/// time.
final class RecordingDelegate: MCSDelegate {
    static let now: Int64 = 1_700_000_000_123
    struct Log {
        var logins: [LoginRequest] = []
        var loggedIn: [String] = []
        var acks: [(String, Int)] = []
        var selective: [(String, [String])] = []
        var heartbeats: [String] = []
        var closed: [(String, String)] = []
    }
    let log = Locked(Log())
    let verdict: @Sendable (LoginRequest) -> MCSLoginVerdict
    let onLoggedIn: @Sendable (MCSConnection) -> Void

    init(verdict: @escaping @Sendable (LoginRequest) -> MCSLoginVerdict = { _ in .accept },
         onLoggedIn: @escaping @Sendable (MCSConnection) -> Void = { _ in }) {
        self.verdict = verdict
        self.onLoggedIn = onLoggedIn
    }

    func login(_ request: LoginRequest, on connection: MCSConnection) -> MCSLoginVerdict {
        log.withLock { $0.logins.append(request) }
        return verdict(request)
    }
    func loggedIn(_ connection: MCSConnection) {
        log.withLock { $0.loggedIn.append(connection.id) }
        onLoggedIn(connection)
    }
    func acknowledged(throughServerPacket n: Int, carriedBy tag: MCSTag, ext: Int32?, on connection: MCSConnection) {
        log.withLock { $0.acks.append((connection.id, n)) }
    }
    func selectiveAck(ids: [String], on connection: MCSConnection) {
        log.withLock { $0.selective.append((connection.id, ids)) }
    }
    func heartbeat(on connection: MCSConnection) {
        log.withLock { $0.heartbeats.append(connection.id) }
    }
    func closed(_ connection: MCSConnection, reason: String) {
        log.withLock { $0.closed.append((connection.id, reason)) }
    }
    func nowMillis() -> Int64 { Self.now }

    /// Waits (up to `seconds`) until `condition` holds of the log.
    @discardableResult
    func wait(seconds: Double = 5, until condition: (Log) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if log.withLock({ condition($0) }) { return true }
            usleep(5_000)
        }
        return log.withLock { condition($0) }
    }

    func closeReason(_ id: String, seconds: Double = 5) -> String? {
        wait(seconds: seconds) { $0.closed.contains { $0.0 == id } }
        return log.withLock { $0.closed.first { $0.0 == id }?.1 }
    }
}

/// An MCS client over a real socket: TLS (or, for hostile tests, plain TCP), raw writes, and
/// every byte the server wrote kept in order.
final class MCSTestClient {
    let fd: Int32
    let tls: TLSSession?
    /// Every byte received so far.
    private(set) var received: [UInt8] = []
    private var frames = MCSFrameReader(maxPacketBytes: 1 << 20)
    private(set) var closed = false

    init(port: Int, tls useTLS: Bool = true) throws {
        fd = try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: 5)
        tls = useTLS ? try TLSSession(clientOn: fd, host: "localhost", trust: .anyone) : nil
    }

    deinit { Glibc.close(fd) }

    func write(_ bytes: [UInt8]) {
        if let tls {
            _ = tls.write(bytes)
        } else {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    func write(_ m: some MCSPacketMessage, version: Bool = false) {
        write((version ? [mcsVersion] : []) + mcsPacket(m))
    }

    /// Sends TLS's closing alert: the server reads the end of the stream.
    func finishWriting() {
        if let tls { tls.bye() } else { shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Reads once; false at the end of the stream (or on a time-out: `closed` tells which).
    @discardableResult
    private func readSome() -> Bool {
        var buf = [UInt8](repeating: 0, count: 65536)
        let n = buf.withUnsafeMutableBytes { b -> Int in
            if let tls { return tls.read(b.baseAddress!, b.count) }
            return recv(fd, b.baseAddress, b.count, 0)
        }
        if n > 0 {
            received += buf[0..<n]
            frames.feed(buf[0..<n])
            return true
        }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return false }
        closed = true
        return false
    }

    /// The next packet the server wrote, or nil when the stream ended (or 5 s passed).
    func readPacket() -> (MCSTag, [UInt8])? {
        while true {
            switch frames.next() {
            case .packet(let tag, let payload)?: return (tag, payload)
            case .failure(let why)?: XCTFail("the server wrote a bad frame: \(why)"); return nil
            case nil: if !readSome() { return nil }
            }
        }
    }

    func read<M: MCSPacketMessage>(_ type: M.Type, file: StaticString = #filePath, line: UInt = #line) throws -> M {
        guard let (tag, payload) = readPacket() else {
            XCTFail("expected \(M.self), the stream ended", file: file, line: line)
            throw ProtoError.truncated
        }
        XCTAssertEqual(tag, M.tag, file: file, line: line)
        return try M(decoding: payload)
    }

    /// Reads until the server ends the stream; true when it did within 5 s.
    func waitForEnd() -> Bool {
        let deadline = Date().addingTimeInterval(5)
        while !closed && Date() < deadline { readSome() }
        return closed
    }

    static func loginRequest(user: String = "5012345678901234567", token: String = "8765432109876543210",
                             persistentIDs: [String] = []) -> LoginRequest {
        LoginRequest(id: "chrome-120.0", domain: "mcs.android.com", user: user, resource: user, authToken: token,
                     deviceID: "android-45a1b2c3d4e5f607", lastRMQID: 1,
                     settings: [Setting(name: "new_vc", value: "1")], receivedPersistentIDs: persistentIDs,
                     adaptiveHeartbeat: false, useRMQ2: true, authService: .androidID, networkType: 1)
    }

    /// Connects, logs in and reads the LoginResponse.
    static func loggedIn(port: Int, user: String = "5012345678901234567") throws -> (MCSTestClient, LoginResponse) {
        let c = try MCSTestClient(port: port)
        c.write(loginRequest(user: user), version: true)
        let r = try c.read(LoginResponse.self)
        return (c, r)
    }
}

/// A server on 127.0.0.1:0 with a self-signed certificate.
enum TestServer {
    static let credentials: TLSCredentials = {
        try! TLSCredentials.selfSigned(names: ["localhost", "127.0.0.1"], directory: NSTemporaryDirectory())
    }()

    static func start(_ delegate: RecordingDelegate, limits: MCSLimits = MCSLimits()) throws -> MCSServer {
        let s = try MCSServer(host: "127.0.0.1", port: 0, tls: credentials, limits: limits, delegate: delegate)
        s.start()
        return s
    }
}
