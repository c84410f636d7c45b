// This file is long because XMPPConnection's locking rules (what only `lock` guards,
// what the reader thread alone touches, who may write the socket when) hold across its send
// path and its reader, and read best in one place; split into extensions, its private state
// would have to open to the whole module.

import Platform
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// One client connection. The reader thread alone touches the parser and the session's phase;
/// any thread may send.
///
/// Sending never blocks the caller (acks come from the store's writer thread, which serves
/// every connection and every HTTP request): bytes go out at once when the socket takes them,
/// and what it does not take waits in `outbox` for a flusher thread, started when needed, that
/// writes with blocking calls. A peer that leaves more than `maxUnsentBytes` unread, or reads
/// nothing for `sendTimeout` seconds, is disconnected. Over TLS every write goes through the
/// flusher (a TLS record cannot be half-sent without blocking).
///
/// `@unchecked Sendable`: `fd` is immutable; `session`, `outbox`, `flushing` and
/// `shutDownWhenFlushed` are reached only under `lock`; `tls` is set by the reader thread before
/// anything can be sent, and then only read.
public final class XMPPConnection: @unchecked Sendable {
    public let id: String
    let fd: Int32
    unowned let server: XMPPServer
    private let lock = ConditionLock()
    private var session = Session()
    /// The TLS session when the listener speaks TLS; set by the reader thread before anything else
    /// can write.
    private var tls: TLSSession?
    /// Bytes accepted for sending that the socket has not taken yet.
    private var outbox: [UInt8] = []
    /// A flusher thread owns the socket's sending side: nobody else writes until it is done.
    private var flushing = false
    /// The stream is closed: the flusher shuts the socket down once `outbox` is written.
    private var shutDownWhenFlushed = false
    /// Bytes the flusher is writing now (taken out of `outbox`, still unsent).
    private var writing = 0
    /// How long an idle flusher of a TLS connection waits for more before it ends.
    static let flusherLinger: UInt64 = 2_000_000_000
    /// How long the answers to a client's last messages may take after it ended its stream.
    static let answersAfterStreamEnd: UInt64 = 10_000_000_000
    /// Unsent bytes a peer may leave waiting before it is disconnected as not reading.
    static let maxUnsentBytes = 16 << 20
    /// Seconds a blocked write may wait for the peer to read before it is disconnected.
    static let sendTimeout = 60

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
        var tv = timeval(tv_sec: Self.sendTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The account it authenticated as (nil before SASL success).
    public var account: String? { lock.withLock { session.account } }
    /// The bound resource.
    public var resource: String? { lock.withLock { session.resource } }

    /// Sends raw XML (a stanza or stream-level element). Ignored once closed.
    public func send(_ xml: String) {
        lock.withLock {
            guard !session.closed else { return }
            enqueue(Array(xml.utf8))
        }
    }

    /// Ends the stream: an optional stream error condition, `</stream:stream>`, then the socket
    /// (once what was sent before has gone out).
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
            session.closed = true
            lock.broadcast()  // a reader waiting for the answers after the client's stream end
            enqueue(Array(out.utf8))
            if flushing {
                shutDownWhenFlushed = true
            } else {
                shutdown(fd, Int32(SHUT_RDWR))
            }
        }
    }

    /// Drops the connection without ending the stream (no `</stream:stream>`, no TLS close): what
    /// a network failure looks like to the peer. Nothing still unsent goes out.
    public func drop() {
        lock.withLock {
            guard !session.closed else { return }
            abandon()
        }
    }

    /// Ends the stream with a stream error, first opening it when the peer never got a header:
    /// how every refusal of the connection itself ends.
    func end(error condition: String, text: String) {
        if lock.withLock({ session.phase == .awaitingStream }) { openStream(to: "") }
        close(error: condition, text: text)
    }

    /// Nothing more goes out, the socket is shut down and waiters wake. Called under `lock`.
    private func abandon() {
        session.closed = true
        outbox = []
        shutdown(fd, Int32(SHUT_RDWR))
        lock.broadcast()
    }

    /// Sends `bytes` after what is already waiting, without blocking. Called under `lock`.
    private func enqueue(_ bytes: [UInt8]) {
        // A TLS listener's connection before its handshake (stopped or refused meanwhile): nothing
        // in clear text goes out.
        if server.tls != nil && tls == nil { return }
        var rest = bytes[...]
        if !flushing && tls == nil {
            while !rest.isEmpty {
                let n = rest.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if n > 0 {
                    rest = rest.dropFirst(n)
                } else if n < 0 && errno == EINTR {
                    continue
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    break
                } else {
                    return  // the peer is gone; the reader finds out
                }
            }
            if rest.isEmpty { return }
        }
        outbox.append(contentsOf: rest)
        if outbox.count + writing > Self.maxUnsentBytes {
            // A peer that does not read: disconnected rather than buffered without end.
            return abandon()
        }
        if flushing {
            lock.broadcast()  // a lingering flusher
        } else {
            flushing = true
            // No thread to be had (a process or address-space limit): this connection is dropped,
            // the server goes on.
            if !trySpawnThread({ [self] in flush() }) {
                flushing = false
                abandon()
            }
        }
    }

    /// The flusher: writes `outbox` with blocking calls until it is empty, then ends.
    private func flush() {
        enum Next { case write([UInt8]), finishClosing, done }
        while true {
            let next: Next = lock.withLock {
                if outbox.isEmpty && tls != nil && !session.closed {
                    // Over TLS every send goes through here: stay a while for the next one
                    // rather than start a thread per ack.
                    lock.wait(untilMonotonicNanos: monotonicNanos() + Self.flusherLinger)
                }
                if outbox.isEmpty {
                    if shutDownWhenFlushed {
                        shutDownWhenFlushed = false
                        return .finishClosing  // still `flushing`: nobody else writes
                    }
                    flushing = false
                    lock.broadcast()
                    return .done
                }
                defer {
                    writing = outbox.count
                    outbox = []
                }
                return .write(outbox)
            }
            switch next {
            case .done:
                return
            case .finishClosing:
                // Not under the lock: a peer that does not read can hold `bye` up to
                // `sendTimeout`, and senders must not wait for that.
                tls?.bye()
                shutdown(fd, Int32(SHUT_RDWR))
                lock.withLock {
                    flushing = false
                    lock.broadcast()
                }
                return
            case .write(let chunk):
                let ok = writeBlocking(chunk)
                lock.withLock {
                    writing = 0
                    if !ok {
                        // The peer is gone or did not read for `sendTimeout`.
                        flushing = false
                        abandon()
                    }
                }
                if !ok { return }
            }
        }
    }

    /// Writes all of `bytes`, blocking (up to `sendTimeout` a write); false when the peer is
    /// gone or stopped reading.
    private func writeBlocking(_ bytes: [UInt8]) -> Bool {
        if let tls { return bytes.withUnsafeBytes { tls.write($0) } }
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return false
            }
            off += n
        }
        return true
    }

    /// Waits until no flusher uses the socket (so the reader may close the descriptor), or until
    /// `deadline` (monotonic nanoseconds) when given; false on time-out.
    @discardableResult
    func waitForFlusher(untilMonotonicNanos deadline: UInt64? = nil) -> Bool {
        lock.withLock {
            while flushing {
                if let deadline {
                    if !lock.wait(untilMonotonicNanos: deadline) && flushing { return false }
                } else {
                    lock.wait()
                }
            }
            return true
        }
    }

    /// Stanza size limit until the client has authenticated (SASL PLAIN needs a few hundred
    /// bytes), so connections that never log in cannot each hold a megabyte.
    static let maxStanzaBytesBeforeAuth = 64 << 10
    /// When the client must have logged in and bound by (monotonic nanoseconds); nil once bound.
    /// Only the reader thread touches it.
    private var loginDeadline: UInt64?

    func run() {
        let parser = XMLStreamParser(maxStanzaBytes: min(server.maxStanzaBytes, Self.maxStanzaBytesBeforeAuth))
        parser.pauseAfter = ["auth"]
        var buf = [UInt8](repeating: 0, count: 65536)
        if let credentials = server.tls {
            // Direct TLS: the handshake comes before any XML. A peer that does not finish it
            // within the time-out is dropped.
            setReceiveTimeout(fd, seconds: 10)
            do {
                let s = try TLSSession(serverOn: fd, credentials: credentials)
                lock.withLock { tls = s }
            } catch {
                lock.withLock { session.closed = true }
                Glibc.close(fd)
                server.forget(self)
                return
            }
        }
        // Until bound: a connection that never logs in does not hold its thread and descriptor
        // for ever (a deadline, not an idle time: a byte every few seconds does not extend it).
        loginDeadline = monotonicNanos() + UInt64(server.loginTimeout) * 1_000_000_000
        defer {
            lock.withLock {
                if !session.closed {
                    session.closed = true
                    shutdown(fd, Int32(SHUT_RDWR))
                }
                lock.broadcast()  // a lingering flusher ends now
            }
            // A flusher still writing the end of a closed stream has the descriptor until it is
            // done (a shut-down socket fails its writes at once; else at most `sendTimeout`).
            waitForFlusher()
            Glibc.close(fd)
            server.forget(self)
            if account != nil { server.delegate.closed(self) }
        }
        // Since when a stanza has been in the making (its first byte), and whether the socket's
        // receive time-out is set for it (after login, reads otherwise wait for ever).
        var stanzaSince: UInt64?
        var stanzaClockSet = false
        let stanzaNanos = UInt64(server.stanzaTimeout) * 1_000_000_000
        let timedOut = { [self] in
            if let deadline = loginDeadline, monotonicNanos() + 1_000_000 >= deadline {
                return end(error: "connection-timeout", text: "log in and bind within \(server.loginTimeout) seconds")
            }
            end(error: "policy-violation", text: "a stanza must arrive whole within \(server.stanzaTimeout) seconds")
        }
        while true {
            let now = monotonicNanos()
            var deadline = loginDeadline
            if let since = stanzaSince { deadline = min(deadline ?? UInt64.max, since + stanzaNanos) }
            if let deadline {
                guard now + 1_000_000 < deadline else { return timedOut() }
                setReceiveTimeout(fd, nanos: deadline - now)
                stanzaClockSet = stanzaSince != nil
            } else if stanzaClockSet {
                setReceiveTimeout(fd, seconds: 0)
                stanzaClockSet = false
            }
            let reader = tls
            let n = buf.withUnsafeMutableBytes { b in
                reader.map { $0.read(b.baseAddress!, b.count) } ?? recv(fd, b.baseAddress, b.count, 0)
            }
            if n < 0 && reader == nil && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return timedOut() }
            if n <= 0 { return }
            let mark = parser.completedThrough
            var chunk = Array(buf[0..<n])
            // A chunk may go in twice: the parser pauses after `<auth>`, whose success restarts
            // the stream, and what followed in the same read (a client that did not wait for
            // `<success/>`) goes to the restarted parser.
            while !chunk.isEmpty {
                let events: [XMLStreamEvent]
                do {
                    events = try parser.feed(chunk)
                } catch {
                    return end(error: error.streamError.condition, text: error.streamError.text)
                }
                for e in events where !handle(e, parser) { return }
                chunk = parser.takeLeftover()
            }
            // The clock is the stanza's own: one that completed in this read starts it again for
            // the next (a busy client's reads end mid-stanza all the time).
            if !parser.stanzaInTheMaking {
                stanzaSince = nil
            } else if stanzaSince == nil || parser.completedThrough != mark {
                stanzaSince = monotonicNanos()
            }
        }
    }

    /// Handles one event; false when the connection must end.
    private func handle(_ e: XMLStreamEvent, _ parser: XMLStreamParser) -> Bool {
        // Closed or dropped (by the delegate, say, for a fault): what the same read also
        // brought is not taken.
        guard let phase = lock.withLock({ session.closed ? nil : session.phase }) else { return false }
        switch e {
        case .streamClose:
            // RFC 6120 4.4: the client may still read what the server sends before its own
            // closing tag, here the answers to the messages it sent just before.
            if phase == .ready && server.delegate.streamEnded(self) {
                let deadline = monotonicNanos() + Self.answersAfterStreamEnd
                lock.withLock {
                    while !session.closed && lock.wait(untilMonotonicNanos: deadline) {}
                }
            }
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
            // RFC 6120 4.9.3.22: a first-level element in a namespace the server does not
            // understand (`<message xmlns='foo'>` is no stanza). None is the content namespace
            // when the header declared none.
            guard s.namespace == nil || s.namespace == XMPPNamespace.client || s.namespace == XMPPNamespace.sasl else {
                close(error: "unsupported-stanza-type", text: "<\(s.localName)> in the namespace \(s.namespace ?? "") is not understood here")
                return false
            }
            switch phase {
            case .awaitingStream, .awaitingRestart:
                close(error: "invalid-xml", text: "expected a stream header")
                return false
            case .awaitingAuth:
                return authenticate(s, parser)
            case .awaitingBind, .ready:
                // SASL elements once authenticated are ignored, as other elements nobody asked for.
                return s.namespace == XMPPNamespace.sasl || stanza(s, phase: phase)
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
        let saslNS = XMPPNamespace.sasl
        guard s.localName == "auth" && s.namespace == saslNS else {
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
        parser.maxStanzaBytes = server.maxStanzaBytes
        parser.pauseAfter = []
        return true
    }

    private func stanza(_ s: XMLElement, phase: Phase) -> Bool {
        switch s.localName {
        case "iq":
            let iqID = xmlEscape(s.attributes["id"] ?? "")
            // A result or error answers a request; it is never answered itself (RFC 6120 8.2.3).
            if s.attributes["type"] == "result" || s.attributes["type"] == "error" { return true }
            if let bind = s.child("bind") {
                guard phase == .awaitingBind else {
                    // One resource per connection: a second bind would start the session over
                    // while the first one's acks, receipts and upstream messages are still owed.
                    send("<iq type=\"error\" id=\"\(iqID)\"><error type=\"cancel\"><not-allowed xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\"/><text xmlns=\"urn:ietf:params:xml:ns:xmpp-stanzas\">this connection is already bound</text></error></iq>")
                    return true
                }
                let resource = bind.child("resource")?.text.isEmpty == false ? bind.child("resource")!.text : "fcm-mock-\(id)"
                let account = lock.withLock { () -> String in
                    session.resource = resource
                    session.phase = .ready
                    return session.account ?? ""
                }
                send("<iq type=\"result\" id=\"\(iqID)\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><jid>\(xmlEscape(account))@\(xmlEscape(server.domain))/\(xmlEscape(resource))</jid></bind></iq>")
                loginDeadline = nil
                setReceiveTimeout(fd, seconds: 0)
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
