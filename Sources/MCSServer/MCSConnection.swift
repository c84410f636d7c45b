// One MCS connection: its reader (the handshake, the login, every client packet) and its writer
// (what any thread queued), in one file because the locking rules span both.

import Protobuf
import Platform
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// One client connection. Its reader thread alone reads the socket and judges packets; any thread
/// may send or close; its writer thread alone writes the socket.
///
/// Stream ids (§3.5): `clientPackets` counts what the client sent since login (the LoginRequest
/// is 1), `serverPackets` what was queued for it (the LoginResponse is 1); every packet queued
/// that has `last_stream_id_received` gets `clientPackets` there, and packet numbers are taken in
/// the order the packets are queued, which is the order they are written.
///
/// `@unchecked Sendable`: `fd`, `id`, `number`, `remote` and `server` never change; every other stored
/// property is reached only under `lock`, except `frames` and `admitted`, which only the reader
/// thread touches.
public final class MCSConnection: @unchecked Sendable {
    /// `m1`, `m2`, … in the order connections were accepted.
    public let id: String
    /// The peer's `ip:port`.
    public let remote: String
    let number: Int
    let fd: Int32
    /// Strong: a reader thread may outlive `stop()`'s wait, and calls the delegate at its end.
    /// The server holds its connections only until they end, so the cycle breaks then.
    let server: MCSServer
    private let lock = ConditionLock()

    private enum Phase { case handshaking, awaitingLogin, loggedIn }
    private enum Closing {
        /// What is queued (a Close last) goes out, then the TLS closing alert and the socket.
        case orderly
        /// Nothing more is written; the socket is shut down at once.
        case abort
    }

    private var phase = Phase.handshaking
    private var closing: Closing?
    private var closeReason: String?
    private var tls: TLSSession?
    private var outbox: [UInt8] = []
    private var versionSent = false
    private var writerRunning = false
    private var finished = false
    private var clientCount = 0
    private var serverCount = 0
    private var request: LoginRequest?
    private var heartbeatAt: Int64?
    /// Past its handshake and counted by the server (reader thread only).
    private var admitted = false

    init(fd: Int32, id: String, server: MCSServer) {
        self.fd = fd
        self.id = id
        self.number = Int(id.dropFirst()) ?? 0
        self.server = server
        self.remote = Self.peerName(fd)
        let send = server.limits.sendTimeout.nanos
        var tv = timeval(tv_sec: Int(send / 1_000_000_000), tv_usec: Int(send % 1_000_000_000 / 1000))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The accepted LoginRequest (nil before login).
    public var loginRequest: LoginRequest? { lock.withLock { request } }
    /// The login's `user`: the android id in decimal (nil before login).
    public var user: String? { lock.withLock { phase == .loggedIn ? request?.user : nil } }
    /// The android id the login named, when `user` is a decimal number.
    public var androidID: UInt64? { user.flatMap { UInt64($0) } }
    /// When the last heartbeat (ping or ack) came from the client, by the delegate's clock (ms).
    public var lastHeartbeatAt: Int64? { lock.withLock { heartbeatAt } }
    /// Packets received from the client since login (the LoginRequest is 1).
    public var clientPacketsReceived: Int { lock.withLock { clientCount } }
    /// Packets queued for the client since login (the LoginResponse is 1).
    public var serverPacketsSent: Int { lock.withLock { serverCount } }
    /// Whether the connection is closing or closed.
    public var isClosed: Bool { lock.withLock { closing != nil } }

    // MARK: Sending (any thread)

    /// Queues a data message with `last_stream_id_received` filled in; returns its server packet
    /// number, or 0 when nothing was queued (not logged in, or closing).
    @discardableResult
    public func send(_ stanza: DataMessageStanza) -> Int {
        lock.withLock {
            guard phase == .loggedIn, closing == nil else { return 0 }
            var s = stanza
            s.lastStreamIDReceived = Int32(clamping: clientCount)
            return enqueue(s)
        }
    }

    /// Queues an IQ with `last_stream_id_received` filled in; its server packet number, or 0.
    @discardableResult
    public func send(iq: IqStanza) -> Int {
        lock.withLock {
            guard phase == .loggedIn, closing == nil else { return 0 }
            var s = iq
            s.lastStreamIDReceived = Int32(clamping: clientCount)
            return enqueue(s)
        }
    }

    /// Queues a HeartbeatPing with `last_stream_id_received`; its server packet number, or 0.
    @discardableResult
    public func sendHeartbeatPing() -> Int {
        lock.withLock {
            guard phase == .loggedIn, closing == nil else { return 0 }
            return enqueue(HeartbeatPing(lastStreamIDReceived: Int32(clamping: clientCount)))
        }
    }

    /// Ends the connection. With `sendingClose`, a logged-in connection gets a Close packet after
    /// what is already queued (a newer login, idle, shutdown, a disconnect asked for); without it,
    /// or before login, nothing more is written (hostile input). `reason` goes to the delegate's
    /// `closed`; only the first close counts.
    public func close(sendingClose: Bool, reason: String) {
        lock.withLock {
            guard closing == nil else { return }
            closeReason = reason
            if sendingClose && phase == .loggedIn && writerRunning {
                enqueue(Close())
                if closing == nil { closing = .orderly }  // unless the queue overflowed
                lock.broadcast()
            } else {
                abandon()
            }
        }
    }

    /// Waits until the connection has ended and `closed` was called, or until `deadline`.
    func waitUntilFinished(untilMonotonicNanos deadline: UInt64) {
        lock.withLock {
            while !finished && lock.wait(untilMonotonicNanos: deadline) {}
        }
    }

    /// Queues a packet (the version byte before the first); its server packet number. Under `lock`.
    @discardableResult
    private func enqueue<M: MCSPacketMessage>(_ m: M) -> Int {
        if !versionSent {
            outbox.append(mcsVersion)
            versionSent = true
        }
        outbox += mcsPacket(m)
        serverCount += 1
        if outbox.count > server.limits.maxUnsentBytes {
            closeReason = closeReason ?? "the client reads nothing (\(outbox.count) bytes unsent)"
            abandon()
        } else {
            lock.broadcast()
        }
        return serverCount
    }

    /// Nothing more goes out; the socket is shut down, which ends the reader's and writer's calls.
    /// Under `lock`.
    private func abandon() {
        closing = .abort
        outbox = []
        shutdown(fd, Int32(SHUT_RDWR))
        lock.broadcast()
    }

    // MARK: The writer thread

    private func writeLoop(_ tls: TLSSession) {
        enum Job { case write([UInt8]), finish, exit }
        while true {
            let job: Job = lock.withLock {
                while outbox.isEmpty && closing == nil { lock.wait() }
                if closing == .abort { return .exit }
                if !outbox.isEmpty {
                    defer { outbox = [] }
                    return .write(outbox)
                }
                return .finish
            }
            switch job {
            case .write(let bytes):
                if !tls.write(bytes) {
                    lock.withLock {
                        if closing == nil { closeReason = "the client is gone or stopped reading" }
                        abandon()
                    }
                }
            case .finish:
                tls.bye()
                shutdown(fd, Int32(SHUT_RDWR))
                lock.withLock {
                    writerRunning = false
                    lock.broadcast()
                }
                return
            case .exit:
                lock.withLock {
                    writerRunning = false
                    lock.broadcast()
                }
                return
            }
        }
    }

    // MARK: The reader thread

    func run() {
        let limits = server.limits
        let deadline = monotonicNanos() + limits.loginTimeout.nanos
        setReceiveTimeout(fd, nanos: limits.loginTimeout.nanos)
        var endReason = "the client closed the connection"
        defer { finish(endReason) }
        let session: TLSSession
        do {
            session = try TLSSession(serverOn: fd, credentials: server.credentials)
        } catch {
            endReason = "\(error)"
            return
        }
        if let refusal = server.admit(self) {
            endReason = refusal
            return
        }
        admitted = true
        let started = lock.withLock { () -> Bool in
            guard closing == nil else { return false }
            tls = session
            phase = .awaitingLogin
            writerRunning = true
            return true
        }
        guard started else { return }
        spawnThread { [self] in writeLoop(session) }

        var frames = MCSFrameReader(maxPacketBytes: limits.maxPacketBytes)
        // 4 KiB, not a whole TLS record's 16: the buffer is resident for as long as the connection
        // lives (zeroed), and a thousand idle connections held about 10 MB more with 16; a larger record
        // is read in turns, gnutls keeping the rest, and the frame reader joins the parts.
        var buf = [UInt8](repeating: 0, count: 4 << 10)
        while true {
            let loggedIn = lock.withLock { phase == .loggedIn }
            if !loggedIn {
                let now = monotonicNanos()
                guard now + 1_000_000 < deadline else {
                    return close(sendingClose: false, reason: "no LoginRequest within \(limits.loginTimeout)")
                }
                setReceiveTimeout(fd, nanos: deadline - now)
            }
            let n = buf.withUnsafeMutableBytes { session.read($0.baseAddress!, $0.count) }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if loggedIn {
                    return close(sendingClose: true, reason: "idle for \(limits.idleTimeout)")
                }
                return close(sendingClose: false, reason: "no LoginRequest within \(limits.loginTimeout)")
            }
            if n < 0 { endReason = "the connection failed"; return }
            if n == 0 { return }
            frames.feed(buf[0..<n])
            while let event = frames.next() {
                if isClosed { return }
                switch event {
                case .failure(let why):
                    return close(sendingClose: false, reason: why)
                case .packet(let tag, let payload):
                    if !handle(tag, payload) { return }
                }
            }
        }
    }

    /// Ends the reader: the connection closes (if nothing closed it before), the writer is waited
    /// for, the descriptor closed, and the delegate told, once.
    private func finish(_ endReason: String) {
        lock.withLock {
            if closing == nil {
                closeReason = endReason
                abandon()
            }
            while writerRunning { lock.wait() }
        }
        Glibc.close(fd)
        server.forget(self, admitted: admitted)
        let reason = lock.withLock { closeReason ?? endReason }
        server.delegate.closed(self, reason: reason)
        lock.withLock {
            finished = true
            lock.broadcast()
        }
    }

    /// Decodes a client packet; nil (and the connection closed, nothing written) when it does not
    /// parse or lacks a required field.
    private func decode<M: MCSPacketMessage>(_ payload: [UInt8], as: M.Type) -> M? {
        do {
            return try M(decoding: payload)
        } catch {
            close(sendingClose: false, reason: "\(M.self) does not parse: \(error)")
            return nil
        }
    }

    /// Handles one client packet; false when the connection ends.
    private func handle(_ tag: MCSTag, _ payload: [UInt8]) -> Bool {
        let delegate = server.delegate
        guard lock.withLock({ phase == .loggedIn }) else {
            guard tag == .loginRequest else {
                close(sendingClose: false, reason: "the first packet is \(tag), not a LoginRequest")
                return false
            }
            guard let request = decode(payload, as: LoginRequest.self) else { return false }
            lock.withLock { clientCount = 1 }
            switch delegate.login(request, on: self) {
            case .accept:
                let accepted = lock.withLock { () -> Bool in
                    guard closing == nil else { return false }
                    self.request = request
                    phase = .loggedIn
                    enqueue(LoginResponse(id: request.id, lastStreamIDReceived: Int32(clamping: clientCount),
                                          serverTimestamp: delegate.nowMillis()))
                    return true
                }
                guard accepted else { return false }
                setReceiveTimeout(fd, nanos: server.limits.idleTimeout.nanos)
                delegate.loggedIn(self)
                return true
            case .refuse(let code, let message):
                lock.withLock {
                    guard closing == nil else { return }
                    enqueue(LoginResponse(id: request.id, error: ErrorInfo(code: Int32(clamping: code), message: message),
                                          lastStreamIDReceived: Int32(clamping: clientCount), serverTimestamp: delegate.nowMillis()))
                    enqueue(Close())
                    closeReason = "login refused: \(code) \(message)"
                    if closing == nil { closing = .orderly }
                    lock.broadcast()
                }
                return false
            }
        }
        switch tag {
        case .heartbeatPing:
            guard let ping = decode(payload, as: HeartbeatPing.self) else { return false }
            let now = delegate.nowMillis()
            lock.withLock {
                clientCount += 1
                heartbeatAt = now
                if closing == nil { enqueue(HeartbeatAck(lastStreamIDReceived: Int32(clamping: clientCount))) }
            }
            acknowledge(ping.lastStreamIDReceived)
            delegate.heartbeat(on: self)
            return true
        case .heartbeatAck:
            guard let ack = decode(payload, as: HeartbeatAck.self) else { return false }
            let now = delegate.nowMillis()
            lock.withLock {
                clientCount += 1
                heartbeatAt = now
            }
            acknowledge(ack.lastStreamIDReceived)
            delegate.heartbeat(on: self)
            return true
        case .iqStanza:
            guard let iq = decode(payload, as: IqStanza.self) else { return false }
            var selective: [String]?
            if let ext = iq.extension, ext.id == Extension.selectiveAck {
                guard let s = decode(ext.data, asPart: SelectiveAck.self) else { return false }
                selective = s.ids
            }
            lock.withLock { clientCount += 1 }
            acknowledge(iq.lastStreamIDReceived)
            if let selective { delegate.selectiveAck(ids: selective, on: self) }
            return true
        case .dataMessageStanza:
            guard let d = decode(payload, as: DataMessageStanza.self) else { return false }
            lock.withLock { clientCount += 1 }
            acknowledge(d.lastStreamIDReceived)
            return true  // upstream messages are read and ignored
        case .close:
            guard decode(payload, as: Close.self) != nil else { return false }
            close(sendingClose: false, reason: "the client sent Close")
            return false
        case .streamErrorStanza:
            guard let e = decode(payload, as: StreamErrorStanza.self) else { return false }
            close(sendingClose: false, reason: "the client's stream error: \(e.type)\(e.text.map { " \($0)" } ?? "")")
            return false
        case .loginRequest:
            close(sendingClose: false, reason: "a second LoginRequest")
            return false
        case .loginResponse:
            close(sendingClose: false, reason: "a LoginResponse from the client")
            return false
        }
    }

    /// Decodes a message carried inside another (an IQ extension's data).
    private func decode<M: MCSProtoMessage>(_ payload: [UInt8], asPart: M.Type) -> M? {
        do {
            return try M(decoding: payload)
        } catch {
            close(sendingClose: false, reason: "\(M.self) does not parse: \(error)")
            return nil
        }
    }

    private func acknowledge(_ n: Int32?) {
        guard let n, n > 0 else { return }
        server.delegate.acknowledged(throughServerPacket: Int(n), on: self)
    }

    /// `ip:port` of the peer of `fd`.
    private static func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &len) == 0 }
        }
        guard ok else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var serv = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, len, &host, socklen_t(host.count), &serv, socklen_t(serv.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard rc == 0 else { return "?" }
        func text(_ c: [CChar]) -> String { String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        let h = text(host), p = text(serv)
        return h.contains(":") ? "[\(h)]:\(p)" : "\(h):\(p)"
    }
}
