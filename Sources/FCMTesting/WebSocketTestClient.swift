import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A raw RFC 6455 client for tests: the upgrade, masked frames out (any bytes, to test what the
/// server refuses), frames in, one at a time. Blocking, on one loopback socket.
public final class WebSocketTestClient {
    public let fd: Int32
    /// The upgrade's answer head (status line and fields).
    public private(set) var head = ""
    public private(set) var status = 0
    private var buffer: [UInt8] = []

    /// A frame as read: its opcode, FIN bit and payload.
    public struct Frame: Equatable {
        public var fin: Bool
        public var opcode: UInt8
        public var payload: [UInt8]
        public var text: String { String(decoding: payload, as: UTF8.self) }
        /// A close frame's code (1005 when it carries none).
        public var closeCode: Int { payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : 1005 }
        public var closeReason: String { payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : "" }
    }

    /// Connects and sends the upgrade for `path`; `protocols`: `Sec-WebSocket-Protocol`.
    public init(port: Int, path: String = "/autopush", protocols: String? = "push-notification",
                headers: [(String, String)] = [], host: String? = nil) throws {
        fd = try connectLoopback(port: port)
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let protocols { request += "Sec-WebSocket-Protocol: \(protocols)\r\n" }
        for (n, v) in headers { request += "\(n): \(v)\r\n" }
        request += "\r\n"
        sendRaw(Array(request.utf8))
        while true {
            if let end = findHeadEnd() {
                head = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                break
            }
            guard try fill() else { throw TestError("the connection closed before the upgrade's answer: \(String(decoding: buffer, as: UTF8.self))") }
        }
        let parts = head.split(separator: " ", maxSplits: 2)
        status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
    }

    deinit { close(fd) }

    /// A field of the upgrade's answer.
    public func header(_ name: String) -> String? {
        for line in head.split(separator: "\r\n").dropFirst() {
            let kv = line.split(separator: ":", maxSplits: 1)
            if kv.count == 2, kv[0].lowercased() == name.lowercased() { return kv[1].trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// Reads more; false at the end of input.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n > 0 {
            buffer += chunk[0..<n]
            return true
        }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw TestError("timed out waiting for the server") }
        return false
    }

    public func sendRaw(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// One frame's bytes: masked unless `masked` is false.
    public static func frame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv << 4) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            out.append(maskBit | UInt8(payload.count))
        } else if payload.count < 65536 {
            out.append(maskBit | 126)
            out += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(maskBit | 127)
            for i in (0..<8).reversed() { out.append(UInt8((UInt64(payload.count) >> (8 * UInt64(i))) & 0xFF)) }
        }
        guard masked else { return out + payload }
        let key: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        out += key
        for (i, b) in payload.enumerated() { out.append(b ^ key[i % 4]) }
        return out
    }

    public func send(text: String) { sendRaw(Self.frame(opcode: 1, Array(text.utf8))) }

    /// The next frame, or nil when the connection ended.
    public func next() throws -> Frame? {
        while true {
            if let f = takeFrame() { return f }
            guard try fill() else { return nil }
        }
    }

    /// The next text message (pongs skipped), or nil at a close frame or the end.
    public func nextText() throws -> String? {
        while let f = try next() {
            if f.opcode == 1 { return f.text }
            if f.opcode == 8 { return nil }
        }
        return nil
    }

    /// The next text message as a JSON object.
    public func nextJSON() throws -> [String: Any] {
        guard let text = try nextText() else { throw TestError("the connection closed instead of a message") }
        guard let o = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { throw TestError("not an object: \(text)") }
        return o
    }

    /// Frames until a close frame: its code and reason; nil when the connection ended without one.
    public func waitForClose() throws -> (code: Int, reason: String)? {
        while let f = try next() {
            if f.opcode == 8 { return (f.closeCode, f.closeReason) }
        }
        return nil
    }

    private func takeFrame() -> Frame? {
        guard buffer.count >= 2 else { return nil }
        var len = Int(buffer[1] & 0x7F)
        var at = 2
        if len == 126 {
            guard buffer.count >= 4 else { return nil }
            len = Int(buffer[2]) << 8 | Int(buffer[3])
            at = 4
        } else if len == 127 {
            guard buffer.count >= 10 else { return nil }
            len = 0
            for i in 2..<10 { len = len << 8 | Int(buffer[i]) }
            at = 10
        }
        guard buffer.count >= at + len else { return nil }
        let f = Frame(fin: buffer[0] & 0x80 != 0, opcode: buffer[0] & 0x0F, payload: Array(buffer[at..<(at + len)]))
        buffer.removeFirst(at + len)
        return f
    }
}
