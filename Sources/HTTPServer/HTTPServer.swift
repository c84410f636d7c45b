import Dispatch
public import Platform
import Synchronization
public import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP server that knows nothing of FCM: HTTP/1.1 and h2c on the plain port (or HTTP/1.1 over
/// TLS there, `tls`), and HTTP/2 and HTTP/1.1 over TLS with ALPN on the HTTPS port.
///
/// Threading: every HTTP/1.1 connection, on either port, is served by one of the server's epoll
/// loops (`HTTP1Loops`; by default as many as the cores the process may use), where it stays: a
/// TLS connection's thread decrypts into a socket pair whose other end a loop serves, as it
/// serves a plain client; each HTTP/2 connection by a thread.
/// A handler answers through an `HTTPResponder`,
/// at once or later from any thread; until it answers, the request costs no thread. So a send
/// waiting for its group commit, or a long poll waiting a minute, holds no thread and never
/// makes one sleep and wake per request (which, on two cores, cost more than the request
/// itself). A handler that does block (a control call reading SQLite) stalls its loop's
/// connections (the ones that loop serves) for milliseconds; requests with large bodies are
/// handled off the loop.
public final class HTTPServer: Sendable {
    /// The address actually bound (the port is the real one when 0 was asked for).
    public let host: String
    public let port: Int
    /// The HTTPS port's real number (nil without one).
    public let httpsPort: Int?
    let core: ServerCore
    private let listenFD: Int32
    let stopped = Atomic<Bool>(false)
    /// How many HTTP/1.1 loops serve both ports.
    public let http1Loops: Int
    private let tls: TLSCredentials?
    private let http1Limits: HTTP1Limits
    let http2Limits: HTTP2Limits
    /// Accept loops: the plain port's (its sniffer, or a TLS acceptor with `tls`) and the HTTPS
    /// port's.
    private let plainAcceptor = Mutex<Acceptor?>(nil)
    private let tlsAcceptor = Mutex<TLSAcceptor?>(nil)
    /// The HTTP/1.1 loops of both ports (nil once stopped).
    let http1 = Mutex<HTTP1Loops?>(nil)
    private let httpsListen: (fd: Int32, credentials: TLSCredentials)?

    /// Binds `host:port` (and `https.port`) right away (so a busy port is reported before
    /// anything starts), without accepting connections until `start()`.
    /// With `tls`, the port speaks HTTP/1.1 over TLS (ALPN `http/1.1`); without it, HTTP/1.1 and
    /// h2c (HTTP/2 with prior knowledge). With `https`, a second port speaks TLS with ALPN `h2`
    /// and `http/1.1`. `http1Loops` is how many HTTP/1.1 loops serve both ports; nil: one per
    /// core the process may use (`availableCores`). New connections are dealt to the loops in
    /// turn; each loop commits its own round's sends (docs/performance.md, "Every core"). A
    /// handler that blocks delays the other connections of its loop for that long.
    /// `accessLog` is called once per answered request, on the thread that sends the answer.
    /// `afterBatch`, when given, is called on an HTTP/1.1 loop's or an HTTP/2 connection's thread
    /// after it has handed `handler` every request it read in one go (those requests are marked
    /// `inBatch`), so work they leave pending can be done once for all of them.
    /// `http1Limits` bounds the HTTP/1.1 clients that are slow to send a request head.
    /// The HTTPS port asks each client for a certificate without requiring one (APNs
    /// certificate authentication: `HTTPRequest.clientCertificate`), and serves a client that
    /// offered no ALPN as HTTP/2 when its first bytes are the HTTP/2 preface.
    public init(host: String, port: Int, maxBodyBytes: Int, http1Loops: Int? = nil, tls: TLSCredentials? = nil,
                https: HTTPSListenerOptions? = nil, http1Limits: HTTP1Limits = HTTP1Limits(), http2Limits: HTTP2Limits = HTTP2Limits(),
                accessLog: (@Sendable (HTTPAccess) -> Void)? = nil, afterBatch: (@Sendable () -> Void)? = nil,
                handler: @escaping HTTPHandler) throws(SocketError) {
        self.tls = tls
        let (fd, boundPort) = try ListenSocket.open(host: host, port: port)
        if let https {
            do {
                let (hfd, hport) = try ListenSocket.open(host: host, port: https.port)
                httpsListen = (hfd, https.credentials)
                httpsPort = hport
            } catch {
                close(fd)
                throw error
            }
        } else {
            httpsListen = nil
            httpsPort = nil
        }
        self.listenFD = fd
        self.host = host
        self.port = boundPort
        self.http1Loops = max(1, http1Loops ?? Self.availableCores)
        self.http1Limits = http1Limits
        self.http2Limits = http2Limits
        self.core = ServerCore(handler: handler, maxBodyBytes: maxBodyBytes, accessLog: accessLog, afterBatch: afterBatch,
                               maxWebSockets: http1Limits.maxWebSockets)
    }

    /// The cores this process may run on (its affinity: `taskset`, a container's cpuset), at
    /// least 1: the default number of HTTP/1.1 loops.
    public static var availableCores: Int {
        // glibc declares sched_getaffinity only with _GNU_SOURCE, so Swift's Glibc leaves it out.
        typealias GetAffinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_getaffinity") else { return 1 }
        var mask = [UInt64](repeating: 0, count: 16)  // up to 1024 CPUs
        let rc = mask.withUnsafeMutableBytes { unsafeBitCast(symbol, to: GetAffinity.self)(0, $0.count, $0.baseAddress!) }
        guard rc == 0 else { return 1 }
        return max(1, mask.reduce(0) { $0 + $1.nonzeroBitCount })
    }

    /// How many connections may be open at once: select's FD_SETSIZE (1020, a common default)
    /// locked new clients out behind a thousand idle keep-alive connections; with epoll the
    /// bound is the descriptor limit, raised first to its hard maximum (at most 65536),
    /// less room for the store, the XMPP listener and its connections.
    static func connectionLimit() -> Int {
        var rl = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return 1020 }
        let wanted = min(rl.rlim_max, 65536)
        if rl.rlim_cur < wanted {
            var raised = rl
            raised.rlim_cur = wanted
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { rl = raised }
        }
        return max(1020, min(Int(rl.rlim_cur) / 2, 32768))
    }

    /// WebSocket connections open now, on both ports (each counted from its 101 until the room
    /// is told it closed).
    public var openWebSockets: Int { core.webSockets.load(ordering: .relaxed) }

    /// Starts accepting connections.
    public func start() throws(SocketError) {
        // Both ports' HTTP/1.1 on our own loops; h2c and HTTP/2 on connections of their own.
        guard let loops = HTTP1Loops(count: http1Loops, core: core, maxConnections: Self.connectionLimit(), limits: http1Limits) else {
            throw SocketError("could not start the HTTP server on \(host):\(port)")
        }
        http1.withLock { $0 = loops }
        let plain: Acceptor
        if let tls {
            plain = TLSAcceptor(listenFD: listenFD, sink: self, credentials: tls, limits: http2Limits, protocols: ["http/1.1"])
        } else {
            plain = PlainAcceptor(listenFD: listenFD, sink: self)
        }
        plainAcceptor.withLock { $0 = plain }
        plain.start()
        if let httpsListen {
            let a = TLSAcceptor(listenFD: httpsListen.fd, sink: self, credentials: httpsListen.credentials, limits: http2Limits,
                                protocols: ["h2", "http/1.1"], requestsClientCertificate: true)
            tlsAcceptor.withLock { $0 = a }
            a.start()
        }
    }

    /// First step of stopping: from now on every new request is answered 503 (closing its
    /// connection) before the handler sees it, while requests already handled still get their
    /// own answers. `stop()` follows. HTTP/2 clients get GOAWAY at once, with `notice` as its
    /// debug data (APNs clients read Apple's `{"reason":"Shutdown"}` there; others ignore it).
    public func refuseNewRequests(notice: [UInt8] = []) {
        core.goAwayNotice.withLock { $0 = notice }
        core.refusing.store(true, ordering: .sequentiallyConsistent)
        // HTTP/2 clients are told at once (GOAWAY): their streams in flight are still answered.
        for c in core.http2Connections() { c.post(.goAway) }
        // A loop thread that read the flag just before it was set may still be handing its
        // request over: wait (a second at most) until every such hand-over is done, so what the
        // caller drains next includes its writes.
        var waited = 0
        while core.handing.load(ordering: .sequentiallyConsistent) > 0 && waited < 1000 {
            usleep(1000)
            waited += 1
        }
    }

    /// Answers requests still waiting, and any that come meanwhile, with 503, then closes every
    /// connection and the listening socket.
    /// Callers should first let their own pending answers finish (they are sent if they come
    /// before this).
    /// Calling it again does nothing (the listening socket is closed exactly once).
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        // No new connections, on either port.
        plainAcceptor.withLock { $0 }?.stop()
        tlsAcceptor.withLock { $0 }?.stop()
        if plainAcceptor.withLock({ $0 }) == nil { close(listenFD) }
        if let h = httpsListen, tlsAcceptor.withLock({ $0 }) == nil { close(h.fd) }
        // HTTP/2 connections answer their waiting streams (the decided answer, else 503) and
        // close, within a second; so do the HTTP/1.1 loops. Event streams end.
        for c in core.http2Connections() { c.post(.stop) }
        let loops = http1.withLock { l -> HTTP1Loops? in defer { l = nil }; return l }
        core.stopping()
        loops?.stop()
        core.waitForHTTP2(millis: 1500)
    }
}

/// One answered request, for the access log.
public struct HTTPAccess: Sendable {
    public let method: String
    /// Still percent-encoded, without the query.
    public let path: String
    /// The status sent; 0 when the connection was dropped without an answer.
    public let status: Int
    /// Body bytes; -1 for a stream.
    public let bytes: Int
    /// The Authorization header as sent (mask it before printing).
    public let authorization: String?
    /// From the complete request to the queued answer.
    public let nanos: UInt64
}


/// What every connection of the server shares: the handler, the limits, the open streams and
/// HTTP/2 connections, and whether it is stopping.
///
/// `@unchecked Sendable`: `handler` and `maxBodyBytes` are immutable; the rest are `Locked`
/// values and atomics.
final class ServerCore: @unchecked Sendable {
    let handler: HTTPHandler
    let maxBodyBytes: Int
    private let isStopping = Locked<Bool>(false)
    private let streams = Locked<[ObjectIdentifier: HTTPStream]>([:])
    private let http2 = Locked<[ObjectIdentifier: HTTP2Connection]>([:])

    /// Records an open HTTP/2 connection. At `max` already, the one idle the longest (no stream)
    /// is closed to make room, as its idle time-out would; false when every one has streams.
    func track(_ c: HTTP2Connection, max: Int) -> Bool {
        let (taken, evicted) = http2.withLock { m -> (Bool, HTTP2Connection?) in
            var oldest: HTTP2Connection?
            if m.count >= max {
                var since = UInt64.max
                for other in m.values {
                    let t = other.idleSince.load(ordering: .relaxed)
                    if t != 0 && t < since { (oldest, since) = (other, t) }
                }
                guard let oldest else { return (false, nil) }
                // No longer counted: its thread ends within a second.
                m[ObjectIdentifier(oldest)] = nil
            }
            m[ObjectIdentifier(c)] = c
            return (true, oldest)
        }
        evicted?.post(.evict)
        return taken
    }

    func untrack(_ c: HTTP2Connection) { _ = http2.withLock { $0.removeValue(forKey: ObjectIdentifier(c)) } }

    func http2Connections() -> [HTTP2Connection] { http2.withLock { Array($0.values) } }

    /// Waits until every HTTP/2 connection has ended, for at most `millis`.
    func waitForHTTP2(millis: Int) {
        var waited = 0
        while http2.withLock({ !$0.isEmpty }) && waited < millis {
            usleep(5_000)
            waited += 5
        }
    }

    /// Keeps track of an open stream until its connection is gone (stop ends them all).
    func track(_ s: HTTPStream) {
        let id = ObjectIdentifier(s)
        let stopping = isStopping.withLock { $0 }
        streams.withLock { $0[id] = s }
        s.onClose { [weak self] in _ = self?.streams.withLock { $0.removeValue(forKey: id) } }
        if stopping { s.finish() }
    }

    let accessLog: (@Sendable (HTTPAccess) -> Void)?
    /// See `HTTPServer.init`'s `afterBatch`.
    let afterBatch: (@Sendable () -> Void)?
    /// Set by `HTTPServer.refuseNewRequests()`.
    let refusing = Atomic<Bool>(false)
    /// The debug data of the GOAWAY a stopping server sends (`refuseNewRequests(notice:)`).
    let goAwayNotice = Locked<[UInt8]>([])
    /// Loop threads between their check of `refusing` and the end of the handler's call.
    let handing = Atomic<Int>(0)
    /// WebSocket connections open (`HTTPServer.openWebSockets`), and how many may be.
    let webSockets = Atomic<Int>(0)
    let maxWebSockets: Int

    init(handler: @escaping HTTPHandler, maxBodyBytes: Int, accessLog: (@Sendable (HTTPAccess) -> Void)?,
         afterBatch: (@Sendable () -> Void)? = nil, maxWebSockets: Int = 1024) {
        self.maxWebSockets = maxWebSockets
        self.handler = handler
        self.maxBodyBytes = maxBodyBytes
        self.accessLog = accessLog
        self.afterBatch = afterBatch
    }

    /// From now on every event stream ends as it is opened; those open now end.
    func stopping() {
        isStopping.withLock { $0 = true }
        for s in streams.withLock({ Array($0.values) }) { s.finish() }
    }

    /// The answer while stopping; it closes the connection, so keep-alive clients stop sending.
    static var shuttingDown: HTTPResponse {
        var r = HTTPResponse(status: 503, contentType: "text/plain; charset=UTF-8", body: "shutting down\n")
        r.closeConnection = true
        return r
    }
}
