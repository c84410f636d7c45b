public import Platform
import Synchronization
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
/// Every call comes on the connection's own reader thread, never under a lock of the transport,
/// so the delegate may send or close from inside any of them.
public protocol MCSDelegate: AnyObject, Sendable {
    /// The first packet was a LoginRequest (its `received_persistent_id`s acknowledge messages of
    /// an earlier connection). Nothing has been written yet.
    func login(_ request: LoginRequest, on connection: MCSConnection) -> MCSLoginVerdict
    /// The LoginResponse of an accepted login is queued (server packet 1); sends may follow.
    func loggedIn(_ connection: MCSConnection)
    /// A client packet carried `last_stream_id_received` = `n`: the client has every server
    /// packet up to n (a StreamAck, a heartbeat, any stanza).
    func acknowledged(throughServerPacket n: Int, on connection: MCSConnection)
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
    /// How long a blocked write may wait for a peer that does not read.
    public var sendTimeout: Duration
    /// Bytes queued for a peer that does not read before it is disconnected.
    public var maxUnsentBytes: Int

    public init(loginTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(3600), maxConnections: Int = 1024,
                maxPacketBytes: Int = 64 << 10, sendTimeout: Duration = .seconds(60), maxUnsentBytes: Int = 16 << 20) {
        self.loginTimeout = loginTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxPacketBytes = maxPacketBytes
        self.sendTimeout = sendTimeout
        self.maxUnsentBytes = maxUnsentBytes
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
/// Threading, as XMPPServer: one reader thread per connection with blocking reads, and one writer
/// thread per connection that drains what any thread queued, so a sender never blocks on a
/// client that does not read. The thousand connections at most a test machine holds make two
/// threads each affordable.
public final class MCSServer: Sendable {
    public let host: String
    public let port: Int
    public let limits: MCSLimits
    let delegate: any MCSDelegate
    let credentials: TLSCredentials
    private let fd: Int32
    /// Connections not yet past their handshake beyond `maxConnections`: more are closed at once
    /// (each holds a thread until its handshake ends).
    static let handshakeAllowance = 64
    /// `accepting`: the accept thread runs and owns the listening socket's closing.
    /// `established`: connections past their handshake and admitted.
    private let state = Mutex<(stopped: Bool, accepting: Bool, all: [String: MCSConnection], established: Int)>((false, false, [:], 0))

    /// Binds `host:port` at once (0 picks a port, read back from `port`).
    public init(host: String, port: Int, tls: TLSCredentials, limits: MCSLimits = MCSLimits(),
                delegate: any MCSDelegate) throws(SocketError) {
        let (fd, bound) = try ListenSocket.open(host: host, port: port)
        self.fd = fd
        self.host = host
        self.port = bound
        self.credentials = tls
        self.limits = limits
        self.delegate = delegate
    }

    /// Starts accepting connections.
    public func start() {
        let started = state.withLock { s -> Bool in
            guard !s.stopped, !s.accepting else { return false }
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
                    usleep(50_000)  // out of descriptors: the backlog waits, listening goes on
                    continue
                }
                n += 1
                let conn = MCSConnection(fd: c, id: "m\(n)", server: self)
                enum Admission { case open, stopped, full }
                let admission = state.withLock { s -> Admission in
                    if s.stopped { return .stopped }
                    if s.all.count >= limits.maxConnections + Self.handshakeAllowance { return .full }
                    s.all[conn.id] = conn
                    return .open
                }
                switch admission {
                case .open:
                    spawnThread { conn.run() }
                case .stopped:
                    close(c)
                    delegate.closed(conn, reason: "the server is shutting down")
                case .full:
                    close(c)
                    delegate.closed(conn, reason: "too many connections in their handshake")
                }
            }
        }
    }

    /// Connections past their handshake and open.
    public var connectionCount: Int { state.withLock { $0.established } }

    /// Every open connection (in its handshake or past it), by id.
    public var connections: [MCSConnection] {
        state.withLock { Array($0.all.values) }.sorted { $0.number < $1.number }
    }

    /// Takes a connection whose handshake is done; nil, or why not (stopping, or `maxConnections`
    /// open already).
    func admit(_ c: MCSConnection) -> String? {
        state.withLock { s in
            if s.stopped { return "the server is shutting down" }
            guard s.established < limits.maxConnections else {
                return "the server holds \(limits.maxConnections) connections, the most it takes"
            }
            s.established += 1
            return nil
        }
    }

    func forget(_ c: MCSConnection, admitted: Bool) {
        state.withLock { s in
            s.all.removeValue(forKey: c.id)
            if admitted { s.established -= 1 }
        }
    }

    /// Stops accepting, sends Close on every logged-in connection and closes them all, waiting
    /// up to 2 seconds for them to end. Calling it again does nothing.
    public func stop() {
        let (first, accepting, open) = state.withLock { s -> (Bool, Bool, [MCSConnection]) in
            defer { s.stopped = true }
            return (!s.stopped, s.accepting, Array(s.all.values))
        }
        guard first else { return }
        shutdown(fd, Int32(SHUT_RDWR))  // wakes the accept thread, which closes the socket
        if !accepting { close(fd) }
        for c in open { c.close(sendingClose: true, reason: "the server is shutting down") }
        let deadline = monotonicNanos() + 2_000_000_000
        for c in open { c.waitUntilFinished(untilMonotonicNanos: deadline) }
    }
}
