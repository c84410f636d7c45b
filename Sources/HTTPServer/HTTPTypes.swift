/// An HTTP request as the server hands it to the application: the whole body already read.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The path as sent, still percent-encoded, without the query string.
    public var path: String
    /// Query arguments as sent (still percent-encoded), in order; a bare `?flag` has a nil value.
    public var rawQuery: [(String, String?)]
    /// Header fields as sent, in order (names keep their case; `header(_:)` ignores it).
    public var headers: [(name: String, value: String)]
    /// The request body (empty when `bodyTooLarge`).
    public var body: [UInt8]
    /// Set when the body went over the server's limit: it was read and discarded.
    public var bodyTooLarge: Bool
    /// The request came over TLS (`--http-tls`, or the `--https-port` listener with either
    /// protocol): base URLs a handler answers use `https`.
    public var isSecure = false
    /// The request came in one read with others (the streams of one HTTP/2 connection): work a
    /// handler leaves pending may wait for the server's `afterBatch`, called once every request
    /// of that read has been handed over.
    public var inBatch = false
    /// The request came over HTTP/2 (h2 or h2c); false for HTTP/1.x. APNs serves HTTP/2 only.
    public var isHTTP2 = false
    /// The certificate (DER) the client presented in the TLS handshake of an HTTP/2 connection on
    /// the HTTPS port, which asks for one without requiring it (APNs certificate authentication);
    /// nil without one, and on every other connection.
    public var clientCertificate: [UInt8]?
    /// The request came over HTTP/1.0 (which cannot upgrade to a WebSocket).
    var isHTTP10 = false

    /// A request built by hand (tests, in-process calls).
    public init(method: String, path: String, rawQuery: [(String, String?)] = [], headers: [(name: String, value: String)] = [],
                body: [UInt8] = [], bodyTooLarge: Bool = false) {
        self.method = method
        self.path = path
        self.rawQuery = rawQuery
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
    }

    /// The value of header `name` (any case); repeated fields are joined with ", ".
    ///
    /// A linear scan: requests carry a handful of fields, and this spares building a dictionary
    /// of lower-cased copies for every request.
    public func header(_ name: String) -> String? {
        var found: String?
        for h in headers where equalIgnoringASCIICase(h.name, name) {
            found = found.map { $0 + ", " + h.value } ?? h.value
        }
        return found
    }
}

/// An HTTP response: status, headers and a body sent in one piece.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this response (fault injection, fatal errors).
    public var closeConnection = false
    /// Send nothing and drop the connection (fault injection: a peer that vanished).
    public var abort = false
    /// A body sent as it is written (server-sent events) instead of `body`.
    public var stream: HTTPStream?
    /// Names (lower case) of headers whose values are made for this answer alone, as ids are:
    /// HTTP/2 sends them as literals never indexed, so they neither cost HPACK's table upkeep
    /// (an insertion and the evictions it causes, every answer) nor push out values that repeat.
    public var neverIndexed: [String] = []
    /// A WebSocket handshake's 101 (`WebSocketUpgrade.accept`): the connection is handed to this
    /// handler once the answer is written.
    var webSocket: WebSocketAccept?

    /// A "response" that drops the connection without answering.
    public static var dropConnection: HTTPResponse {
        var r = HTTPResponse(status: 500)
        r.abort = true
        return r
    }

    /// A response with the given parts.
    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a text body and its content type.
    public init(status: Int, contentType: String, body: String, headers: [(String, String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: Array(body.utf8))
    }
}

/// The application behind the server. It runs on an event-loop thread and answers through the
/// responder, at once or later from any thread; it should not block for long (see `HTTPServer`).
public typealias HTTPHandler = @Sendable (HTTPRequest, HTTPResponder) -> Void

/// ASCII case-insensitive equality (header names are ASCII).
func equalIgnoringASCIICase(_ a: String, _ b: String) -> Bool {
    // Lengths first (constant time on native strings): most fields a lookup passes differ there.
    guard a.utf8.count == b.utf8.count else { return false }
    @inline(__always) func lower(_ x: UInt8) -> UInt8 { (x >= 65 && x <= 90) ? x | 0x20 : x }
    // Over contiguous UTF-8 (native and small strings have it) rather than through iterators.
    let same = a.utf8.withContiguousStorageIfAvailable { x in
        b.utf8.withContiguousStorageIfAvailable { y -> Bool in
            for i in 0..<x.count where lower(x[i]) != lower(y[i]) { return false }
            return true
        }
    }
    if let same, let same { return same }
    var ia = a.utf8.makeIterator(), ib = b.utf8.makeIterator()
    while let x = ia.next(), let y = ib.next() {
        if lower(x) != lower(y) { return false }
    }
    return true
}
