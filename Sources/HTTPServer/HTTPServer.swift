import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP/1.1 server on libmicrohttpd that knows nothing of FCM.
///
/// Threading: one thread per connection (libmicrohttpd's `MHD_USE_THREAD_PER_CONNECTION`). A
/// handler may block (group-commit waits, long polls of up to a minute) without stalling other
/// connections, and the code stays synchronous. Test tools open tens of connections, not tens of
/// thousands, so a thread each is cheap here.
public final class HTTPServer: Sendable {
    /// The address actually bound (the port is the real one when 0 was asked for).
    public let host: String
    public let port: Int
    private let core: ServerCore
    /// The running daemon's address (0 when stopped); a plain integer so the Mutex holds a Sendable value.
    private let daemon = Mutex<UInt>(0)
    private let listenFD: Int32

    /// Binds `host:port` right away (so a busy port is reported before anything starts), without
    /// accepting connections until `start()`.
    public init(host: String, port: Int, maxBodyBytes: Int, handler: @escaping HTTPHandler) throws(HTTPServerError) {
        let (fd, boundPort) = try ListenSocket.open(host: host, port: port)
        self.listenFD = fd
        self.host = host
        self.port = boundPort
        self.core = ServerCore(handler: handler, maxBodyBytes: maxBodyBytes)
    }

    /// Starts accepting connections.
    public func start() throws(HTTPServerError) {
        let cls = Unmanaged.passUnretained(core).toOpaque()
        let d = fcm_mhd_start(FCM_MHD_FLAGS_THREAD_PER_CONNECTION, listenFD, accessHandler, cls, requestCompleted, cls, 300, 32 * 1024)
        guard let d else { throw HTTPServerError("could not start the HTTP server on \(host):\(port)") }
        daemon.withLock { $0 = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(d))) }
    }

    /// Stops accepting, lets requests in flight finish, then closes every connection.
    public func stop() {
        let bits = daemon.withLock { d -> UInt in defer { d = 0 }; return d }
        guard let d = OpaquePointer(bitPattern: bits) else {
            close(listenFD)
            return
        }
        let fd = MHD_quiesce_daemon(d)
        MHD_stop_daemon(d)
        if fd >= 0 { close(fd) }
    }
}

/// What the C callbacks reach through their `void *` argument. Immutable, hence Sendable.
final class ServerCore: Sendable {
    let handler: HTTPHandler
    let maxBodyBytes: Int
    init(handler: @escaping HTTPHandler, maxBodyBytes: Int) {
        self.handler = handler
        self.maxBodyBytes = maxBodyBytes
    }
}

/// Per-request state between the calls libmicrohttpd makes for one request. It is only touched
/// by the connection's own thread, one call after another.
final class RequestContext {
    var body: [UInt8] = []
    var tooLarge = false
}

/// Collects header fields or query arguments during `MHD_get_connection_values`.
final class PairCollector {
    var pairs: [(String, String?)] = []
}

private let collectPair: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return FCM_MHD_YES }
    let c = Unmanaged<PairCollector>.fromOpaque(cls).takeUnretainedValue()
    c.pairs.append((String(cString: key), value.map { String(cString: $0) }))
    return FCM_MHD_YES
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, conCls in
    guard let cls, let connection, let conCls, let uploadSize else { return FCM_MHD_NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    guard let raw = conCls.pointee else {
        conCls.pointee = Unmanaged.passRetained(RequestContext()).toOpaque()
        return FCM_MHD_YES
    }
    let ctx = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
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

    let headers = PairCollector()
    let query = PairCollector()
    MHD_get_connection_values(connection, FCM_MHD_HEADER_KIND, collectPair, Unmanaged.passUnretained(headers).toOpaque())
    MHD_get_connection_values(connection, FCM_MHD_GET_ARGUMENT_KIND, collectPair, Unmanaged.passUnretained(query).toOpaque())
    var headerMap: [String: String] = [:]
    for (k, v) in headers.pairs {
        let name = k.lowercased()
        let value = v ?? ""
        if let old = headerMap[name] { headerMap[name] = old + ", " + value } else { headerMap[name] = value }
    }
    let request = HTTPRequest(
        method: method.map { String(cString: $0) } ?? "GET",
        path: url.map { String(cString: $0) } ?? "/",
        rawQuery: query.pairs,
        headers: headerMap,
        body: ctx.body,
        bodyTooLarge: ctx.tooLarge)
    ctx.body = []
    let response = core.handler(request)
    return send(response, on: connection)
}

private func send(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
    let r = response.body.withUnsafeBytes { buf in
        MHD_create_response_from_buffer(buf.count, UnsafeMutableRawPointer(mutating: buf.baseAddress), FCM_MHD_RESPMEM_MUST_COPY)
    }
    guard let r else { return FCM_MHD_NO }
    defer { MHD_destroy_response(r) }
    for (k, v) in response.headers { MHD_add_response_header(r, k, v) }
    if response.closeConnection { MHD_add_response_header(r, "Connection", "close") }
    return MHD_queue_response(connection, UInt32(response.status), r)
}

private let requestCompleted: MHD_RequestCompletedCallback = { _, _, conCls, _ in
    guard let conCls, let raw = conCls.pointee else { return }
    Unmanaged<RequestContext>.fromOpaque(raw).release()
    conCls.pointee = nil
}
