// Long because: one connection's reading, request order, answers, streams and closing share its state and belong together.
import Synchronization
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 connection of the plain port, served by an `HTTP1Loop`: its bytes in, the
/// requests read from them, and their answers out, in request order.
///
/// Requests are handed to the handler as soon as they are complete, pipelined ones too (up to
/// `maxInFlight` waiting at once); each gets a slot, and answers are written slot by slot, so a
/// late answer holds back only the ones after it on its own connection.
///
/// `@unchecked Sendable`: a responder on any thread holds the connection, but every mutable
/// field is touched only by its loop's thread (answers from other threads are posted to the
/// loop); `fd` and `loop` are immutable.
final class HTTP1Connection: @unchecked Sendable {
    let fd: Int32
    let loop: HTTP1Loop

    /// A request handed over, waiting for (or holding) its answer.
    struct Slot {
        let responder: HTTPResponder?
        var response: HTTPResponse?
        let isHead: Bool
        let keepAlive: Bool
        let chunkedOK: Bool
        /// The request asks for a WebSocket: nothing behind it is read as HTTP until its answer
        /// says whether the connection is upgraded.
        var upgrade = false
        // For the access log (set only when it is on).
        var method = ""
        var path = ""
        var authorization: String?
        var startedAt: UInt64 = 0
    }

    enum Phase {
        case head
        case body(left: Int)
        case chunked
    }

    /// Waiting requests per connection before reading stops (pipelining depth).
    static let maxInFlight = 32
    /// Largest request head (request line and fields): beyond, 431.
    static let maxHeadBytes = 64 * 1024
    /// Requests with a larger body are handled on a worker thread, not on the loop.
    static let offLoopBodyBytes = 16 * 1024

    // (Internal rather than private where HTTP1Connection+WebSocket.swift, the connection's
    // WebSocket half, uses them.)
    var input: [UInt8] = []
    /// Bytes of `input` already taken; where the search for the head's end resumes.
    var taken = 0
    private var scanned = 0
    private var phase = Phase.head
    private var head = HTTP1Head()
    private var body: [UInt8] = []
    private var bodyBytes = 0
    private var tooLarge = false
    private var chunks = ChunkedDecoder()
    private var continuePending = false

    private var slots: [Slot] = []
    private var firstSeq: UInt64 = 0
    private var nextSeq: UInt64 = 0

    var output: [UInt8] = []
    var sent = 0
    /// The answer streaming now (server-sent events), and whether its body is chunked (an
    /// HTTP/1.0 client's ends with the connection, which `closeWhenDone` then says).
    private var streaming: (stream: HTTPStream, chunked: Bool)?
    /// No more requests are read (a refusal, `Connection: close`, HTTP/1.0, end of input).
    var noMoreRequests = false
    /// Close once everything queued is written.
    var closeWhenDone = false
    var peerDone = false
    /// Reading stopped with bytes possibly left in the socket (too many requests waiting): with
    /// edge-triggered epoll nothing says so again, so `flush` reads once answers made room.
    var readBlocked = false
    /// A request asking for a WebSocket waits for its answer (see `Slot.upgrade`).
    var upgradePending = false
    /// Set once the connection is upgraded: it speaks WebSocket from then on.
    var webSocket: WebSocketSession?
    private(set) var closed = false
    /// Closed for answers, our side shut, the client's last bytes being read and dropped until
    /// it closes or this moment passes (see `closeNow(lingering:)`).
    private(set) var lingerUntil: UInt64?
    var isDirty = false
    var lastActivity = monotonicNanos()
    /// When the clock of the request head awaited started (nil: none awaited on a clock; see
    /// `updateHeadClock`), and the neighbours in the loop's list of such connections.
    private(set) var headSince: UInt64?
    /// The clock runs for a request's body (its head came whole), not for a head.
    private var clockOnBody = false
    weak var waitingPrevious: HTTP1Connection?
    var waitingNext: HTTP1Connection?

    init(fd: Int32, loop: HTTP1Loop, secure: Bool, remote: String? = nil) {
        self.fd = fd
        self.loop = loop
        self.secure = secure
        self.remote = remote
    }

    /// The client's bytes came over TLS (a socket pair a TLS connection's thread pumps).
    let secure: Bool
    /// The client's address when `fd` is not its socket (the TLS client behind a socket pair).
    let remote: String?

    /// Nothing owed and nothing open: an upgraded connection never is, until it closes.
    var isIdle: Bool { webSocket == nil && slots.isEmpty && streaming == nil && sent == output.count }
    /// Answers wait in `output` for a client that does not read them.
    var isStalled: Bool { sent < output.count }
    /// Unsent answer bytes past which no more requests are read (a client that sends without
    /// reading cannot make the server hold its answers without bound).
    static let maxUnsentBytes = 256 * 1024

    // MARK: reading

    /// Reads everything the socket has (edge-triggered), handing complete requests over.
    /// `shortReadDrains`: a read that fills less than `scratch` took all there was, so no read
    /// follows to hear `EAGAIN` (one system call less per request). Bytes that arrive later raise
    /// a new edge; only the end of input, when it came with this event (`EPOLLRDHUP`), would not
    /// be reported again, so the caller passes false then, and wherever no event prompted the read.
    func readAvailable(into scratch: inout [UInt8], shortReadDrains: Bool = false) {
        if lingerUntil != nil { return drainLingering(&scratch) }
        if webSocket != nil { return readWebSocket(&scratch, shortReadDrains: shortReadDrains) }
        defer { updateHeadClock() }
        while !closed && !peerDone {
            if noMoreRequests { return }
            if slots.count >= Self.maxInFlight || input.count - taken > 4 * Self.maxHeadBytes
                || output.count - sent > Self.maxUnsentBytes {
                // Stop reading for now; `flush` reads again once answers have gone out.
                readBlocked = true
                return
            }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                lastActivity = monotonicNanos()
                if taken == input.count {
                    // A large body's room is given back; a usual request's is kept.
                    input.removeAll(keepingCapacity: input.capacity <= 16 * 1024)
                    taken = 0
                    scanned = 0
                } else if taken > 64 * 1024 {
                    input.removeFirst(taken)
                    scanned -= taken
                    taken = 0
                }
                input.append(contentsOf: scratch[0..<n])
                parse()
                if shortReadDrains && n < scratch.count {
                    // Requests parse left in `input` (past `maxInFlight`) are taken up by `flush`
                    // once answers make room: no event will say so again.
                    if slots.count >= Self.maxInFlight { readBlocked = true }
                    return
                }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            // End of input (or an error): answers still owed are written, then the connection
            // closes; with none owed it closes now. A stream being sent is never done: its reader
            // closing is its leaving (an event-stream reader's place is free at once, not when a
            // write fails).
            peerDone = true
            noMoreRequests = true
            closeWhenDone = true
            if n < 0 || isIdle || streaming != nil { closeNow() } else { loop.markDirty(self) }
        }
    }

    /// Takes complete requests out of `input`.
    private func parse() {
        while !noMoreRequests && !closed && !upgradePending && slots.count < Self.maxInFlight {
            switch phase {
            case .head:
                let end: Int? = input.withUnsafeBufferPointer { HTTP1Parser.headEnd($0, from: Swift.max(taken, scanned - 2)) }
                guard let end else {
                    scanned = input.count
                    if input.count - taken > Self.maxHeadBytes { refuse(.headTooLarge) }
                    return
                }
                if end - taken > Self.maxHeadBytes {
                    refuse(.headTooLarge)
                    return
                }
                let parsed = input.withUnsafeBufferPointer { all -> Result<HTTP1Head, HTTP1Refusal> in
                    do throws(HTTP1Refusal) {
                        return .success(try HTTP1Parser.parseHead(UnsafeBufferPointer(rebasing: all[taken..<end])))
                    } catch {
                        return .failure(error)
                    }
                }
                taken = end
                scanned = end
                switch parsed {
                case .failure(let why):
                    refuse(why)
                    return
                case .success(let h):
                    head = h
                }
                switch head.framing {
                case .none:
                    dispatch()
                case .length(let n):
                    phase = .body(left: n)
                    if head.expectsContinue && input.count - taken < n { askForBody() }
                case .chunked:
                    phase = .chunked
                    chunks = ChunkedDecoder()
                    if head.expectsContinue && input.count == taken { askForBody() }
                }
            case .body(let left):
                let n = Swift.min(left, input.count - taken)
                if n > 0 { input.withUnsafeBufferPointer { takeBody(UnsafeBufferPointer(rebasing: $0[taken..<(taken + n)])) } }
                taken += n
                scanned = taken
                guard n == left else {
                    phase = .body(left: left - n)
                    return
                }
                dispatch()
            case .chunked:
                var failure: HTTP1Refusal?
                let used = input.withUnsafeBufferPointer { all -> Int in
                    do throws(HTTP1Refusal) {
                        return try chunks.feed(UnsafeBufferPointer(rebasing: all[taken...])) { takeBody($0) }
                    } catch {
                        failure = error
                        return 0
                    }
                }
                if let failure {
                    refuse(failure)
                    return
                }
                taken += used
                scanned = taken
                guard chunks.state == .done else { return }
                dispatch()
            }
        }
    }

    /// Starts or stops the request's clock (`HTTP1Limits.headTimeoutMillis`): it runs while a new
    /// connection has sent no complete head yet, or bytes of a head wait with no answer owed
    /// before them, and again, from the head's end, while its body arrives (a byte now and then
    /// keeps no body open for ever); a connection idle after its answers, with nothing sent, is
    /// not on it.
    func updateHeadClock() {
        var waiting = false
        var onBody = false
        if !closed, !noMoreRequests, slots.isEmpty, streaming == nil {
            switch phase {
            case .head: waiting = input.count > taken || nextSeq == 0
            case .body, .chunked: (waiting, onBody) = (true, true)
            }
        }
        if waiting && (headSince == nil || onBody != clockOnBody) {
            if headSince != nil { loop.stopWaiting(self) }
            headSince = monotonicNanos()
            clockOnBody = onBody
            loop.startWaiting(self)
        } else if !waiting && headSince != nil {
            headSince = nil
            loop.stopWaiting(self)
        }
    }

    /// The request's time is up: 408 when some of it came (then the connection closes), else a
    /// plain close (a client that said nothing gets no answer it did not ask for).
    func headTimedOut() {
        headSince = nil
        loop.stopWaiting(self)
        if clockOnBody { refuse(.bodyTimeout) } else if input.count > taken { refuse(.headTimeout) } else { closeNow() }
    }

    private func takeBody(_ bytes: UnsafeBufferPointer<UInt8>) {
        bodyBytes += bytes.count
        guard !tooLarge else { return }
        if bodyBytes > loop.core.maxBodyBytes {
            // Read and dropped to its end, so the answer (413 from the handler) leaves the
            // connection usable.
            tooLarge = true
            body = []
        } else {
            body.append(contentsOf: bytes)
        }
    }

    /// `Expect: 100-continue`: the interim answer, once the answers before it are out.
    private func askForBody() {
        continuePending = true
        loop.markDirty(self)
    }

    /// The request is complete: a slot, then the handler.
    private func dispatch() {
        var request = HTTPRequest(method: head.method, path: head.path, rawQuery: head.rawQuery, headers: head.headers,
                                  body: body, bodyTooLarge: tooLarge)
        request.inBatch = loop.core.afterBatch != nil
        request.isSecure = secure
        request.isHTTP10 = head.minorVersion == 0
        let keepAlive = head.keepAlive
        let isHead = head.isHead
        let chunkedOK = head.minorVersion == 1
        phase = .head
        head = HTTP1Head()
        body = []
        bodyBytes = 0
        tooLarge = false
        continuePending = false
        if !keepAlive { noMoreRequests = true }
        let seq = nextSeq
        nextSeq += 1
        let responder = HTTPResponder(http1: HTTP1Target(connection: self, seq: seq))
        var slot = Slot(responder: responder, isHead: isHead, keepAlive: keepAlive, chunkedOK: chunkedOK)
        if request.method == "GET" && WebSocketUpgrade.isUpgrade(request) {
            // What follows may be the first frames: read as HTTP only if the answer is no 101.
            slot.upgrade = true
            upgradePending = true
        }
        let core = loop.core
        if core.accessLog != nil {
            slot.method = request.method
            slot.path = request.path
            slot.authorization = request.header("Authorization")
            slot.startedAt = monotonicNanos()
        }
        slots.append(slot)
        core.handing.add(1, ordering: .sequentiallyConsistent)
        if core.refusing.load(ordering: .sequentiallyConsistent) || loop.isStopping {
            core.handing.subtract(1, ordering: .sequentiallyConsistent)
            responder.send(ServerCore.shuttingDown)
            return
        }
        if request.body.count > Self.offLoopBodyBytes {
            // A large body (a multicast to a thousand tokens) takes milliseconds to handle: on a
            // worker, so the loop's other requests are not held up behind it, and several such
            // run on both cores at once. It commits its own writes (not `inBatch`).
            request.inBatch = false
            let own = request
            loop.workers.run {
                core.handler(own, responder)
                core.handing.subtract(1, ordering: .sequentiallyConsistent)
            }
            return
        }
        loop.batchPending = true
        core.handler(request, responder)
        core.handing.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// A request that cannot be served: its status, and the connection closes after it.
    private func refuse(_ why: HTTP1Refusal) {
        noMoreRequests = true
        continuePending = false
        var r = HTTPResponse(status: why.status, contentType: "text/plain; charset=UTF-8", body: why.text)
        r.closeConnection = true
        slots.append(Slot(responder: nil, response: r, isHead: false, keepAlive: false, chunkedOK: false))
        nextSeq += 1
        loop.markDirty(self)
    }

    // MARK: answering

    /// The answer of request `seq` (on the loop's thread).
    func answered(_ seq: UInt64, _ response: HTTPResponse) {
        let i = seq >= firstSeq ? Int(seq - firstSeq) : -1
        guard !closed, i >= 0, i < slots.count, slots[i].response == nil else {
            response.stream?.released()  // never sent: its producer learns the reader is gone
            return
        }
        slots[i].response = response
        loop.markDirty(self)
    }

    /// Every slot still waiting gets what a stopping server sends (its decided answer, else 503).
    func answerWaitingWhileStopping() {
        if let ws = webSocket { return closeWebSocketWhileStopping(ws) }
        for s in slots where s.response == nil {
            if let r = s.responder { r.send(r.answerWhileStopping) }
        }
    }

    /// Writes the answers that are ready, in order, and whatever a stream has; closes when done.
    func flush(date: [UInt8]) {
        guard !closed else { return }
        if let ws = webSocket { return flushWebSocket(ws) }
        // The last answer out starts the clock of a head already (partly) read behind it.
        defer { updateHeadClock() }
        var progressed = true
        while progressed && !closed {
            progressed = false
            if streaming != nil {
                pullStream()
                if closed { return }
                if streaming != nil { break }
            }
            while streaming == nil, let first = slots.first, let r = first.response {
                slots.removeFirst()
                firstSeq += 1
                progressed = true
                if !write(r, for: first, date: date) { return }
            }
        }
        if slots.isEmpty && continuePending && streaming == nil {
            continuePending = false
            output.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
        }
        guard send() else { return }
        if closeWhenDone && slots.isEmpty && streaming == nil && sent == output.count {
            closeNow(lingering: !peerDone)
            return
        }
        // Answers made room: read what waited behind them.
        if readBlocked && !noMoreRequests && !peerDone && slots.count < Self.maxInFlight
            && output.count - sent <= Self.maxUnsentBytes {
            readBlocked = false
            parse()
            loop.readAgain(self)
        }
    }

    /// Queues one answer's bytes; false when the connection was closed instead.
    func write(_ r: HTTPResponse, for slot: Slot, date: [UInt8]) -> Bool {
        if slot.upgrade || r.webSocket != nil { return writeUpgradeAnswer(r, for: slot, date: date) }
        if let log = loop.core.accessLog, slot.responder != nil {
            log(HTTPAccess(method: slot.method, path: slot.path, status: r.abort ? 0 : r.status,
                           bytes: r.stream == nil ? r.body.count : -1, authorization: slot.authorization,
                           nanos: monotonicNanos() &- slot.startedAt))
        }
        if r.abort {
            _ = send()
            closeNow()
            return false
        }
        // An HTTP/1.0 client's stream can only end with the connection.
        let chunked = slot.chunkedOK
        let close = !slot.keepAlive || r.closeConnection || (r.stream != nil && !chunked)
        if close {
            noMoreRequests = true
            closeWhenDone = true
            continuePending = false
            // Nothing after this answer is sent: requests read behind it are dropped.
            dropSlots()
        }
        if let stream = r.stream {
            HTTP1Answer.appendHead(status: r.status, headers: r.headers, length: nil, chunked: chunked,
                                   close: close, date: date, into: &output)
            if slot.isHead {
                stream.released()
                return true
            }
            streaming = (stream, chunked)
            let loop = self.loop
            stream.state.withLock { $0.wake = { [self] in loop.post(.resume(self)) } }
            loop.core.track(stream)
            pullStream()
            return !closed
        }
        HTTP1Answer.appendHead(status: r.status, headers: r.headers, length: r.body.count, chunked: false, close: close,
                               keepAlive10: !slot.chunkedOK, date: date, into: &output)
        // HEAD, 1xx, 204 and 304 answers carry no body (RFC 9110 §6.4.1).
        if !slot.isHead && r.status != 204 && r.status != 304 && r.status >= 200 { output.append(contentsOf: r.body) }
        return true
    }

    /// Moves what the streaming answer has into `output` (chunked on HTTP/1.1).
    private func pullStream() {
        guard let (stream, chunked) = streaming else { return }
        if stream.isCut {
            // Its producer let the reader go: so does the connection, with what it still held.
            closeNow()
            return
        }
        while output.count - sent < 256 * 1024 {
            let (bytes, end) = stream.nextBytes(max: 16 * 1024)
            if !bytes.isEmpty {
                if chunked {
                    HTTP1Answer.appendHex(bytes.count, into: &output)
                    output.append(contentsOf: "\r\n".utf8)
                    output.append(contentsOf: bytes)
                    output.append(contentsOf: "\r\n".utf8)
                } else {
                    output.append(contentsOf: bytes)
                }
            }
            if end {
                if chunked { output.append(contentsOf: "0\r\n\r\n".utf8) }
                streaming = nil
                stream.released()
                return
            }
            if bytes.isEmpty { return }  // suspended until the stream wakes the loop
        }
    }

    /// Writes `output`; false when the connection failed (and was closed).
    func send() -> Bool {
        while sent < output.count {
            let n = output.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                lastActivity = monotonicNanos()
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                // EPOLLOUT comes back; what is sent already is not kept meanwhile.
                if sent > 64 * 1024 {
                    output.removeFirst(sent)
                    sent = 0
                }
                return true
            }
            closeNow()
            return false
        }
        output.removeAll(keepingCapacity: output.capacity <= 16 * 1024)
        sent = 0
        return true
    }

    /// Requests behind a closing answer are never answered: their streams are released.
    private func dropSlots() {
        for slot in slots { slot.response?.stream?.released() }
        slots.removeAll()
    }

    /// Closes the connection for answers (later ones are dropped, streams released).
    /// `lingering`: after the last answer the client may still be sending (requests behind a
    /// `Connection: close`, a refused body); closing with unread bytes would reset the
    /// connection and could destroy the answer in the client's buffers, so our side is shut
    /// first and what the client still sends is read and dropped until it closes, for at most
    /// two seconds.
    func closeNow(lingering: Bool = false) {
        guard !closed else { return }
        closed = true
        if let ws = webSocket {
            // However it ends, the room hears of it once (nothing if it heard already).
            webSocketEnded(ws, code: 1006, reason: "connection lost")
            webSocket = nil
        }
        if headSince != nil {
            headSince = nil
            loop.stopWaiting(self)
        }
        dropSlots()
        if let s = streaming?.stream { s.released() }
        streaming = nil
        input = []
        output = []
        sent = 0
        if lingering {
            shutdown(fd, Int32(SHUT_WR))
            lingerUntil = monotonicNanos() + 2_000_000_000
            var scratch = [UInt8](repeating: 0, count: 4096)
            drainLingering(&scratch)
        } else {
            release()
        }
    }

    /// Reads and drops what a lingering client sends; closes at its end of input.
    private func drainLingering(_ scratch: inout [UInt8]) {
        while lingerUntil != nil {
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 { continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            release()
        }
    }

    /// A lingering connection whose time is up, or any connection at stop: the descriptor goes.
    func abandon() {
        if !closed { closeNow() } else if lingerUntil != nil { release() }
    }

    /// Gives the descriptor back and leaves the loop's table.
    private func release() {
        lingerUntil = nil
        loop.forget(self)
        close(fd)
    }
}

/// The request an HTTP/1.1 responder answers: its connection and its place in the connection's
/// order.
struct HTTP1Target: Sendable {
    let connection: HTTP1Connection
    let seq: UInt64
}
