import FCMEngine
public import Foundation

/// A reader of `GET /api/v1/events` over a raw socket: parses the chunked body into
/// server-sent events as they arrive.
public final class SSEClient {
    private let fd: Int32
    private var raw: [UInt8] = []
    private var text: [UInt8] = []
    private var headersDone = false

    /// Connects and sends the request; `headers` are extra request headers. `receiveBuffer`
    /// shrinks the socket's receive buffer (`SO_RCVBUF`): a reader that never reads then backs
    /// up into the server after a few KiB, not after the megabytes the kernel would take.
    public init(port: Int, path: String = "/api/v1/events", headers: [(String, String)] = [],
                receiveBuffer: Int32? = nil) throws {
        fd = try connectLoopback(port: port)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var req = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (k, v) in headers { req += "\(k): \(v)\r\n" }
        req += "\r\n"
        _ = req.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    /// Closes the connection (a reader that vanishes).
    public func disconnect() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// The status line's code, once the headers arrived (waits up to `timeout`).
    public func status(timeout: TimeInterval = 10) throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while !headersDone {
            guard try fill(until: deadline) else { throw TestError("no response headers") }
            _ = parseHeaders()
        }
        return statusCode
    }
    private var statusCode = 0

    /// The next event (name, data), or nil when `timeout` passes first.
    public func next(timeout: TimeInterval = 10) throws -> (event: String, data: String)? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if headersDone, let e = takeEvent() { return e }
            guard try fill(until: deadline) else { return nil }
            if !headersDone { _ = parseHeaders() }
            if headersDone { decodeChunks() }
        }
    }

    private func fill(until deadline: Date) throws -> Bool {
        let ms = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, ms) > 0 else { return false }
        var buf = [UInt8](repeating: 0, count: 65536)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw TestError("the event stream closed") }
        raw.append(contentsOf: buf[0..<n])
        return true
    }

    private func parseHeaders() -> Bool {
        guard let end = find([13, 10, 13, 10], in: raw) else { return false }
        let head = String(decoding: raw[0..<end], as: UTF8.self)
        statusCode = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        raw.removeFirst(end + 4)
        headersDone = true
        decodeChunks()
        return true
    }

    private func decodeChunks() {
        while let lineEnd = find([13, 10], in: raw) {
            let sizeText = String(decoding: raw[0..<lineEnd], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first.map(String.init) ?? "", radix: 16) else { return }
            guard raw.count >= lineEnd + 2 + size + 2 else { return }
            text.append(contentsOf: raw[(lineEnd + 2)..<(lineEnd + 2 + size)])
            raw.removeFirst(lineEnd + 2 + size + 2)
        }
    }

    private func takeEvent() -> (event: String, data: String)? {
        while let end = find([10, 10], in: text) {
            let block = String(decoding: text[0..<end], as: UTF8.self)
            text.removeFirst(end + 2)
            var name = "message", data = ""
            var isEvent = false
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)); isEvent = true }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)); isEvent = true }
            }
            if isEvent { return (name, data) }  // comment-only blocks (": …") are skipped
        }
        return nil
    }

    private func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        outer: for i in 0...(hay.count - needle.count) {
            for j in 0..<needle.count where hay[i + j] != needle[j] { continue outer }
            return i
        }
        return nil
    }
}
