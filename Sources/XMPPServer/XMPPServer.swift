import FCMCore
import HTTPServer
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The application behind an XMPP listener: it authenticates and takes the messages.
public protocol XMPPDelegate: AnyObject, Sendable {
    /// The account (for FCM, the sender id) these SASL PLAIN credentials log in as, or nil.
    func authenticate(authzid: String, authcid: String, password: String) -> String?
    /// A connection finished binding and may now exchange messages.
    func opened(_ connection: XMPPConnection)
    /// A `<message>` stanza arrived on an authenticated, bound connection.
    func received(_ message: XMLElement, on connection: XMPPConnection)
    /// The connection is gone.
    func closed(_ connection: XMPPConnection)
}

/// An XMPP client-to-server listener (RFC 6120 subset: SASL PLAIN, bind, session, ping) that
/// knows nothing of FCM.
///
/// Threading: one thread per connection, reading with blocking calls; any thread may write
/// (acks come from the store's writer thread). App servers hold a handful of long-lived
/// connections, so a thread each is simple and cheap.
public final class XMPPServer: Sendable {
    public let host: String
    public let port: Int
    public let domain: String
    let maxStanzaBytes: Int
    let delegate: any XMPPDelegate
    /// Set for direct TLS from the first byte (as Google's port 5235), no STARTTLS.
    public let tls: TLSCredentials?
    private let fd: Int32
    /// `accepting`: the accept thread runs and owns the listening socket's closing, so the
    /// descriptor number is never reused while that thread may still call `accept` on it.
    private let state = Mutex<(stopped: Bool, accepting: Bool, connections: [String: XMPPConnection])>((false, false, [:]))

    /// Binds `host:port` at once (a busy port is reported before anything starts).
    public init(host: String, port: Int, domain: String = "gcm.googleapis.com", maxStanzaBytes: Int = 1 << 20,
                tls: TLSCredentials? = nil, delegate: any XMPPDelegate) throws(HTTPServerError) {
        self.tls = tls
        let (fd, bound) = try ListenSocket.open(host: host, port: port)
        self.fd = fd
        self.host = host
        self.port = bound
        self.domain = domain
        self.maxStanzaBytes = maxStanzaBytes
        self.delegate = delegate
    }

    /// Starts accepting connections.
    public func start() {
        let started = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.accepting = true
            return true
        }
        guard started else { return }
        spawnThread { [self] in
            defer { close(fd) }
            var n = 0
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 {
                    if state.withLock({ $0.stopped }) { return }
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                n += 1
                let conn = XMPPConnection(fd: c, id: "c\(n)", server: self)
                let stopped = state.withLock { s -> Bool in
                    if !s.stopped { s.connections[conn.id] = conn }
                    return s.stopped
                }
                if stopped { conn.close(); continue }
                spawnThread { conn.run() }
            }
        }
    }

    /// Open connections.
    public var connections: [XMPPConnection] {
        state.withLock { Array($0.connections.values) }.sorted { $0.id < $1.id }
    }

    func forget(_ c: XMPPConnection) {
        _ = state.withLock { $0.connections.removeValue(forKey: c.id) }
    }

    /// Stops accepting and ends every stream with `</stream:stream>`.
    /// Calling it again does nothing.
    public func stop() {
        let (first, accepting, open) = state.withLock { s -> (Bool, Bool, [XMPPConnection]) in
            defer { s.stopped = true }
            return (!s.stopped, s.accepting, Array(s.connections.values))
        }
        guard first else { return }
        // Wakes the accept thread, which closes the socket as it leaves; without one, close here.
        shutdown(fd, Int32(SHUT_RDWR))
        if !accepting { close(fd) }
        for c in open { c.close() }
    }
}

/// One client connection. Writes are serialized by `lock`; the reader thread alone touches the
/// parser and the session state.
///
/// `@unchecked Sendable`: `fd` is immutable; `session` (account, resource, phase) is read by
/// other threads only under `lock`, which also serializes writes.
public final class XMPPConnection: @unchecked Sendable {
    public let id: String
    let fd: Int32
    unowned let server: XMPPServer
    private let lock = ConditionLock()
    private var session = Session()
    /// The TLS session when the listener speaks TLS; set by the reader thread before anything else
    /// can write.
    private var tls: TLSSession?

    /// Whether the connection is encrypted.
    public var isTLS: Bool { lock.withLock { tls != nil } }

    struct Session {
        var phase = Phase.awaitingStream
        var account: String?
        var resource: String?
        var closed = false
    }

    enum Phase { case awaitingStream, awaitingAuth, awaitingRestart, awaitingBind, ready }

    init(fd: Int32, id: String, server: XMPPServer) {
        self.fd = fd
        self.id = id
        self.server = server
    }

    /// The account it authenticated as (nil before SASL success).
    public var account: String? { lock.withLock { session.account } }
    /// The bound resource.
    public var resource: String? { lock.withLock { session.resource } }

    /// Sends raw XML (a stanza or stream-level element). Ignored once closed.
    public func send(_ xml: String) {
        lock.withLock {
            guard !session.closed else { return }
            writeAll(Array(xml.utf8))
        }
    }

    /// Ends the stream: an optional stream error condition, `</stream:stream>`, then the socket.
    public func close(error condition: String? = nil, text: String? = nil) {
        lock.withLock {
            guard !session.closed else { return }
            var out = ""
            if let condition {
                out += "<stream:error><\(condition) xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"
                if let text { out += "<text xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\">\(xmlEscape(text))</text>" }
                out += "</stream:error>"
            }
            out += "</stream:stream>"
            writeAll(Array(out.utf8))
            session.closed = true
            tls?.bye()
            shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    /// Drops the connection without ending the stream (no `</stream:stream>`, no TLS close): what
    /// a network failure looks like to the peer.
    public func drop() {
        lock.withLock {
            guard !session.closed else { return }
            session.closed = true
            shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        if let tls {
            _ = bytes.withUnsafeBytes { tls.write($0) }
            return
        }
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return
            }
            off += n
        }
    }

    func run() {
        let parser = XMLStreamParser(maxStanzaBytes: server.maxStanzaBytes)
        var buf = [UInt8](repeating: 0, count: 65536)
        if let credentials = server.tls {
            // Direct TLS: the handshake comes before any XML. A peer that does not finish it
            // within the time-out is dropped.
            var tv = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            do {
                let s = try TLSSession(fd: fd, credentials: credentials)
                lock.withLock { tls = s }
            } catch {
                lock.withLock { session.closed = true }
                Glibc.close(fd)
                server.forget(self)
                return
            }
            tv = timeval(tv_sec: 0, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        defer {
            lock.withLock {
                if !session.closed {
                    session.closed = true
                    shutdown(fd, Int32(SHUT_RDWR))
                }
            }
            Glibc.close(fd)
            server.forget(self)
            if account != nil { server.delegate.closed(self) }
        }
        while true {
            let reader = tls
            let n = buf.withUnsafeMutableBytes { b in
                reader.map { $0.read(b.baseAddress!, b.count) } ?? recv(fd, b.baseAddress, b.count, 0)
            }
            if n < 0 && reader == nil && errno == EINTR { continue }
            if n <= 0 { return }
            let events: [XMLStreamEvent]
            do {
                events = try parser.feed(Array(buf[0..<n]))
            } catch {
                // The peer gets a stream header first when it never got one, then the error.
                if lock.withLock({ session.phase == .awaitingStream }) { openStream(to: "") }
                switch error {
                case .invalidXML(let why): close(error: "invalid-xml", text: why)
                case .restrictedXML: close(error: "restricted-xml", text: "DTDs and entity declarations are not allowed")
                case .tooBig(let limit): close(error: "policy-violation", text: "a stanza may not exceed \(limit) bytes")
                }
                return
            }
            for e in events where !handle(e, parser) { return }
        }
    }

    /// Handles one event; false when the connection must end.
    private func handle(_ e: XMLStreamEvent, _ parser: XMLStreamParser) -> Bool {
        // Closed or dropped (by the delegate, say, for a fault): what the same read also
        // brought is not taken.
        guard let phase = lock.withLock({ session.closed ? nil : session.phase }) else { return false }
        switch e {
        case .streamClose:
            close()
            return false
        case .streamOpen(let attrs):
            let to = attrs["to"] ?? server.domain
            switch phase {
            case .awaitingStream:
                openStream(to: to)
                send("<stream:features><mechanisms xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"><mechanism>PLAIN</mechanism></mechanisms></stream:features>")
                lock.withLock { session.phase = .awaitingAuth }
            case .awaitingRestart:
                openStream(to: to)
                send("<stream:features><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"/><session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></stream:features>")
                lock.withLock { session.phase = .awaitingBind }
            default:
                close(error: "invalid-xml", text: "a stream header in the middle of a stream")
                return false
            }
            return true
        case .stanza(let s):
            switch phase {
            case .awaitingStream, .awaitingRestart:
                close(error: "invalid-xml", text: "expected a stream header")
                return false
            case .awaitingAuth:
                return authenticate(s, parser)
            case .awaitingBind, .ready:
                return stanza(s, phase: phase)
            }
        }
    }

    private func openStream(to: String) {
        var rng = SystemRandomNumberGenerator()
        let streamID = String(rng.next() | (1 << 63), radix: 16).prefix(16)
        let from = to.isEmpty ? server.domain : to
        send("<stream:stream from=\"\(xmlEscape(from))\" id=\"\(streamID)\" version=\"1.0\" xmlns=\"jabber:client\" xmlns:stream=\"http://etherx.jabber.org/streams\">")
    }

    private func authenticate(_ s: XMLElement, _ parser: XMLStreamParser) -> Bool {
        let saslNS = "urn:ietf:params:xml:ns:xmpp-sasl"
        guard s.localName == "auth" else {
            close(error: "not-authorized", text: "authenticate first (SASL PLAIN)")
            return false
        }
        guard s.attributes["mechanism"] == "PLAIN", let raw = Base64.decode(s.text) else {
            send("<failure xmlns=\"\(saslNS)\"><invalid-mechanism/></failure>")
            close()
            return false
        }
        let parts = raw.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard parts.count == 3, let account = server.delegate.authenticate(authzid: parts[0], authcid: parts[1], password: parts[2]) else {
            send("<failure xmlns=\"\(saslNS)\"><not-authorized/></failure>")
            close()
            return false
        }
        lock.withLock {
            session.account = account
            session.phase = .awaitingRestart
        }
        send("<success xmlns=\"\(saslNS)\"/>")
        // The client restarts the stream: a new XML document on the same connection.
        parser.reset()
        return true
    }

    private func stanza(_ s: XMLElement, phase: Phase) -> Bool {
        switch s.localName {
        case "iq":
            let iqID = xmlEscape(s.attributes["id"] ?? "")
            if let bind = s.child("bind") {
                let resource = bind.child("resource")?.text.isEmpty == false ? bind.child("resource")!.text : "fcm-mock-\(id)"
                let account = lock.withLock { () -> String in
                    session.resource = resource
                    session.phase = .ready
                    return session.account ?? ""
                }
                send("<iq type=\"result\" id=\"\(iqID)\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><jid>\(xmlEscape(account))@\(xmlEscape(server.domain))/\(xmlEscape(resource))</jid></bind></iq>")
                server.delegate.opened(self)
            } else {
                // session, ping (XEP-0199) and anything else: a plain result.
                send("<iq type=\"result\" id=\"\(iqID)\"/>")
            }
            return true
        case "message":
            guard phase == .ready else {
                close(error: "not-authorized", text: "bind a resource first")
                return false
            }
            server.delegate.received(s, on: self)
            return true
        default:
            return true
        }
    }
}
