import Platform
public import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP answer as read off the wire, for byte-exact assertions and for the command line.
public struct WireResponse: Sendable {
    public var status: Int
    /// Header fields with lower-cased names (a repeated field keeps its last value).
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why an `HTTPClient` request failed.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The TLS handshake failed (an untrusted certificate, another host name, no TLS at all).
    public let handshake: Bool
    public init(_ description: String, handshake: Bool = false) {
        self.description = description
        self.handshake = handshake
    }
}

/// The project's one HTTP/1.1 client: blocking, over one connection (plain TCP, or TLS through
/// the TLS module) that is kept alive between requests and opened again after the server closes
/// it. The command line's subcommands and the test suites both use it, so the bytes it sends
/// and its reading of answers (Content-Length, chunked, read to close, HEAD, 204/304) are one
/// implementation.
public final class HTTPClient {
    /// How an `https://` server's certificate is checked; nil: plain TCP.
    public enum Security {
        case plain
        case tls(TLSTrust)
    }

    public let host: String
    public let port: Int
    public let security: Security
    /// Seconds a read may wait for the server.
    public let receiveTimeout: Int
    private var fd: Int32 = -1
    private var tls: TLSSession?
    private var buffer: [UInt8] = []

    /// A client for `host:port`; it connects on first use.
    public init(host: String = "127.0.0.1", port: Int, security: Security = .plain, receiveTimeout: Int = 90) {
        self.host = host
        self.port = port
        self.security = security
        self.receiveTimeout = receiveTimeout
    }

    deinit { disconnect() }

    /// Closes the connection (the next request opens a new one); over TLS, the closing alert
    /// goes out first.
    public func disconnect() {
        tls?.bye()
        tls = nil
        if fd >= 0 { close(fd) }
        fd = -1
        buffer = []
    }

    /// Whether a connection is open.
    public var isConnected: Bool { fd >= 0 }

    /// The `Host` field: the port too unless it is the scheme's default (RFC 9110 7.2).
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        let defaultPort: Int
        switch security {
        case .plain: defaultPort = 80
        case .tls: defaultPort = 443
        }
        return port == defaultPort ? name : "\(name):\(port)"
    }

    private func connectIfNeeded() throws(HTTPClientError) {
        guard fd < 0 else { return }
        let s: Int32
        do {
            s = try ConnectSocket.open(host: host, port: port, receiveTimeout: receiveTimeout)
        } catch {
            throw HTTPClientError(error.description)
        }
        var one: Int32 = 1
        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if case .tls(let trust) = security {
            do {
                tls = try TLSSession(clientOn: s, host: host, trust: trust)
            } catch {
                close(s)
                throw HTTPClientError(error.description, handshake: true)
            }
        }
        fd = s
    }

    /// Sends one request and reads its answer. A body, or a method that carries one, gets its
    /// Content-Length; `headers` go out as given, after `Host`.
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) throws(HTTPClientError)
        -> WireResponse
    {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PATCH" || method == "PUT" {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        return try raw(Array(head.utf8) + body, method: method)
    }

    /// Sends bytes as they are (a malformed request, a pipelined pair), then reads one answer
    /// (as to `method`: a HEAD answer has no body).
    public func raw(_ bytes: [UInt8], method: String = "POST") throws(HTTPClientError) -> WireResponse {
        try connectIfNeeded()
        try sendAll(bytes)
        return try readResponse(method: method)
    }

    private func sendAll(_ bytes: [UInt8]) throws(HTTPClientError) {
        if let tls {
            guard tls.write(bytes) else {
                disconnect()
                throw HTTPClientError("TLS write failed")
            }
            return
        }
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                let err = String(cString: strerror(errno))
                disconnect()
                throw HTTPClientError("send failed: \(err)")
            }
            off += n
        }
    }

    private func fill() throws(HTTPClientError) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { b in tls.map { $0.read(b.baseAddress!, b.count) } ?? recv(fd, b.baseAddress, b.count, 0) }
        if n <= 0 {
            let err = n == 0 ? "connection closed by the server" : "recv failed: \(String(cString: strerror(errno)))"
            disconnect()
            throw HTTPClientError(err)
        }
        buffer.append(contentsOf: chunk[0..<n])
    }

    private func readResponse(method: String) throws(HTTPClientError) -> WireResponse {
        var headerEnd: Int?
        while headerEnd == nil {
            if let r = find([13, 10, 13, 10]) { headerEnd = r } else { try fill() }
        }
        let headText = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = headText.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw HTTPClientError("bad status line: \(statusLine)") }
        var headers: [String: String] = [:]
        for l in lines {
            guard let c = l.firstIndex(of: ":") else { continue }
            headers[l[..<c].lowercased()] = Self.trimmed(l[l.index(after: c)...])
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

    private func readChunked() throws(HTTPClientError) -> [UInt8] {
        var out: [UInt8] = []
        while true {
            var lineEnd: Int?
            while lineEnd == nil {
                if let i = find([13, 10]) { lineEnd = i } else { try fill() }
            }
            let line = String(decoding: buffer[0..<lineEnd!], as: UTF8.self)
            buffer.removeFirst(lineEnd! + 2)
            let sizeText = line.split(separator: ";", omittingEmptySubsequences: false).first ?? ""
            guard let size = Int(Self.trimmed(sizeText), radix: 16), size >= 0 else { throw HTTPClientError("bad chunk size: \(line)") }
            while buffer.count < size + 2 { try fill() }
            out.append(contentsOf: buffer[0..<size])
            buffer.removeFirst(size + 2)
            if size == 0 { return out }
        }
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count >= needle.count else { return nil }
        return buffer.firstRange(of: needle)?.lowerBound
    }

    private static func trimmed(_ s: Substring) -> String {
        String(s.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
