// The WebSocket half of an HTTP/1.1 connection: the 101 that upgrades it, then its frames read
// from the same input buffer, its answers written through the same output, its deadlines checked
// by the loop's sweep, and its one end, all on the connection's loop thread.
import Platform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An upgraded connection's state (its loop thread only).
final class WebSocketSession {
    let ws: WebSocketConnection
    let handler: any WebSocketHandler
    let options: WebSocketOptions
    var reader: WebSocketReader
    let openedAt: UInt64
    /// A whole text message came (the first-message deadline is met).
    var gotMessage = false
    /// When the closing handshake began (our close frame queued, or the client's echoed): the
    /// TCP connection ends by two seconds later.
    var closingSince: UInt64?
    /// The client's close was echoed: the TCP connection ends once the echo is written.
    var closeAfterWrite = false
    /// `handler.closed` was called and the server's count went down.
    var reported = false

    init(ws: WebSocketConnection, accept: WebSocketAccept, now: UInt64) {
        self.ws = ws
        handler = accept.handler
        options = accept.options
        reader = WebSocketReader(maxMessageBytes: accept.options.maxMessageBytes)
        openedAt = now
    }
}

extension HTTP1Connection {
    /// Unsent bytes past which a WebSocket client that does not read is dropped (reading its
    /// frames stops earlier, at `maxUnsentBytes`, as for HTTP).
    static let maxUnsentWebSocketBytes = 4 * 1024 * 1024
    /// How long the closing handshake may take before the TCP connection is closed anyway.
    static let closingNanos: UInt64 = 2_000_000_000

    // MARK: the upgrade

    /// The answer of a request that asked for a WebSocket, or a 101 for any request: a 101 for
    /// an upgrade request opens the WebSocket (or becomes 503 past the server's limit, or while
    /// stopping); a 101 anywhere else becomes 426; any other answer is written as it is, and the
    /// bytes behind the request are then read as HTTP.
    func writeUpgradeAnswer(_ r: HTTPResponse, for slot: Slot, date: [UInt8]) -> Bool {
        var plain = slot
        plain.upgrade = false
        if slot.upgrade {
            upgradePending = false
            readBlocked = true  // `flush` parses what waited behind the request, unless upgraded
        }
        guard let accept = r.webSocket else { return write(r, for: plain, date: date) }
        guard slot.upgrade, slot.keepAlive, slot.chunkedOK, !peerDone, !closeWhenDone else {
            return write(WebSocketUpgrade.notUpgradable, for: plain, date: date)
        }
        if loop.isStopping { return write(ServerCore.shuttingDown, for: plain, date: date) }
        let core = loop.core
        guard core.webSockets.add(1, ordering: .relaxed).newValue <= core.maxWebSockets else {
            core.webSockets.subtract(1, ordering: .relaxed)
            return write(WebSocketUpgrade.tooMany, for: plain, date: date)
        }
        var head = r
        head.webSocket = nil
        guard write(head, for: plain, date: date) else {
            core.webSockets.subtract(1, ordering: .relaxed)
            return false
        }
        readBlocked = false
        noMoreRequests = true
        let now = monotonicNanos()
        let ws = WebSocketConnection(remote: remote ?? peerAddress(of: fd), isSecure: secure, connection: self, now: now)
        let session = WebSocketSession(ws: ws, accept: accept, now: now)
        webSocket = session
        accept.handler.opened(ws)
        // Bytes read behind the request are its first frames.
        parseFrames(session)
        return true
    }

    // MARK: reading

    /// Reads what the socket has and hands each frame on; stops while too much is unsent (a
    /// client that sends without reading), and at the end of input.
    func readWebSocket(_ scratch: inout [UInt8], shortReadDrains: Bool) {
        while !closed, let s = webSocket, !s.closeAfterWrite {
            if output.count - sent > Self.maxUnsentBytes {
                readBlocked = true
                return
            }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                if taken == input.count {
                    input.removeAll(keepingCapacity: input.capacity <= 16 * 1024)
                    taken = 0
                } else if taken > 64 * 1024 {
                    input.removeFirst(taken)
                    taken = 0
                }
                input.append(contentsOf: scratch[0..<n])
                parseFrames(s)
                if shortReadDrains && n < scratch.count { return }
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            peerDone = true
            closeNow()  // the room hears 1006, unless it heard of a close already
            return
        }
    }

    /// Takes every complete frame out of `input`.
    private func parseFrames(_ s: WebSocketSession) {
        while !closed, webSocket === s, !s.closeAfterWrite, taken < input.count {
            let (used, event) = input.withUnsafeBufferPointer { all in
                s.reader.next(UnsafeBufferPointer(rebasing: all[taken...]))
            }
            taken += used
            if let event {
                handle(event, s)
            } else if used == 0 {
                return
            }
        }
    }

    /// What one frame from the client does.
    private func handle(_ event: WebSocketEvent, _ s: WebSocketSession) {
        if s.closingSince != nil {
            // Our close is out: the client's close (or anything it cannot read as one) ends it.
            switch event {
            case .close, .failure: closeNow(lingering: true)
            default: break
            }
            return
        }
        if case .failure(let code, let reason) = event { return beginClose(s, code: code, reason: reason) }
        s.ws.sawFrame(at: monotonicNanos())
        s.handler.sawFrame(on: s.ws)
        switch event {
        case .text(let text):
            s.gotMessage = true
            s.handler.received(text, on: s.ws)
        case .ping(let payload):
            takeOutbox(s)  // messages the room sent before come first
            guard !closed, s.closingSince == nil else { return }
            WebSocketFrames.append(opcode: WebSocketOpcode.pong, payload: payload, into: &output)
            loop.markDirty(self)
        case .close(let code, let reason):
            // Echo its code (none when it sent none), then close once the echo is written.
            WebSocketFrames.append(opcode: WebSocketOpcode.close, payload: WebSocketFrames.closePayload(code: code, reason: ""),
                                   into: &output)
            s.closingSince = monotonicNanos()
            s.closeAfterWrite = true
            s.reader.closing = true
            webSocketEnded(s, code: code ?? 1005, reason: reason)
            loop.markDirty(self)
        case .fragment, .pong, .failure:
            break
        }
    }

    // MARK: writing and closing

    /// The loop's turn for an upgraded connection: what other threads queued, written; the close
    /// that waited for it; reading again once the client has read enough.
    func flushWebSocket(_ s: WebSocketSession) {
        takeOutbox(s)
        guard !closed, send() else { return }
        if s.closeAfterWrite && sent == output.count {
            closeNow(lingering: true)
            return
        }
        if output.count - sent > Self.maxUnsentWebSocketBytes {
            // The client reads nothing: it cannot be told either.
            webSocketEnded(s, code: 1006, reason: "client does not read")
            closeNow()
            return
        }
        if readBlocked && output.count - sent <= Self.maxUnsentBytes && s.closingSince == nil {
            readBlocked = false
            loop.readAgain(self)
        }
    }

    /// Moves the frames other threads queued into `output`, and starts the close one asked for.
    private func takeOutbox(_ s: WebSocketSession) {
        let (frames, close, overflowed) = s.ws.takeOutbox()
        if overflowed {
            webSocketEnded(s, code: 1006, reason: "client does not read")
            closeNow()
            return
        }
        if s.closingSince == nil { output.append(contentsOf: frames) }
        if let close { beginClose(s, code: close.code, reason: close.reason) }
    }

    /// The server closes: its close frame, no more data frames read, the TCP connection closed
    /// after the client's close or `closingNanos`.
    func beginClose(_ s: WebSocketSession, code: UInt16, reason: String) {
        guard s.closingSince == nil, !closed else { return }
        s.closingSince = monotonicNanos()
        s.reader.closing = true
        WebSocketFrames.append(opcode: WebSocketOpcode.close, payload: WebSocketFrames.closePayload(code: code, reason: reason),
                               into: &output)
        webSocketEnded(s, code: code, reason: reason)
        loop.markDirty(self)
    }

    /// The server stops: close 1001.
    func closeWebSocketWhileStopping(_ s: WebSocketSession) {
        takeOutbox(s)
        beginClose(s, code: 1001, reason: "server shutting down")
    }

    /// The room hears of the end once, and the server's count goes down once.
    func webSocketEnded(_ s: WebSocketSession, code: UInt16, reason: String) {
        guard !s.reported else { return }
        s.reported = true
        s.ws.markEnded()
        loop.core.webSockets.subtract(1, ordering: .relaxed)
        s.handler.closed(s.ws, code: code, reason: reason)
    }

    /// The loop's once-a-second sweep: the closing handshake's time, then the first-message and
    /// idle deadlines.
    func sweepWebSocket(_ s: WebSocketSession, now: UInt64) {
        if let since = s.closingSince {
            if now &- since > Self.closingNanos { closeNow() }
            return
        }
        if let seconds = s.options.firstMessageSeconds, !s.gotMessage, now &- s.openedAt >= UInt64(max(0, seconds)) * 1_000_000_000 {
            return beginClose(s, code: 1008, reason: s.options.firstMessageReason)
        }
        if now &- s.ws.lastFrameAtNanos >= UInt64(max(0, s.options.idleSeconds)) * 1_000_000_000 {
            beginClose(s, code: 1000, reason: "idle")
        }
    }
}
