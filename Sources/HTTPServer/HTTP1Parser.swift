/// The pure part of HTTP/1.1 (RFC 9112) for the plain port's own loop: a request's head parsed
/// from its bytes, a chunked body decoded as it arrives, and an answer's head written as bytes.
/// No I/O here; `HTTP1Connection` feeds it.

#if canImport(Glibc)
    import Glibc
#endif

/// How a request's body is framed.
enum HTTP1BodyFraming: Equatable {
    case none
    case length(Int)
    case chunked
}

/// Why a request cannot be served; each maps to the status the connection answers (and closes).
enum HTTP1Refusal: Error, Equatable {
    case badRequest(String)
    /// The head is over the limit (431).
    case headTooLarge
    /// A transfer coding other than chunked (501).
    case unsupportedCoding
    /// Not HTTP/1.0 or HTTP/1.1 (505).
    case unsupportedVersion
    /// The head did not arrive whole in time (408, `HTTP1Limits.headTimeoutMillis`).
    case headTimeout
    /// The body did not arrive whole in as much time again from the head's end (408).
    case bodyTimeout

    var status: Int {
        switch self {
        case .badRequest: return 400
        case .headTooLarge: return 431
        case .unsupportedCoding: return 501
        case .unsupportedVersion: return 505
        case .headTimeout, .bodyTimeout: return 408
        }
    }

    var text: String {
        switch self {
        case .badRequest(let why): return "bad request: \(why)\n"
        case .headTooLarge: return "request header fields too large\n"
        case .unsupportedCoding: return "only the chunked transfer coding is supported\n"
        case .unsupportedVersion: return "only HTTP/1.0 and HTTP/1.1 are supported\n"
        case .headTimeout: return "request timeout: the request head did not arrive in time\n"
        case .bodyTimeout: return "request timeout: the request body did not arrive in time\n"
        }
    }
}

/// A request's head: the request line and the header fields, as the handler will see them.
struct HTTP1Head {
    var method = ""
    /// The path, still percent-encoded, without the query.
    var path = ""
    var rawQuery: [(String, String?)] = []
    var headers: [(name: String, value: String)] = []
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    var minorVersion = 1
    var framing = HTTP1BodyFraming.none
    /// The connection stays open after the answer (HTTP/1.1 without `Connection: close`, or
    /// HTTP/1.0 with `Connection: keep-alive`).
    var keepAlive = true
    /// `Expect: 100-continue`: the client waits for an interim answer before sending the body.
    var expectsContinue = false
    var isHead: Bool { method == "HEAD" }
}

enum HTTP1Parser {
    /// Where the head ends in `bytes` (the index after its empty line), or nil while incomplete.
    /// Lines end with CRLF or a bare LF (RFC 9112 §2.2 lets a server accept both).
    static func headEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = Swift.max(start, 0)
        while let lf = nextLF(bytes, from: i) {
            // An empty line: LF LF, or LF CR LF.
            if lf + 1 < bytes.count && bytes[lf + 1] == 10 { return lf + 2 }
            if lf + 2 < bytes.count && bytes[lf + 1] == 13 && bytes[lf + 2] == 10 { return lf + 3 }
            i = lf + 1
        }
        return nil
    }

    /// The index of the next LF at or after `from` (memchr: a head is scanned many bytes at a
    /// time).
    @inline(__always) static func nextLF(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        guard from < bytes.count, let base = bytes.baseAddress,
              let p = memchr(base + from, 10, bytes.count - from) else { return nil }
        return base.distance(to: p.assumingMemoryBound(to: UInt8.self))
    }

    /// Parses a complete head (`bytes` up to `headEnd`, empty lines before the request line
    /// allowed as RFC 9112 §2.2 asks).
    static func parseHead(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTP1Refusal) -> HTTP1Head {
        // One pass over the lines; the fields that frame the request are told apart by their
        // bytes, so nothing is built for them beyond the strings the handler gets.
        var head = HTTP1Head()
        var start = 0
        var sawRequestLine = false
        var contentLength: Int?
        var codings: [String] = []
        var close = false, keepAlive = false
        head.headers.reserveCapacity(12)
        var i = 0
        while let lf = nextLF(bytes, from: i) {
            i = lf
            var end = i
            if end > start && bytes[end - 1] == 13 { end -= 1 }
            let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
            start = i + 1
            i += 1
            if line.isEmpty {
                if sawRequestLine { break }
                continue  // empty lines before the request line
            }
            if !sawRequestLine {
                try parseRequestLine(line, into: &head)
                sawRequestLine = true
                continue
            }
            guard line[0] != 32, line[0] != 9 else { throw .badRequest("folded header line") }
            guard let colon = line.firstIndex(of: 58), colon > 0 else { throw .badRequest("header line without a name") }
            for b in line[0..<colon] where !isTokenByte(b) { throw .badRequest("bad header name") }
            var vs = colon + 1, ve = line.count
            while vs < ve && (line[vs] == 32 || line[vs] == 9) { vs += 1 }
            while ve > vs && (line[ve - 1] == 32 || line[ve - 1] == 9) { ve -= 1 }
            let valueBytes = UnsafeBufferPointer(rebasing: line[vs..<ve])
            // No LF inside a line; a NUL or a bare CR is refused.
            if let v = valueBytes.baseAddress, memchr(v, 0, valueBytes.count) != nil || memchr(v, 13, valueBytes.count) != nil {
                throw .badRequest("bad header value")
            }
            let nameBytes = UnsafeBufferPointer(rebasing: line[0..<colon])
            let value = String(decoding: valueBytes, as: UTF8.self)
            switch colon {
            case 6 where same(nameBytes, "expect"):
                if same(valueBytes, "100-continue") { head.expectsContinue = head.minorVersion == 1 }
            case 10 where same(nameBytes, "connection"):
                if same(valueBytes, "close") {
                    close = true
                } else if same(valueBytes, "keep-alive") {
                    keepAlive = true
                } else {
                    let t = tokens(value)
                    close = close || t.contains("close")
                    keepAlive = keepAlive || t.contains("keep-alive")
                }
            case 14 where same(nameBytes, "content-length"):
                guard let n = decimal(valueBytes) else { throw .badRequest("bad Content-Length") }
                if let c = contentLength, c != n { throw .badRequest("conflicting Content-Length fields") }
                contentLength = n
            case 17 where same(nameBytes, "transfer-encoding"):
                codings += tokens(value)
            default:
                break
            }
            head.headers.append((name: String(decoding: nameBytes, as: UTF8.self), value: value))
        }
        guard sawRequestLine else { throw .badRequest("no request line") }
        if !codings.isEmpty {
            // Both framings at once is how requests are smuggled: refused (RFC 9112 §6.3).
            guard contentLength == nil else { throw .badRequest("both Content-Length and Transfer-Encoding") }
            guard codings == ["chunked"], head.minorVersion == 1 else { throw .unsupportedCoding }
            head.framing = .chunked
        } else if let n = contentLength, n > 0 {
            head.framing = .length(n)
        }
        head.keepAlive = head.minorVersion == 1 ? !close : keepAlive
        return head
    }

    /// Whether `bytes` are `lower` (lower-case ASCII) in any case.
    @inline(__always) static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ lower: StaticString) -> Bool {
        guard bytes.count == lower.utf8CodeUnitCount else { return false }
        let l = lower.utf8Start
        for i in 0..<bytes.count {
            let b = bytes[i]
            if (b >= 65 && b <= 90 ? b | 0x20 : b) != l[i] { return false }
        }
        return true
    }

    /// `method SP target SP HTTP/1.x`; the target in origin form (or absolute form, reduced to
    /// its path, or `*`).
    private static func parseRequestLine(_ line: UnsafeBufferPointer<UInt8>, into head: inout HTTP1Head) throws(HTTP1Refusal) {
        guard let sp1 = line.firstIndex(of: 32), let sp2 = line.lastIndex(of: 32), sp2 > sp1 + 1 else {
            throw .badRequest("malformed request line")
        }
        let method = line[0..<sp1], target = line[(sp1 + 1)..<sp2], version = line[(sp2 + 1)...]
        guard !method.isEmpty, method.allSatisfy(isTokenByte) else { throw .badRequest("bad method") }
        guard version.count == 8, version.starts(with: "HTTP/1.".utf8) else {
            if version.starts(with: "HTTP/".utf8) { throw .unsupportedVersion }
            throw .badRequest("malformed request line")
        }
        switch version[version.startIndex + 7] {
        case 48: head.minorVersion = 0
        case 49: head.minorVersion = 1
        default: throw .unsupportedVersion
        }
        for b in target where b <= 32 || b == 127 { throw .badRequest("bad request target") }
        head.method = String(decoding: UnsafeBufferPointer(rebasing: method), as: UTF8.self)
        var t = target[...]
        if t.first != 47 {  // not "/": absolute form ("http://host/path") or "*"
            if t.elementsEqual("*".utf8) {
                head.path = "*"
                return
            }
            guard let scheme = t.firstRange(of: "://".utf8) else { throw .badRequest("bad request target") }
            let rest = t[scheme.upperBound...]
            t = rest.firstIndex(of: 47).map { rest[$0...] } ?? rest[rest.endIndex...]
        }
        let q = t.firstIndex(of: 63)
        let pathPart = q.map { t[..<$0] } ?? t
        head.path = pathPart.isEmpty ? "/" : String(decoding: UnsafeBufferPointer(rebasing: pathPart), as: UTF8.self)
        if let q {
            for piece in t[(q + 1)...].split(separator: 38, omittingEmptySubsequences: true) {
                if let eq = piece.firstIndex(of: 61) {
                    head.rawQuery.append((String(decoding: UnsafeBufferPointer(rebasing: piece[..<eq]), as: UTF8.self),
                                          String(decoding: UnsafeBufferPointer(rebasing: piece[(eq + 1)...]), as: UTF8.self)))
                } else {
                    head.rawQuery.append((String(decoding: UnsafeBufferPointer(rebasing: piece), as: UTF8.self), nil))
                }
            }
        }
    }

    /// RFC 9110's `tchar`.
    @inline(__always) static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 48...57, 65...90, 97...122: return true
        case 33, 35, 36, 37, 38, 39, 42, 43, 45, 46, 94, 95, 96, 124, 126: return true
        default: return false
        }
    }

    /// A non-negative decimal without sign or spaces (at most 18 digits), else nil.
    static func decimal(_ digits: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var n = 0
        for b in digits {
            guard b >= 48 && b <= 57 else { return nil }
            n = n * 10 + Int(b - 48)
        }
        return n
    }

    /// A comma-separated list's members, trimmed and lower-cased.
    private static func tokens(_ value: String) -> [String] {
        value.split(separator: ",").map { part in
            var t = part[...]
            while let f = t.first, f == " " || f == "\t" { t = t.dropFirst() }
            while let l = t.last, l == " " || l == "\t" { t = t.dropLast() }
            return t.lowercased()
        }.filter { !$0.isEmpty }
    }
}

/// Decodes a chunked body (RFC 9112 §7.1) as its bytes arrive: chunk sizes (extensions
/// ignored), data, and the trailer section (dropped).
///
/// Every line ends in CRLF and every chunk's data is followed by CRLF, exactly: a bare LF, a
/// bare CR, or other bytes where the CRLF belongs are refused (400). Parsers that disagree on
/// where such a line ends are the "funky chunks" request-smuggling class, so none is guessed at.
struct ChunkedDecoder {
    enum State: Equatable {
        case size
        case data(Int)
        case dataEnd
        case trailer
        case done
    }
    private(set) var state = State.size
    /// Longest size or trailer line taken.
    static let maxLine = 4096

    /// Consumes what it can of `bytes`, handing each piece of data to `data`; returns how many
    /// bytes were consumed (the rest waits for more input, a line being incomplete).
    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, data: (UnsafeBufferPointer<UInt8>) -> Void) throws(HTTP1Refusal) -> Int {
        var i = 0
        while i < bytes.count && state != .done {
            switch state {
            case .dataEnd:
                // Exactly CRLF after the data (checked byte by byte, not searched for).
                guard bytes[i] == 13 else { throw .badRequest("chunk data not followed by CRLF") }
                guard i + 1 < bytes.count else { return i }
                guard bytes[i + 1] == 10 else { throw .badRequest("chunk data not followed by CRLF") }
                i += 2
                state = .size
            case .size, .trailer:
                guard let lf = bytes[i...].firstIndex(of: 10) else {
                    if bytes.count - i > Self.maxLine { throw .badRequest("chunk line too long") }
                    return i
                }
                guard lf > i, bytes[lf - 1] == 13 else { throw .badRequest("chunk line not ended by CRLF") }
                let line = UnsafeBufferPointer(rebasing: bytes[i..<(lf - 1)])
                // A CR inside the line is a line end to some parsers: refused.
                guard !line.contains(13) else { throw .badRequest("bare CR in a chunk line") }
                i = lf + 1
                if state == .trailer {
                    if line.isEmpty { state = .done }
                    continue
                }
                let sizeEnd = line.firstIndex(where: { $0 == 59 || $0 == 32 || $0 == 9 }) ?? line.count
                guard sizeEnd > 0, sizeEnd <= 15 else { throw .badRequest("bad chunk size") }
                var n = 0
                for b in line[0..<sizeEnd] {
                    guard let d = hexValue(b) else { throw .badRequest("bad chunk size") }
                    n = n * 16 + d
                }
                state = n == 0 ? .trailer : .data(n)
            case .data(let left):
                let n = Swift.min(left, bytes.count - i)
                data(UnsafeBufferPointer(rebasing: bytes[i..<(i + n)]))
                i += n
                state = left == n ? .dataEnd : .data(left - n)
            case .done:
                break
            }
        }
        return i
    }

    private func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 48...57: return Int(b - 48)
        case 65...70: return Int(b - 55)
        case 97...102: return Int(b - 87)
        default: return nil
        }
    }
}

/// An answer's head as bytes.
enum HTTP1Answer {
    /// `HTTP/1.1 status reason`, the date, `Connection: close` when closing (`Keep-Alive` for an
    /// HTTP/1.0 client that stays), the handler's fields, then the framing and the empty line (the
    /// order libmicrohttpd wrote when it served HTTP/1.1, which tests compare byte for byte). `length` nil: a chunked
    /// (streamed) body, or one ended by closing when `chunked` is false.
    static func appendHead(status: Int, headers: [(String, String)], length: Int?, chunked: Bool, close: Bool,
                           keepAlive10: Bool = false, date: [UInt8], into out: inout [UInt8]) {
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(status, into: &out)
        out.append(32)
        out.append(contentsOf: reason(status).utf8)
        out.append(contentsOf: "\r\nDate: ".utf8)
        out.append(contentsOf: date)
        out.append(contentsOf: "\r\n".utf8)
        if close {
            out.append(contentsOf: "Connection: close\r\n".utf8)
        } else if keepAlive10 {
            out.append(contentsOf: "Connection: Keep-Alive\r\n".utf8)
        }
        for (name, value) in headers {
            // The framing is ours to write; a handler's own would contradict it. (Names starting
            // otherwise, the usual case, are not compared further.)
            // A handler's `Connection: Upgrade` passes (a WebSocket handshake's 101 and 426).
            if let f = name.utf8.first, f | 0x20 == 99 || f | 0x20 == 116,
               equalIgnoringASCIICase(name, "Content-Length") || equalIgnoringASCIICase(name, "Transfer-Encoding")
                || (equalIgnoringASCIICase(name, "Connection") && !equalIgnoringASCIICase(value, "Upgrade")) { continue }
            appendClean(name, into: &out)
            out.append(contentsOf: ": ".utf8)
            appendClean(value, into: &out)
            out.append(contentsOf: "\r\n".utf8)
        }
        let bodyless = status == 204 || (100..<200).contains(status)
        if let length, !bodyless {
            out.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(length, into: &out)
            out.append(contentsOf: "\r\n".utf8)
        } else if chunked && !bodyless && status != 304 {
            out.append(contentsOf: "Transfer-Encoding: chunked\r\n".utf8)
        }
        out.append(contentsOf: "\r\n".utf8)
    }

    /// `text` without CR and LF (no header injection): copied whole when it has none.
    @inline(__always) static func appendClean(_ text: String, into out: inout [UInt8]) {
        if !text.utf8.contains(where: { $0 == 13 || $0 == 10 }) {
            out.append(contentsOf: text.utf8)
        } else {
            for b in text.utf8 where b != 13 && b != 10 { out.append(b) }
        }
    }

    static func appendDecimal(_ n: Int, into out: inout [UInt8]) {
        if n >= 10 { appendDecimal(n / 10, into: &out) }
        out.append(UInt8(48 + n % 10))
    }

    static func appendHex(_ n: Int, into out: inout [UInt8]) {
        if n >= 16 { appendHex(n / 16, into: &out) }
        let digit = UInt8(n % 16)
        out.append(digit < 10 ? 48 + digit : 87 + digit)
    }

    /// RFC 9110's reason phrases for the statuses the mock sends (others: a generic one).
    static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        case 507: return "Insufficient Storage"
        default:
            switch status / 100 {
            case 1: return "Informational"
            case 2: return "Success"
            case 3: return "Redirection"
            case 4: return "Client Error"
            default: return "Server Error"
            }
        }
    }
}
