import CMicroHTTPD
import Dispatch
public import Platform
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP server that knows nothing of FCM: HTTP/1.1 and h2c on the plain port, HTTP/1.1 over
/// TLS through libmicrohttpd (`--http-tls`, and the HTTPS port's `http/1.1` connections), HTTP/2
/// over TLS on the HTTPS port.
///
/// Threading: the plain port's HTTP/1.1 connections are served by an epoll loop of our own (one
/// by default, `HTTP1Loops`); libmicrohttpd's connections by its own loop threads (internal epoll
/// with a thread pool); each HTTP/2 connection by a thread. A handler answers through an `HTTPResponder`,
/// at once or later from any thread; until it answers, the request costs no thread. So a send
/// waiting for its group commit, or a long poll waiting a minute, holds no thread and never
/// makes one sleep and wake per request (which, on two cores, cost more than the request
/// itself). A handler that does block (a control call reading SQLite) stalls its loop's
/// connections (with one loop, all of the plain port's HTTP/1.1) for milliseconds; requests with
/// large bodies are handled off the loop.
public final class HTTPServer: Sendable {
    /// The address actually bound (the port is the real one when 0 was asked for).
    public let host: String
    public let port: Int
    /// The HTTPS port's real number (nil without one).
    public let httpsPort: Int?
    let core: ServerCore
    /// What libmicrohttpd's callbacks get: the core, and whether that daemon's connections came
    /// over TLS (its own, or the HTTPS port's bridge), which each request then carries.
    private let plainFace: DaemonFace
    private let secureFace: DaemonFace
    /// The running daemons' addresses (0 when stopped), plain integers so the Mutex holds a
    /// Sendable value: the main one, and the one the HTTPS port's HTTP/1.1 connections are
    /// bridged to (its requests are marked secure). Connections are added under this lock, so
    /// none is added to a daemon being stopped.
    let daemons = Mutex<(main: UInt, bridge: UInt)>((0, 0))
    private let listenFD: Int32
    let stopped = Atomic<Bool>(false)
    private let threads: Int
    private let http1Loops: Int
    private let tls: HTTPServerTLS?
    private let http1Limits: HTTP1Limits
    let http2Limits: HTTP2Limits
    /// Accept loops: the plain port's sniffer (nil with `--http-tls`, where libmicrohttpd
    /// accepts itself) and the HTTPS port's.
    private let plainAcceptor = Mutex<PlainAcceptor?>(nil)
    private let tlsAcceptor = Mutex<TLSAcceptor?>(nil)
    /// The plain port's HTTP/1.1 loops (nil with `--http-tls`, and once stopped).
    let http1 = Mutex<HTTP1Loops?>(nil)
    private let httpsListen: (fd: Int32, credentials: TLSCredentials)?

    /// Binds `host:port` (and `https.port`) right away (so a busy port is reported before
    /// anything starts), without accepting connections until `start()`.
    /// With `tls`, the port speaks HTTPS through libmicrohttpd; without it, the port also speaks
    /// h2c (HTTP/2 with prior knowledge). With `https`, a second port speaks TLS with ALPN `h2`
    /// and `http/1.1`.
    /// `threads` is libmicrohttpd's pool (its HTTPS connections); `http1Loops` the plain port's
    /// HTTP/1.1 loops. One by default: it serves the bench's 32 connections at the same req/s as
    /// four, at 20-30% less CPU per send, since its round's sends are committed on it with no
    /// other committer to wait for or hand over to (docs/performance.md); a handler that blocks
    /// delays the other HTTP/1.1 connections for that long.
    /// `accessLog` is called once per answered request, on the thread that sends the answer.
    /// `afterBatch`, when given, is called on an HTTP/1.1 loop's or an HTTP/2 connection's thread
    /// after it has handed `handler` every request it read in one go (those requests are marked
    /// `inBatch`), so work they leave pending can be done once for all of them.
    /// `http1Limits` bounds the plain port's HTTP/1.1 clients that are slow to send a request head.
    public init(host: String, port: Int, maxBodyBytes: Int, threads: Int = 4, http1Loops: Int = 1, tls: HTTPServerTLS? = nil,
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
        self.threads = max(1, threads)
        self.http1Loops = max(1, http1Loops)
        self.http1Limits = http1Limits
        self.http2Limits = http2Limits
        self.core = ServerCore(handler: handler, maxBodyBytes: maxBodyBytes, accessLog: accessLog, afterBatch: afterBatch)
        self.plainFace = DaemonFace(core: core, secure: false)
        self.secureFace = DaemonFace(core: core, secure: true)
    }

    /// How many connections may be open at once. libmicrohttpd's default (1020, from select's
    /// FD_SETSIZE) locked new clients out behind a thousand idle keep-alive connections; with
    /// epoll the bound is the descriptor limit, raised first to its hard maximum (at most 65536),
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

    /// Starts accepting connections.
    public func start() throws(SocketError) {
        var main: UInt = 0
        if tls != nil {
            // libmicrohttpd speaks HTTPS itself on the port.
            guard let m = startDaemon(listen: listenFD, tls: tls, secure: true) else {
                throw SocketError("could not start the HTTP server on \(host):\(port)")
            }
            main = m
        } else {
            // The plain port: HTTP/1.1 on our own loops, h2c on HTTP/2 connections.
            guard let loops = HTTP1Loops(count: http1Loops, core: core, maxConnections: Self.connectionLimit(), limits: http1Limits) else {
                throw SocketError("could not start the HTTP server on \(host):\(port)")
            }
            http1.withLock { $0 = loops }
        }
        var bridge: UInt = 0
        if httpsListen != nil {
            guard let b = startDaemon(listen: unreachableListenSocket(), tls: nil, secure: true) else {
                throw SocketError("could not start the HTTPS server on \(host):\(httpsPort ?? 0)")
            }
            bridge = b
        }
        daemons.withLock { $0 = (main, bridge) }
        if tls == nil {
            let a = PlainAcceptor(listenFD: listenFD, sink: self)
            plainAcceptor.withLock { $0 = a }
            a.start()
        }
        if let httpsListen {
            let a = TLSAcceptor(listenFD: httpsListen.fd, sink: self, credentials: httpsListen.credentials, limits: http2Limits)
            tlsAcceptor.withLock { $0 = a }
            a.start()
        }
    }

    /// A libmicrohttpd daemon on `listen` (its address as an integer), or nil.
    private func startDaemon(listen: Int32, tls: HTTPServerTLS?, secure: Bool) -> UInt? {
        guard listen >= 0 else { return nil }
        let cls = Unmanaged.passUnretained(secure ? secureFace : plainFace).toOpaque()
        let d = fcm_mhd_start(FCM_MHD_FLAGS_EVENT_LOOP, listen, accessHandler, cls, requestCompleted, cls, 300, 32 * 1024,
                              UInt32(threads), UInt32(Self.connectionLimit()), tls?.keyPEM, tls?.certificatePEM)
        guard let d else {
            if listen != listenFD { close(listen) }
            return nil
        }
        return UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(d)))
    }

    /// First step of stopping: from now on every new request is answered 503 (closing its
    /// connection) before the handler sees it, while requests already handled still get their
    /// own answers. `stop()` follows.
    public func refuseNewRequests() {
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
        let bits = daemons.withLock { d -> (main: UInt, bridge: UInt) in defer { d = (0, 0) }; return d }
        if tls == nil && plainAcceptor.withLock({ $0 }) == nil { close(listenFD) }
        if let h = httpsListen, tlsAcceptor.withLock({ $0 }) == nil { close(h.fd) }
        // HTTP/2 connections answer their waiting streams (the decided answer, else 503) and
        // close, within a second; so do the plain port's HTTP/1.1 loops.
        for c in core.http2Connections() { c.post(.stop) }
        let loops = http1.withLock { l -> HTTP1Loops? in defer { l = nil }; return l }
        // No MHD_quiesce_daemon: in libmicrohttpd 0.9.75 it races with a busy loop thread taking
        // the listening socket out of its own epoll set, and aborts the process ("Failed to
        // remove listen FD from epoll set"). Connections accepted from here on get 503 anyway
        // (`stopping`), and MHD_stop_daemon closes the listening socket.
        // libmicrohttpd must not be stopped with suspended connections: answer them first and
        // give the loops a moment to send those answers.
        core.stopping()
        loops?.stop()
        let mhd = [bits.main, bits.bridge].compactMap { OpaquePointer(bitPattern: $0) }
        if !mhd.isEmpty {
            // Wait until every answered request has been written out (a resumed connection is
            // only written by its loop later), for at most a second.
            var waited = 0
            while core.unfinishedCount() > 0 && waited < 200 {
                usleep(5_000)
                waited += 1
            }
        }
        core.waitForHTTP2(millis: 1500)
        for d in mhd { MHD_stop_daemon(d) }
        if tls != nil && bits.main == 0 { close(listenFD) }
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

/// The PEM texts of an HTTPS listener's certificate (chain) and private key.
public struct HTTPServerTLS: Sendable {
    public let certificatePEM: String
    public let keyPEM: String
    public init(certificatePEM: String, keyPEM: String) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }
}

/// What the C callbacks reach through their `void *` argument.
///
/// `@unchecked Sendable`: `handler` and `maxBodyBytes` are immutable; the set of suspended
/// responders is a `Locked` value.
final class ServerCore: @unchecked Sendable {
    let handler: HTTPHandler
    let maxBodyBytes: Int
    private let suspended = Locked<(isStopping: Bool, set: [ObjectIdentifier: HTTPResponder])>((false, [:]))
    private let streams = Locked<[ObjectIdentifier: HTTPStream]>([:])
    private let http2 = Locked<[ObjectIdentifier: HTTP2Connection]>([:])

    /// Records an open HTTP/2 connection; false when `max` are open already.
    func track(_ c: HTTP2Connection, max: Int) -> Bool {
        http2.withLock { m -> Bool in
            guard m.count < max else { return false }
            m[ObjectIdentifier(c)] = c
            return true
        }
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
        let stopping = suspended.withLock { $0.isStopping }
        streams.withLock { $0[id] = s }
        s.onClose { [weak self] in _ = self?.streams.withLock { $0.removeValue(forKey: id) } }
        if stopping { s.finish() }
    }

    /// Requests whose handler has been called and whose connection libmicrohttpd has not yet
    /// reported finished (waiting, resumed but not yet written, or streaming).
    private let unfinished = Atomic<Int>(0)
    func requestStarted() { unfinished.add(1, ordering: .relaxed) }
    func requestFinished() { unfinished.subtract(1, ordering: .relaxed) }
    func unfinishedCount() -> Int { unfinished.load(ordering: .relaxed) }

    let accessLog: (@Sendable (HTTPAccess) -> Void)?
    /// See `HTTPServer.init`'s `afterBatch`.
    let afterBatch: (@Sendable () -> Void)?
    /// Set by `HTTPServer.refuseNewRequests()`.
    let refusing = Atomic<Bool>(false)
    /// Loop threads between their check of `refusing` and the end of the handler's call.
    let handing = Atomic<Int>(0)

    init(handler: @escaping HTTPHandler, maxBodyBytes: Int, accessLog: (@Sendable (HTTPAccess) -> Void)?,
         afterBatch: (@Sendable () -> Void)? = nil) {
        self.handler = handler
        self.maxBodyBytes = maxBodyBytes
        self.accessLog = accessLog
        self.afterBatch = afterBatch
    }

    /// Records a request about to be suspended; false (and not recorded) once the server is
    /// stopping.
    func register(_ r: HTTPResponder) -> Bool {
        suspended.withLock { s -> Bool in
            guard !s.isStopping else { return false }
            s.set[ObjectIdentifier(r)] = r
            return true
        }
    }

    func unregister(_ r: HTTPResponder) {
        suspended.withLock { _ = $0.set.removeValue(forKey: ObjectIdentifier(r)) }
    }

    /// From now on every request is answered 503 without waiting: those waiting now (each
    /// resumed before this returns) and those still to come on open keep-alive connections.
    func stopping() {
        let waiting = suspended.withLock { s -> [HTTPResponder] in
            s.isStopping = true
            return Array(s.set.values)
        }
        for r in waiting { r.send(r.answerWhileStopping) }
        for s in streams.withLock({ Array($0.values) }) { s.finish() }
    }

    /// The answer while stopping; it closes the connection, so keep-alive clients stop sending.
    static var shuttingDown: HTTPResponse {
        var r = HTTPResponse(status: 503, contentType: "text/plain; charset=UTF-8", body: "shutting down\n")
        r.closeConnection = true
        return r
    }
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, conCls in
    guard let cls, let connection, let conCls, let uploadSize else { return FCM_MHD_NO }
    let face = Unmanaged<DaemonFace>.fromOpaque(cls).takeUnretainedValue()
    let core = face.core
    guard let raw = conCls.pointee else {
        conCls.pointee = Unmanaged.passRetained(RequestContext()).toOpaque()
        return FCM_MHD_YES
    }
    let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
    if let responder = ctx.responder {
        // Resumed: the handler has answered.
        guard let response = responder.takeResponse() else { return FCM_MHD_NO }
        return send(response, on: connection, core: core, ctx: ctx)
    }
    if uploadSize.pointee > 0 {
        let n = uploadSize.pointee
        if !ctx.tooLarge, let uploadData {
            if ctx.body.count + n > core.maxBodyBytes {
                // Keep reading (and dropping) the rest, so the answer is a clean 413 on a
                // connection that stays usable.
                ctx.tooLarge = true
                ctx.body = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: n) {
                    ctx.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: n))
                }
            }
        }
        uploadSize.pointee = 0
        return FCM_MHD_YES
    }

    let pairs = PairCollector()
    let collector = Unmanaged.passUnretained(pairs).toOpaque()
    MHD_get_connection_values(connection, FCM_MHD_HEADER_KIND, collectPair, collector)
    pairs.collectingQuery = true
    MHD_get_connection_values(connection, FCM_MHD_GET_ARGUMENT_KIND, collectPair, collector)
    var request = HTTPRequest(
        method: method.map { String(cString: $0) } ?? "GET",
        path: url.map { String(cString: $0) } ?? "/",
        rawQuery: pairs.query,
        headers: pairs.headers,
        body: ctx.body,
        bodyTooLarge: ctx.tooLarge)
    request.isSecure = face.secure
    ctx.body = []
    if core.accessLog != nil {
        ctx.method = request.method
        ctx.path = request.path
        ctx.authorization = request.header("Authorization")
        ctx.startedAt = monotonicNanos()
    }
    let responder = HTTPResponder(connection: connection, core: core)
    ctx.responder = responder
    core.requestStarted()
    core.handing.add(1, ordering: .sequentiallyConsistent)
    if core.refusing.load(ordering: .sequentiallyConsistent) {
        core.handing.subtract(1, ordering: .sequentiallyConsistent)
        return send(ServerCore.shuttingDown, on: connection, core: core, ctx: ctx)
    }
    core.handler(request, responder)
    core.handing.subtract(1, ordering: .sequentiallyConsistent)
    guard let response = responder.responseOrSuspend() else { return FCM_MHD_YES }
    return send(response, on: connection, core: core, ctx: ctx)
}

private func send(_ response: HTTPResponse, on connection: OpaquePointer, core: ServerCore, ctx: RequestContext) -> MHD_Result {
    if let log = core.accessLog {
        log(HTTPAccess(method: ctx.method, path: ctx.path, status: response.abort ? 0 : response.status,
                       bytes: response.stream == nil ? response.body.count : -1, authorization: ctx.authorization,
                       nanos: monotonicNanos() &- ctx.startedAt))
    }
    // Refusing to answer makes libmicrohttpd close the connection.
    if response.abort { return FCM_MHD_NO }
    if let stream = response.stream {
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
        stream.state.withLock { $0.connection = address }
        core.track(stream)
        guard let r = fcm_mhd_stream_response(streamReader, Unmanaged.passRetained(stream).toOpaque(), streamFree) else {
            return FCM_MHD_NO
        }
        defer { MHD_destroy_response(r) }
        for (k, v) in response.headers { MHD_add_response_header(r, k, v) }
        return MHD_queue_response(connection, UInt32(response.status), r)
    }
    let r = response.body.withUnsafeBytes { buf in
        MHD_create_response_from_buffer(buf.count, UnsafeMutableRawPointer(mutating: buf.baseAddress), FCM_MHD_RESPMEM_MUST_COPY)
    }
    guard let r else { return FCM_MHD_NO }
    defer { MHD_destroy_response(r) }
    for (k, v) in response.headers { MHD_add_response_header(r, k, v) }
    if response.closeConnection { MHD_add_response_header(r, "Connection", "close") }
    return MHD_queue_response(connection, UInt32(response.status), r)
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, _, conCls, _ in
    guard let conCls, let raw = conCls.pointee else { return }
    let ctx = Unmanaged<RequestContext>.fromOpaque(raw)
    if ctx.takeUnretainedValue().responder != nil, let cls {
        Unmanaged<DaemonFace>.fromOpaque(cls).takeUnretainedValue().core.requestFinished()
    }
    ctx.release()
    conCls.pointee = nil
}
