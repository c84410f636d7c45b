public import Platform
import Synchronization
public import TLS

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
    /// The client ended its stream (`</stream:stream>`) on a bound connection. True when the
    /// delegate closes the connection itself once it has answered what the client sent before
    /// (the reader waits for that, a few seconds at most); false to close at once.
    func streamEnded(_ connection: XMPPConnection) -> Bool
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
    /// Seconds a client has to authenticate and bind after connecting.
    let loginTimeout: Int
    /// Seconds a stanza has from its first byte to its last (a byte now and then keeps none open).
    let stanzaTimeout: Int
    /// Connections open at once, logged in or not (each holds a thread); one more is refused.
    let maxConnections: Int
    let delegate: any XMPPDelegate
    /// Set for direct TLS from the first byte (as Google's port 5235), no STARTTLS.
    public let tls: TLSCredentials?
    private let fd: Int32
    /// `accepting`: the accept thread runs and owns the listening socket's closing, so the
    /// descriptor number is never reused while that thread may still call `accept` on it.
    private let state = Mutex<(stopped: Bool, accepting: Bool, connections: [String: XMPPConnection])>((false, false, [:]))

    /// Binds `host:port` at once (a busy port is reported before anything starts).
    public init(host: String, port: Int, domain: String = "gcm.googleapis.com", maxStanzaBytes: Int = 1 << 20,
                tls: TLSCredentials? = nil, loginTimeout: Int = 30, stanzaTimeout: Int = 30, maxConnections: Int = 5000,
                delegate: any XMPPDelegate) throws(SocketError) {
        self.tls = tls
        let (fd, bound) = try ListenSocket.open(host: host, port: port)
        self.fd = fd
        self.host = host
        self.port = bound
        self.domain = domain
        self.maxStanzaBytes = maxStanzaBytes
        self.loginTimeout = loginTimeout
        self.stanzaTimeout = stanzaTimeout
        self.maxConnections = maxConnections
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
                    let e = errno
                    if e == EINTR || e == ECONNABORTED { continue }
                    // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the pending
                    // connection waits in the backlog; try again once some are closed, rather
                    // than give up listening for good.
                    usleep(50_000)
                    continue
                }
                n += 1
                let conn = XMPPConnection(fd: c, id: "c\(n)", server: self)
                enum Admission { case open, stopped, full }
                let admission = state.withLock { s -> Admission in
                    if s.stopped { return .stopped }
                    if s.connections.count >= maxConnections { return .full }
                    s.connections[conn.id] = conn
                    return .open
                }
                switch admission {
                case .open:
                    // No thread to be had: this connection is refused, the server goes on.
                    if !trySpawnThread({ conn.run() }) {
                        state.withLock { _ = $0.connections.removeValue(forKey: conn.id) }
                        close(c)
                    }
                case .stopped:
                    close(c)
                case .full:
                    // Told why on a plain stream (never inside a TLS handshake), without a thread.
                    conn.end(error: "policy-violation", text: "the server holds \(maxConnections) connections, the most it takes")
                    conn.waitForFlusher()  // a fresh socket takes these few bytes at once: no wait
                    close(c)
                }
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

    /// Stops accepting and ends every stream with `</stream:stream>`, waiting up to 2 seconds for
    /// those ends to be written. Calling it again does nothing.
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
        let deadline = monotonicNanos() + 2_000_000_000
        for c in open { c.waitForFlusher(untilMonotonicNanos: deadline) }
    }
}
