public import Platform
public import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// What a login comes to: the delegate's decision.
public enum MCSLoginVerdict: Equatable, Sendable {
    /// A LoginResponse without error; the connection is logged in.
    case accept
    /// A LoginResponse with `error{code, message}`, then Close, then the connection ends.
    case refuse(code: Int, message: String)
}

/// The application behind an MCS listener (a room): it judges logins and hears acknowledgements.
/// Every call comes on the listener's loop thread, never under a lock of the transport, so the
/// delegate may send or close from inside any of them (a send or close made there is carried out
/// when the call returns). A call that blocks holds up every connection of the listener.
public protocol MCSDelegate: AnyObject, Sendable {
    /// The first packet was a LoginRequest (its `received_persistent_id`s acknowledge messages of
    /// an earlier connection). Nothing has been written yet.
    func login(_ request: LoginRequest, on connection: MCSConnection) -> MCSLoginVerdict
    /// The LoginResponse of an accepted login is queued (server packet 1); sends may follow.
    func loggedIn(_ connection: MCSConnection)
    /// A client packet carried `last_stream_id_received` = `n`: the client has every server
    /// packet up to n (a StreamAck, a heartbeat, any stanza). `tag` is that packet's, `ext` its
    /// IQ extension's id (13 for a StreamAck).
    func acknowledged(throughServerPacket n: Int, carriedBy tag: MCSTag, ext: Int32?, on connection: MCSConnection)
    /// A SelectiveAck (IQ extension 12) listed these persistent ids.
    func selectiveAck(ids: [String], on connection: MCSConnection)
    /// A HeartbeatPing (already answered) or a HeartbeatAck arrived.
    func heartbeat(on connection: MCSConnection)
    /// The connection is gone, with why. Called exactly once for every connection accepted,
    /// logged in or not (a failed handshake and hostile input included); `connection.user` tells
    /// which ones had logged in.
    func closed(_ connection: MCSConnection, reason: String)
    /// The clock for `server_timestamp` and `lastHeartbeatAt`: epoch milliseconds.
    func nowMillis() -> Int64
    /// The client stayed silent after a push that asked for an immediate acknowledgement, and
    /// was sent a HeartbeatPing (`MCSLimits.ackNudge`).
    func nudged(_ connection: MCSConnection)
}

extension MCSDelegate {
    public func nudged(_ connection: MCSConnection) {}
}

/// The listener's limits; the defaults are the contract's (real-clients.md §3.5, §3.7).
public struct MCSLimits: Sendable {
    /// From accepting the connection to a complete LoginRequest (the TLS handshake included).
    public var loginTimeout: Duration
    /// A logged-in connection that sends no byte for this long gets Close and is closed.
    public var idleTimeout: Duration
    /// Connections open at once past their handshake; one more is closed after its handshake.
    public var maxConnections: Int
    /// The largest packet payload a client may send.
    public var maxPacketBytes: Int
    /// How long queued bytes may wait for a peer that does not read before it is disconnected.
    public var sendTimeout: Duration
    /// Bytes queued for a peer that does not read before it is disconnected.
    public var maxUnsentBytes: Int
    /// How long a client may stay silent after a data message that asked for an immediate
    /// acknowledgement before the server sends it a HeartbeatPing (whose HeartbeatAck carries
    /// what the client received): once for each such silence.
    public var ackNudge: Duration

    public init(loginTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(3600), maxConnections: Int = 1024,
                maxPacketBytes: Int = 64 << 10, sendTimeout: Duration = .seconds(60), maxUnsentBytes: Int = 16 << 20,
                ackNudge: Duration = .seconds(5)) {
        self.loginTimeout = loginTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxPacketBytes = maxPacketBytes
        self.sendTimeout = sendTimeout
        self.maxUnsentBytes = maxUnsentBytes
        self.ackNudge = ackNudge
    }
}

extension Duration {
    var nanos: UInt64 {
        let (s, a) = components
        return s < 0 ? 0 : UInt64(s) * 1_000_000_000 + UInt64(a / 1_000_000_000)
    }
}

/// Google's MCS ("mtalk") listener: TLS from the first byte, then tagged protobuf packets
/// (real-clients.md §3.5). It knows nothing of FCM: a delegate judges logins and hears acks.
///
/// Threading: one loop thread (`MCSLoop`) accepts and serves every connection on non-blocking
/// sockets and GnuTLS in non-blocking mode, so a connection costs no thread and an idle one no
/// buffer; any thread may send or close, which queues the bytes and wakes the loop to write them.
public final class MCSServer: Sendable {
    public let host: String
    public let port: Int
    public let limits: MCSLimits
    let loop: MCSLoop

    /// Binds `host:port` at once (0 picks a port, read back from `port`).
    public init(host: String, port: Int, tls: TLSCredentials, limits: MCSLimits = MCSLimits(),
                delegate: any MCSDelegate) throws(SocketError) {
        let (fd, bound) = try ListenSocket.open(host: host, port: port)
        guard let loop = MCSLoop(listenFD: fd, credentials: tls, limits: limits, delegate: delegate) else {
            close(fd)
            throw SocketError("cannot set up the MCS loop (epoll): \(String(cString: strerror(errno)))")
        }
        self.loop = loop
        self.host = host
        self.port = bound
        self.limits = limits
    }

    /// Starts accepting connections.
    public func start() { loop.start() }

    /// Connections past their handshake and open.
    public var connectionCount: Int { loop.connectionCount }

    /// Every open connection (in its handshake or past it), by id.
    public var connections: [MCSConnection] { loop.connections }

    /// Stops accepting, sends Close on every logged-in connection and closes them all, waiting
    /// up to 2 seconds for what is queued to go out; returns when every connection has ended and
    /// the delegate heard of it. Calling it again does nothing.
    public func stop() { loop.stop() }
}
