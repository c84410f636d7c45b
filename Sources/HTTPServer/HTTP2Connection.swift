import CNGHTTP2
import Platform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The bounds of every HTTP/2 connection (RFC 9113 settings and the known attacks).
public struct HTTP2Limits: Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams beyond it are refused (RST_STREAM REFUSED_STREAM).
    /// 1,000, as Apple's APNs advertises (apns.md §1; clients size their concurrency by it).
    public var maxConcurrentStreams: UInt32 = 1000
    /// SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113's size: name + value + 32 per field); a bigger
    /// request is answered 431 without reaching the handler, and a header block (HEADERS and its
    /// CONTINUATION frames) of more than this plus one frame ends the connection.
    public var maxHeaderListBytes = 64 * 1024
    /// RST_STREAM frames a client may send at once, then per second (rapid reset, CVE-2023-44487);
    /// beyond: GOAWAY ENHANCE_YOUR_CALM.
    public var resetBurst = 200
    public var resetsPerSecond = 33
    /// Seconds a connection may stay open with no stream and no bytes (real time: it bounds the
    /// threads and sockets idle clients hold); then GOAWAY NO_ERROR with `idleNotice` as its debug
    /// data (the application's: Apple's `{"reason":"IdleTimeout"}`).
    public var idleSeconds = 300
    public var idleNotice: [UInt8] = []
    /// Seconds a new connection has to send its preface and SETTINGS; also the send time-out.
    public var handshakeSeconds = 10
    /// Most HTTP/2 connections open at once (each has a thread); more are closed at once.
    public var maxConnections = 1024
    /// Bytes of answers one connection may hold unsent (a client that does not open its
    /// flow-control window makes them wait). Past it, requests that are complete wait, not yet
    /// handed to the handler, until the answers drain below it; so what a connection holds is this
    /// plus the answers of the requests already being handled, never one answer per stream.
    public var maxUnsentBytes = 4 << 20
    /// Request body bytes one connection may hold over its streams still arriving (each stream
    /// keeps up to the server's body limit); past it: GOAWAY ENHANCE_YOUR_CALM.
    public var maxPendingBodyBytes = 16 << 20
    /// Seconds a stream has from its HEADERS to its last byte of body; past it, RST_STREAM CANCEL
    /// (a byte now and then keeps no request, and its buffer, for ever).
    public var requestSeconds = 20

    public init() {}
}

/// One HTTP/2 connection (server side) framed by libnghttp2, over a plain socket or TLS.
///
/// Threading: one thread per connection runs `run()`, and it alone touches the nghttp2 session
/// and the stream table (the nghttp2 callbacks run inside its `mem_recv`/`mem_send` calls).
/// Other threads talk to it only through `post` (answers, stream wake-ups, GOAWAY, stop), a
/// locked queue plus a pipe that wakes its `poll`. Each stream becomes an `HTTPRequest` for the
/// same handler as HTTP/1.1, answered through an `HTTPResponder` from any thread.
///
/// `@unchecked Sendable`: the mutable state below `inbox` is the connection thread's alone (see
/// above); `inbox` is a `Mutex`, the rest is immutable.
final class HTTP2Connection: @unchecked Sendable {
    enum Message {
        case answer(Int32, HTTPResponse)
        case resume(Int32)
        /// Work handed back to the connection's thread (`HTTPResponder.continueOnConnection`).
        case run(@Sendable (_ inBatch: Bool) -> Void)
        case goAway
        /// Made room for a new connection at the limit: GOAWAY with the idle notice, closed
        /// within a second (as the idle time-out would).
        case evict
        case stop
    }

    /// Posted messages, and whether the connection has ended (its pipe closed): a message posted
    /// after the end is dropped, never written to a closed (or reused) descriptor.
    private let inbox = Mutex<(messages: [Message], ended: Bool)>(([], false))
    /// The pipe that wakes the thread's `poll`: [read end, write end]. Written and closed only
    /// under `inbox`'s lock.
    private let wake: (Int32, Int32)
    let core: ServerCore
    let limits: HTTP2Limits
    let transport: any HTTP2Transport
    private let onEnd: @Sendable (HTTP2Connection) -> Void
    /// Body bytes of answers posted and not yet taken from the inbox (any thread adds, the
    /// connection's thread takes away): they count against `maxUnsentBytes` at once, so a
    /// handler that answers while it is handed the request holds back the next request.
    private let postedBytes = Atomic<Int>(0)

    // The connection thread's own state.
    var session: OpaquePointer?
    var streams: [Int32: HTTP2Stream] = [:]
    /// The stream the last header or data callback found: nghttp2 calls back for one stream's
    /// fields one after another. Cleared wherever a stream leaves `streams` (ids are never
    /// reused on a connection).
    var lastStream: HTTP2Stream?
    /// A request was handed over since `core.afterBatch` was last called.
    var batchPending = false
    /// A limit the peer broke: the connection ends with GOAWAY and this code.
    var fatal: UInt32?
    /// Bytes of the header block being received (HEADERS plus CONTINUATION frames).
    var headerBlockBytes = 0
    /// Rapid-reset budget: tokens left, and when they were last refilled.
    var resetTokens: Double
    var resetRefilledAt = monotonicNanos()
    var sawFrame = false
    /// Body bytes of submitted answers not yet given to nghttp2 (`limits.maxUnsentBytes`).
    var unsentBytes = 0
    /// Since when (monotonic nanoseconds) the connection has had no stream, for the connection
    /// limit to choose whom to close (0: it has streams, or has not started). The connection's
    /// thread writes it; `ServerCore.track` reads it.
    let idleSince = Atomic<UInt64>(0)
    /// Body bytes held by streams not handed to the handler yet (`HTTP2Limits.maxPendingBodyBytes`).
    var pendingBodyBytes = 0
    /// When the streams' deadlines are next looked at (`HTTP2Limits.requestSeconds`).
    private var nextRequestSweep: UInt64 = 0
    /// Complete requests waiting for the answers to drain below `limits.maxUnsentBytes`, in order.
    var waiting: [HTTP2Stream] = []
    private var goingAway = false
    private var stopDeadline: UInt64?
    private var output: [UInt8] = []

    init?(transport: any HTTP2Transport, core: ServerCore, limits: HTTP2Limits,
          onEnd: @escaping @Sendable (HTTP2Connection) -> Void) {
        guard let w = wakePipe() else { return nil }
        wake = w
        self.transport = transport
        self.core = core
        self.limits = limits
        self.onEnd = onEnd
        resetTokens = Double(limits.resetBurst)
    }

    /// Hands a message to the connection's thread (from any thread).
    func post(_ m: Message) {
        let dropped = inbox.withLock { q -> Message? in
            guard !q.ended else { return m }
            q.messages.append(m)
            if q.messages.count == 1 {
                var one: UInt8 = 1
                _ = Glibc.write(wake.1, &one, 1)
            }
            return nil
        }
        if let dropped { Self.discard([dropped]) }
    }

    /// Messages the ended connection will never handle: work handed back runs where it is (it
    /// may still have to answer or commit); the rest has nothing left to reach.
    private static func discard(_ messages: [Message]) {
        for case .run(let body) in messages { body(false) }
    }

    /// The answer to stream `id` (any thread).
    func answer(_ id: Int32, _ response: HTTPResponse) {
        postedBytes.add(response.body.count, ordering: .relaxed)
        post(.answer(id, response))
    }

    /// Whether the answers held unsent leave room for another request to be handled.
    var hasRoomForAnswers: Bool { unsentBytes + postedBytes.load(ordering: .relaxed) <= limits.maxUnsentBytes }

    /// The request of stream `s` is complete: handled now, or once the answers held unsent have
    /// drained below `limits.maxUnsentBytes` (after the requests already waiting).
    func requestComplete(_ s: HTTP2Stream) {
        // A stream reset for being late is not handed over, whatever came after.
        guard !s.cancelled else { return }
        s.complete = true
        if waiting.isEmpty && hasRoomForAnswers {
            dispatch(s)
        } else {
            waiting.append(s)
        }
    }

    /// Hands over the waiting requests the drained answers make room for (a stream the client
    /// reset meanwhile is dropped).
    private func dispatchWaiting() {
        var handed = 0
        while handed < waiting.count && hasRoomForAnswers {
            let s = waiting[handed]
            handed += 1
            if streams[s.id] === s { dispatch(s) }
        }
        if handed > 0 { waiting.removeFirst(handed) }
    }

    /// Serves the connection until it ends, then closes it (on the calling thread).
    func run() {
        defer {
            endBatch()  // what the last requests left pending is not left behind
            for s in streams.values { s.body?.released() }
            streams = [:]
            lastStream = nil
            if let session { nghttp2_session_del(session) }
            session = nil
            transport.close()
            let left = inbox.withLock { q -> [Message] in
                q.ended = true
                defer { q.messages = [] }
                Glibc.close(wake.0)
                Glibc.close(wake.1)
                return q.messages
            }
            Self.discard(left)
            onEnd(self)
        }
        guard startSession() else { return }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var lastActivity = monotonicNanos()
        while true {
            endBatch()
            drainInbox()
            if batchPending {
                // Work handed back to this thread (`.run`) queued sends: commit them, then take
                // the answers that commit posted.
                endBatch()
                drainInbox()
            }
            if let code = fatal {
                nghttp2_session_terminate_session(session, code)
                _ = flush()
                lingeringClose()
                return
            }
            guard flush() else { return }
            if !waiting.isEmpty {
                dispatchWaiting()
                // Their answers, when given at once, are in the inbox: round again before waiting.
                if batchPending { continue }
            }
            if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 { return }
            if let d = stopDeadline, monotonicNanos() > d { return }
            let idle = sawFrame && streams.isEmpty && waiting.isEmpty
            let published = idleSince.load(ordering: .relaxed)
            if idle && published == 0 {
                idleSince.store(lastActivity, ordering: .relaxed)
            } else if !idle && published != 0 {
                idleSince.store(0, ordering: .relaxed)
            }
            if !transport.hasBufferedData {
                var fds = [pollfd(fd: transport.fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wake.0, events: Int16(POLLIN), revents: 0)]
                let ready = poll(&fds, 2, 250)
                if ready < 0 && errno != EINTR { return }
                if fds[1].revents != 0 {
                    var sink = [UInt8](repeating: 0, count: 64)
                    while Glibc.read(wake.0, &sink, 64) > 0 {}
                }
                if fds[0].revents == 0 {
                    cancelLateRequests(now: monotonicNanos())
                    let quiet = monotonicNanos() &- lastActivity
                    let allowed = sawFrame ? (streams.isEmpty ? limits.idleSeconds : limits.idleSeconds * 4) : limits.handshakeSeconds
                    if quiet > UInt64(allowed) * 1_000_000_000 {
                        if !sawFrame { return }
                        goAway(notice: limits.idleNotice)
                        stopDeadline = stopDeadline ?? monotonicNanos() + 1_000_000_000
                    }
                    continue
                }
            }
            let n = buffer.withUnsafeMutableBytes { transport.read($0.baseAddress!, $0.count) }
            if n <= 0 { return }
            lastActivity = monotonicNanos()
            let rv = buffer.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, n) }
            if rv < 0 {
                let limitBroken = rv == FCM_NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || rv == FCM_NGHTTP2_ERR_FLOODED
                fatal = fatal ?? (limitBroken ? FCM_NGHTTP2_ENHANCE_YOUR_CALM : FCM_NGHTTP2_PROTOCOL_ERROR)
            }
            // After the read: a stream it completed is not late (the reset goes out before the
            // next read, so nothing more of a cancelled stream is taken).
            if lastActivity >= nextRequestSweep { cancelLateRequests(now: monotonicNanos()) }
        }
    }

    /// Resets the streams whose request has not arrived whole within `limits.requestSeconds`
    /// (looked at once a second at most).
    private func cancelLateRequests(now: UInt64) {
        nextRequestSweep = now &+ 1_000_000_000
        let allowed = UInt64(limits.requestSeconds) * 1_000_000_000
        // A complete request waiting for its turn (the client has not read the answers before
        // it) is not late: its bytes all came.
        for s in streams.values where !s.complete && !s.cancelled && !s.dispatched && now > s.startedAt && now - s.startedAt > allowed {
            s.cancelled = true
            nghttp2_submit_rst_stream(session, 0, s.id, FCM_NGHTTP2_CANCEL)
        }
    }

    /// Every request of the last read has been handed over: `core.afterBatch`, once for them all.
    private func endBatch() {
        guard batchPending else { return }
        batchPending = false
        core.afterBatch?()
    }

    /// After a GOAWAY for a broken limit: stops writing and reads (and drops) what the client
    /// still sends, up to a second or a megabyte, so closing with unread bytes does not reset
    /// the connection before the client has read the GOAWAY.
    private func lingeringClose() {
        shutdown(transport.fd, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 16 * 1024)
        let deadline = monotonicNanos() + 1_000_000_000
        var total = 0
        while total < 1 << 20 && monotonicNanos() < deadline {
            var p = pollfd(fd: transport.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) >= 0 else { return }
            if p.revents == 0 { continue }
            let n = recv(transport.fd, &sink, sink.count, 0)
            if n <= 0 { return }
            total += n
        }
    }

    /// Creates the nghttp2 session and queues our SETTINGS.
    private func startSession() -> Bool {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { return false }
        defer { nghttp2_session_callbacks_del(callbacks) }
        installCallbacks(callbacks)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { return false }
        defer { nghttp2_option_del(option) }
        // nghttp2's own floods guards stay on, set a little looser than ours so ours answer first.
        nghttp2_option_set_stream_reset_rate_limit(option, UInt64(limits.resetBurst) * 2, UInt64(limits.resetsPerSecond) * 2)
        nghttp2_option_set_max_continuations(option, max(8, limits.maxHeaderListBytes / 4096 + 2))
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_max_outbound_ack(option, 1000)
        // No closed-stream history: priorities are ignored anyway, and it would be memory a
        // client could make us keep.
        nghttp2_option_set_no_closed_streams(option, 1)
        var s: OpaquePointer?
        let me = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new2(&s, callbacks, me, option) == 0, let s else { return false }
        session = s
        var settings = [
            nghttp2_settings_entry(settings_id: FCM_NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, value: limits.maxConcurrentStreams),
            nghttp2_settings_entry(settings_id: FCM_NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, value: UInt32(limits.maxHeaderListBytes)),
        ]
        return nghttp2_submit_settings(s, 0, &settings, settings.count) == 0
    }

    /// Applies what other threads posted.
    private func drainInbox() {
        while true {
            let messages = inbox.withLock { q -> [Message] in defer { q.messages = [] }; return q.messages }
            if messages.isEmpty { return }
            for m in messages {
                switch m {
                case .answer(let id, let r):
                    postedBytes.subtract(r.body.count, ordering: .relaxed)
                    submit(r, to: id)
                case .resume(let id):
                    guard let s = streams[id] else { break }
                    // A cut stream is reset at once: a reader that stopped reading has no window
                    // left, so nghttp2 would not ask for its body again.
                    if s.body?.isCut == true {
                        nghttp2_submit_rst_stream(session, 0, id, FCM_NGHTTP2_CANCEL)
                    } else {
                        nghttp2_session_resume_data(session, id)
                    }
                case .run(let body):
                    body(core.afterBatch != nil)
                    batchPending = true
                case .goAway: goAway()
                case .evict:
                    goAway(notice: limits.idleNotice)
                    // Idle when chosen; a stream that began since is answered before the close.
                    if streams.isEmpty { stopDeadline = stopDeadline ?? monotonicNanos() + 1_000_000_000 }
                case .stop: stopNow()
                }
            }
        }
    }

    /// GOAWAY NO_ERROR naming the last stream taken: the streams in flight are still answered,
    /// new ones are refused, and the connection ends when the last is done. A stopping server's
    /// carries its notice as debug data, an idle connection's `notice`.
    private func goAway(notice idle: [UInt8] = []) {
        guard !goingAway, let session else { return }
        goingAway = true
        let notice = core.refusing.load(ordering: .sequentiallyConsistent) ? core.goAwayNotice.withLock { $0 } : idle
        _ = notice.withUnsafeBufferPointer {
            nghttp2_submit_goaway(session, 0, nghttp2_session_get_last_proc_stream_id(session), FCM_NGHTTP2_NO_ERROR,
                                  $0.baseAddress, $0.count)
        }
    }

    /// The server stops: streams still waiting get the answer their responder holds (else 503),
    /// streaming bodies end, and the connection closes within a second.
    private func stopNow() {
        goAway()
        for s in streams.values {
            if let r = s.responder, !r.isAnswered { r.send(r.answerWhileStopping) }
            s.body?.finish()
        }
        // Requests never handed over get what any request gets once stopping.
        for s in waiting where streams[s.id] === s {
            s.dispatched = true
            submit(ServerCore.shuttingDown, to: s.id)
        }
        waiting = []
        stopDeadline = stopDeadline ?? monotonicNanos() + 1_000_000_000
    }

    /// Writes what nghttp2 has queued; false when the peer is gone.
    private func flush() -> Bool {
        guard let session else { return false }
        output.removeAll(keepingCapacity: true)
        while true {
            var p: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &p)
            if n < 0 { return false }
            if n == 0 || p == nil { break }
            output.append(contentsOf: UnsafeBufferPointer(start: p, count: n))
            if output.count >= 64 * 1024 {
                guard output.withUnsafeBytes({ transport.write($0) }) else { return false }
                output.removeAll(keepingCapacity: true)
            }
        }
        if output.isEmpty { return true }
        return output.withUnsafeBytes { transport.write($0) }
    }
}

/// One request stream: what the callbacks collect, then the answer being sent.
final class HTTP2Stream {
    let id: Int32
    var method = ""
    var path = ""
    var authority: String?
    var headers: [(name: String, value: String)] = []
    var headerListBytes = 0
    var headersTooLarge = false
    var requestBody: [UInt8] = []
    var bodyTooLarge = false
    /// The request has come whole (END_STREAM).
    var complete = false
    /// Reset for not coming whole in time (`HTTP2Limits.requestSeconds`).
    var cancelled = false
    var dispatched = false
    var responder: HTTPResponder?
    let startedAt = monotonicNanos()
    var authorization: String?
    /// The answer's body and how much of it is sent, or a streaming body.
    var responded = false
    var out: [UInt8] = []
    var sent = 0
    var body: HTTPStream?

    init(id: Int32) { self.id = id }
}
