import FCMEngine
import FCMCore
import Foundation
import Platform

/// An HTTP response as read off the wire, for byte-exact assertions.
public struct WireResponse: Sendable {
    public var status: Int
    /// Header fields with lower-cased names.
    public var headers: [String: String]
    public var body: [UInt8]

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as JSON (nil when it is not JSON).
    public var json: JSONValue? { try? JSONParser.parse(body) }

    /// The body as a JSON object (nil otherwise).
    public var object: JSONObject? { json?.objectValue }
}

/// A minimal blocking HTTP/1.1 client over one TCP connection, kept alive between requests.
///
/// Tests use it instead of URLSession so they see exactly the bytes the server sent and control
/// exactly the bytes they send (malformed bodies, huge bodies, keep-alive reuse).
public final class HTTPTestClient {
    public let host: String
    public let port: Int
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    /// A client for `host:port`; it connects on first use.
    public init(host: String = "127.0.0.1", port: Int) {
        self.host = host
        self.port = port
    }

    deinit { disconnect() }

    /// Closes the connection (the next request opens a new one).
    public func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer = []
    }

    /// Whether a connection is open.
    public var isConnected: Bool { fd >= 0 }

    private func connectIfNeeded() throws {
        guard fd < 0 else { return }
        let s = try connectLoopback(port: port)
        setReceiveTimeout(s, seconds: 90)
        var one: Int32 = 1
        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        fd = s
    }

    /// Sends one request and reads its response.
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws -> WireResponse {
        try connectIfNeeded()
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PATCH" || method == "PUT" {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        try sendAll(Array(head.utf8) + body)
        return try readResponse(method: method)
    }

    /// Sends raw bytes as they are (for malformed requests), then reads one response.
    public func raw(_ bytes: [UInt8]) throws -> WireResponse {
        try connectIfNeeded()
        try sendAll(bytes)
        return try readResponse(method: "POST")
    }

    /// POSTs a JSON text.
    public func postJSON(_ path: String, _ json: String, headers: [(String, String)] = []) throws -> WireResponse {
        try request("POST", path, headers: [("Content-Type", "application/json")] + headers, body: Array(json.utf8))
    }

    private func sendAll(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                let err = String(cString: strerror(errno))
                disconnect()
                throw TestError("send failed: \(err)")
            }
            off += n
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 {
            disconnect()
            throw TestError(n == 0 ? "connection closed by the server" : "recv failed: \(String(cString: strerror(errno)))")
        }
        buffer.append(contentsOf: chunk[0..<n])
    }

    private func readResponse(method: String) throws -> WireResponse {
        var headerEnd: Int?
        while headerEnd == nil {
            if let r = findCRLFCRLF() { headerEnd = r } else { try fill() }
        }
        let headText = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw TestError("bad status line: \(statusLine)") }
        var headers: [String: String] = [:]
        for l in lines {
            guard let c = l.firstIndex(of: ":") else { continue }
            headers[l[..<c].lowercased()] = l[l.index(after: c)...].trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if method == "HEAD" || status == 204 || status == 304 {
            body = []
        } else if let cl = headers["content-length"].flatMap({ Int($0) }) {
            while buffer.count < cl { try fill() }
            body = Array(buffer[0..<cl])
            buffer.removeFirst(cl)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            body = try readChunked()
        } else {
            while true {
                do { try fill() } catch { break }
            }
            body = buffer
            buffer = []
        }
        if headers["connection"]?.lowercased() == "close" { disconnect() }
        return WireResponse(status: status, headers: headers, body: body)
    }

    private func readChunked() throws -> [UInt8] {
        var out: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                if let i = findCRLF() { lineEnd = i } else { try fill() }
            }
            let sizeText = String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";").first.map(String.init) ?? ""
            buffer.removeFirst(lineEnd! + 2)
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { throw TestError("bad chunk size") }
            while buffer.count < size + 2 { try fill() }
            out.append(contentsOf: buffer[0..<size])
            buffer.removeFirst(size + 2)
            if size == 0 { return out }
        }
    }

    private func findCRLFCRLF() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func findCRLF() -> Int? {
        guard buffer.count >= 2 else { return nil }
        for i in 0...(buffer.count - 2) where buffer[i] == 13 && buffer[i + 1] == 10 { return i }
        return nil
    }
}

/// A TCP connection to 127.0.0.1:`port`.
public func connectLoopback(port: Int) throws -> Int32 {
    do {
        return try ConnectSocket.open(host: "127.0.0.1", port: port)
    } catch {
        throw TestError(error.description)
    }
}

/// A failure inside the test support code.
public struct TestError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
