@testable import HTTPServer
import Foundation
import Platform
import TLS
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Client frames built by hand, so a test can send anything, broken frames included.
enum WSFrame {
    static func client(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0,
                       mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 7) << 4 | (opcode & 0x0F)]
        let m: UInt8 = masked ? 0x80 : 0
        let n = payload.count
        if n < 126 {
            out.append(m | UInt8(n))
        } else if n <= 0xFFFF {
            out += [m | 126, UInt8(n >> 8), UInt8(n & 0xFF)]
        } else {
            out.append(m | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(n) >> UInt64(shift))) }
        }
        guard masked else { return out + payload }
        out += mask
        for (i, b) in payload.enumerated() { out.append(b ^ mask[i & 3]) }
        return out
    }

    static func text(_ s: String, fin: Bool = true) -> [UInt8] { client(1, Array(s.utf8), fin: fin) }

    static func close(_ code: UInt16?, _ reason: String = "") -> [UInt8] {
        client(8, code.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] + Array(reason.utf8) } ?? [])
    }
}

/// One raw WebSocket client connection: the handshake written by hand, frames read back as they
/// come (plain, or TLS through a pump as RawHTTP1 does). Every read is bounded.
///
/// `@unchecked Sendable`: a test hands one to another thread only to write from it (the flood
/// test) while it does not touch that client itself.
final class RawWebSocket: @unchecked Sendable {
    struct Frame: Equatable {
        var fin: Bool
        var opcode: UInt8
        var payload: [UInt8]
        var text: String { String(decoding: payload, as: UTF8.self) }
        /// A close frame's code (nil: none).
        var closeCode: UInt16? { payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil }
        var closeReason: String { payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : "" }
    }

    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    private(set) var ended = false
    let seconds: Int

    init(port: Int, seconds: Int = 5, tls: Bool = false) throws {
        self.seconds = seconds
        let tcp = try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: seconds)
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        guard tls else {
            fd = tcp
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            return
        }
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
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let local = pair[1]
        spawnThread { RawHTTP1.pump(session, tcp, local) }
    }

    deinit { hangUp() }

    func hangUp() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// RFC 6455 §1.3's example key.
    static let sampleKey = "dGhlIHNhbXBsZSBub25jZQ=="

    static func request(path: String = "/ws", key: String = sampleKey, version: String = "13", extra: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\n"
            + "Sec-WebSocket-Version: \(version)\r\n\(extra)\r\n"
    }

    /// Writes all of `bytes`; false when the server closed.
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

    /// The handshake: its answer's head (status and fields); nil when none came.
    func upgrade(path: String = "/ws", extra: String = "", then frames: [UInt8] = []) -> RawHTTP1.Answer? {
        write(Array(Self.request(path: path, extra: extra).utf8) + frames)
        return readHead()
    }

    private func fill(until deadline: UInt64) -> Bool {
        guard monotonicNanos() < deadline else { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { buffer += chunk[0..<n] }
        ended = ended || n == 0 || (n < 0 && errno == ECONNRESET)
        return n > 0
    }

    private func deadline() -> UInt64 { monotonicNanos() + UInt64(seconds) * 1_000_000_000 }

    private func take(_ count: Int, by end: UInt64) -> [UInt8]? {
        while buffer.count < count { guard fill(until: end) else { return nil } }
        defer { buffer.removeFirst(count) }
        return Array(buffer[0..<count])
    }

    /// An answer's head (the bytes after it stay buffered for `readFrame`).
    func readHead() -> RawHTTP1.Answer? {
        let end = deadline()
        while true {
            if buffer.count >= 4, let i = (0...(buffer.count - 4)).first(where: { buffer[$0..<$0 + 4].elementsEqual([13, 10, 13, 10]) }) {
                let head = String(decoding: buffer[0..<i], as: UTF8.self)
                buffer.removeFirst(i + 4)
                let lines = head.components(separatedBy: "\r\n")
                let parts = lines[0].split(separator: " ", maxSplits: 2)
                guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
                let fields = lines.dropFirst().compactMap { l -> (String, String)? in
                    guard let colon = l.firstIndex(of: ":") else { return nil }
                    return (String(l[..<colon]), l[l.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                return RawHTTP1.Answer(head: head, status: status, headers: fields)
            }
            guard fill(until: end) else { return nil }
        }
    }

    /// A whole answer with a Content-Length body.
    func readAnswer() -> RawHTTP1.Answer? {
        guard var a = readHead() else { return nil }
        let length = a.header("content-length").flatMap { Int($0) } ?? 0
        guard let body = take(length, by: deadline()) else { return nil }
        a.body = body
        return a
    }

    /// The next frame from the server; nil when the connection ended or time ran out first.
    func readFrame() -> Frame? {
        let end = deadline()
        guard let h = take(2, by: end) else { return nil }
        XCTAssertEqual(h[1] & 0x80, 0, "server frames are never masked")
        var length = Int(h[1] & 0x7F)
        if length == 126 {
            guard let b = take(2, by: end) else { return nil }
            length = Int(b[0]) << 8 | Int(b[1])
        } else if length == 127 {
            guard let b = take(8, by: end) else { return nil }
            length = b.reduce(0) { $0 << 8 | Int($1) }
        }
        guard let payload = take(length, by: end) else { return nil }
        return Frame(fin: h[0] & 0x80 != 0, opcode: h[0] & 0x0F, payload: payload)
    }

    /// The next frame, which must be a close frame; then the server must close the connection.
    /// Returns its code and reason (nil when no close frame came).
    func readClose(file: StaticString = #filePath, line: UInt = #line) -> (code: UInt16?, reason: String)? {
        guard let f = readFrame() else {
            XCTFail("no close frame (connection ended or timed out)", file: file, line: line)
            return nil
        }
        XCTAssertEqual(f.opcode, 8, "expected a close frame, got \(f)", file: file, line: line)
        return (f.closeCode, f.closeReason)
    }

    /// Whether nothing arrives (and the connection stays open) for `millis`.
    func quietFor(millis: Int32) -> Bool {
        guard buffer.isEmpty else { return false }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, millis) == 0
    }

    /// Whether the server closes the connection (after anything still buffered) within the
    /// time-out.
    func waitForClose() -> Bool {
        let end = deadline()
        while fill(until: end) {}
        buffer = []
        return ended
    }
}

/// A test handler: echoes every text message; `close me CODE REASON` closes with that code and
/// reason; `send N` sends N numbered messages from another thread, `big N` N of 60,000 bytes. It records what it was told.
final class EchoWebSocketHandler: WebSocketHandler {
    struct Record {
        var opened: [UInt64] = []
        var connections: [WebSocketConnection] = []
        var received: [String] = []
        var frames = 0
        var closed: [(id: UInt64, code: UInt16, reason: String)] = []
    }

    let record = Locked(Record())

    func opened(_ ws: WebSocketConnection) {
        record.withLock {
            $0.opened.append(ws.id)
            $0.connections.append(ws)
        }
    }

    func received(_ text: String, on ws: WebSocketConnection) {
        record.withLock { $0.received.append(text) }
        if text.hasPrefix("close me ") {
            let parts = text.split(separator: " ", maxSplits: 3)
            ws.close(code: UInt16(parts[2]) ?? 1000, reason: parts.count > 3 ? String(parts[3]) : "")
        } else if text.hasPrefix("big "), let n = Int(text.dropFirst(4)) {
            let big = String(repeating: "b", count: 60_000)
            spawnThread {
                for _ in 0..<n { ws.send(text: big) }
            }
        } else if text.hasPrefix("send "), let n = Int(text.dropFirst(5)) {
            spawnThread {
                for i in 0..<n { ws.send(text: "message \(i)") }
            }
        } else {
            ws.send(text: text)
        }
    }

    func sawFrame(on ws: WebSocketConnection) { record.withLock { $0.frames += 1 } }

    func closed(_ ws: WebSocketConnection, code: UInt16, reason: String) {
        record.withLock { $0.closed.append((ws.id, code, reason)) }
    }

    /// Waits (up to `seconds`) until `done` holds for the record.
    func wait(seconds: Double = 5, until done: (Record) -> Bool) -> Bool {
        let end = monotonicNanos() + UInt64(seconds * 1e9)
        while monotonicNanos() < end {
            if record.withLock({ done($0) }) { return true }
            usleep(5_000)
        }
        return record.withLock { done($0) }
    }
}

extension XCTestCase {
    /// A server on port 0 whose `/ws` accepts WebSocket upgrades for `handler` (offering
    /// `subprotocol` back when the client offers it) and refuses bad ones as
    /// `WebSocketUpgrade.refusal` says; anything else is 404. Stopped when the test ends.
    func webSocketServer(_ handler: any WebSocketHandler, options: WebSocketOptions = WebSocketOptions(),
                         limits: HTTP1Limits = HTTP1Limits(), subprotocol: String? = nil,
                         https: HTTPSListenerOptions? = nil) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, http1Loops: 1, https: https, http1Limits: limits) {
            r, responder in
            guard r.path == "/ws" else { return responder.send(HTTPResponse(status: 404, contentType: "text/plain", body: "no\n")) }
            if let refusal = WebSocketUpgrade.refusal(r) { return responder.send(refusal) }
            let chosen = subprotocol.flatMap { WebSocketUpgrade.offeredProtocols(r).contains($0) ? $0 : nil }
            responder.send(WebSocketUpgrade.accept(r, subprotocol: chosen, handler: handler, options: options))
        }
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }
}
