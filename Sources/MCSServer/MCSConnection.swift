// Long because: one MCS connection is what any thread may do (send, close, read its state) and
// what its loop does for it (the handshake, reads, writes, time-outs and the acknowledgement
// ping, the end), in one file because the locking rules span both; its client packets are in
// MCSConnection+Packets.swift.

import Protobuf
import Platform
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// One client connection. Its loop thread alone reads and writes the socket and judges packets;
/// any thread may send or close, which queues bytes under the connection's lock and asks the
/// loop to write them.
///
/// Stream ids (§3.5): `clientPackets` counts what the client sent since login (the LoginRequest
/// is 1), `serverPackets` what was queued for it (the LoginResponse is 1); every packet queued
/// that has `last_stream_id_received` gets `clientPackets` there, and packet numbers are taken in
/// the order the packets are queued, which is the order they are written.
///
/// `@unchecked Sendable`: `fd`, `id`, `number`, `remote` and `loop` never change; `shared` is a
/// `Mutex`; every other stored property is the loop thread's alone (the loop calls the methods
/// under "The loop's side" and nothing else does).
public final class MCSConnection: @unchecked Sendable {
    /// `m1`, `m2`, … in the order connections were accepted.
    public let id: String
    /// The peer's `ip:port`.
    public let remote: String
    let number: Int
    let fd: Int32
    let loop: MCSLoop

    enum Phase { case handshaking, awaitingLogin, loggedIn }
    enum Closing {
        /// What is queued (a Close last) goes out, then the TLS closing alert and the socket.
        case orderly
        /// Nothing more is written; the socket is closed at once.
        case abort
    }

    /// What other threads reach.
    struct Shared {
        var phase = Phase.handshaking
        var closing: Closing?
        var closeReason: String?
        var outbox: [UInt8] = []
        /// Bytes the loop took from `outbox` and has not finished writing.
        var held = 0
        var versionSent = false
        var clientCount = 0
        var serverCount = 0
        var request: LoginRequest?
        var heartbeatAt: Int64?
        /// On the loop's list of connections to flush (or posted to it).
        var scheduled = false
        /// A data message asking for an immediate acknowledgement was queued since the loop last
        /// took the outbox.
        var ackAwaited = false
        var finished = false

        /// Queues a packet (the version byte before the first); its server packet number. Past
        /// `maxUnsent` bytes the connection is abandoned.
        @discardableResult
        mutating func enqueue<M: MCSPacketMessage>(_ m: M, maxUnsent: Int) -> Int {
            if !versionSent {
                outbox.append(mcsVersion)
                versionSent = true
            }
            outbox += mcsPacket(m)
            serverCount += 1
            if outbox.count + held > maxUnsent {
                closeReason = closeReason ?? "the client reads nothing (\(outbox.count + held) bytes unsent)"
                abandon()
            }
            return serverCount
        }

        /// Nothing more goes out.
        mutating func abandon() {
            closing = .abort
            outbox = []
        }

        /// Marks the connection for the loop's attention; true when it was not already.
        mutating func schedule() -> Bool {
            if scheduled { return false }
            scheduled = true
            return true
        }
    }

    let shared = Mutex(Shared())

    // The loop thread's own.
    private var tls: NonBlockingTLSSession?
    private var frames: MCSFrameReader?
    private var writing: [UInt8] = []
    private var written = 0
    /// Past its handshake and counted by the server.
    private var admitted = false
    var loggedInOnLoop = false
    private(set) var ended = false
    private(set) var lastReadNanos: UInt64
    private let loginDeadline: UInt64
    /// Since when a write has waited for the client to read (nil: not waiting).
    private var blockedSince: UInt64?
    /// When the server pings if the client has not acknowledged a write that asked for an
    /// immediate acknowledgement (`MCSLimits.ackNudge`), and the server packet that waits for it;
    /// nil when nothing waits. A packet the client sent before it had the write (a heartbeat, an
    /// earlier acknowledgement) does not count: only one reaching that packet, or a SelectiveAck.
    var nudgeDue: UInt64?
    var nudgePacket = 0

    init(fd: Int32, number: Int, loop: MCSLoop, now: UInt64) {
        self.fd = fd
        self.id = "m\(number)"
        self.number = number
        self.loop = loop
        self.remote = Self.peerName(fd)
        lastReadNanos = now
        loginDeadline = now &+ loop.limits.loginTimeout.nanos
    }

    /// The accepted LoginRequest (nil before login).
    public var loginRequest: LoginRequest? { shared.withLock { $0.request } }
    /// The login's `user`: the android id in decimal (nil before login).
    public var user: String? { shared.withLock { $0.phase == .loggedIn ? $0.request?.user : nil } }
    /// The android id the login named, when `user` is a decimal number.
    public var androidID: UInt64? { user.flatMap { UInt64($0) } }
    /// When the last heartbeat (ping or ack) came from the client, by the delegate's clock (ms).
    public var lastHeartbeatAt: Int64? { shared.withLock { $0.heartbeatAt } }
    /// Packets received from the client since login (the LoginRequest is 1).
    public var clientPacketsReceived: Int { shared.withLock { $0.clientCount } }
    /// Packets queued for the client since login (the LoginResponse is 1).
    public var serverPacketsSent: Int { shared.withLock { $0.serverCount } }
    /// Whether the connection is closing or closed.
    public var isClosed: Bool { shared.withLock { $0.closing != nil } }

    // MARK: Sending (any thread)

    /// Queues a data message with `last_stream_id_received` filled in; returns its server packet
    /// number, or 0 when nothing was queued (not logged in, or closing).
    @discardableResult
    public func send(_ stanza: DataMessageStanza) -> Int {
        queue { s in
            var m = stanza
            m.lastStreamIDReceived = Int32(clamping: s.clientCount)
            if m.immediateAck == true { s.ackAwaited = true }
            return m
        }
    }

    /// Queues an IQ with `last_stream_id_received` filled in; its server packet number, or 0.
    @discardableResult
    public func send(iq: IqStanza) -> Int {
        queue { s in
            var m = iq
            m.lastStreamIDReceived = Int32(clamping: s.clientCount)
            return m
        }
    }

    /// Queues a HeartbeatPing with `last_stream_id_received`; its server packet number, or 0.
    @discardableResult
    public func sendHeartbeatPing() -> Int {
        queue { HeartbeatPing(lastStreamIDReceived: Int32(clamping: $0.clientCount)) }
    }

    /// Queues the packet `make` builds on a logged-in connection that is not closing, and has
    /// the loop write it; its server packet number, or 0.
    private func queue<M: MCSPacketMessage>(_ make: (inout Shared) -> M) -> Int {
        let maxUnsent = loop.limits.maxUnsentBytes
        let (n, wake) = shared.withLock { s -> (Int, Bool) in
            guard s.phase == .loggedIn, s.closing == nil else { return (0, false) }
            let m = make(&s)
            let n = s.enqueue(m, maxUnsent: maxUnsent)
            return (n, s.schedule())
        }
        if wake { loop.wake(self) }
        return n
    }

    /// Ends the connection. With `sendingClose`, a logged-in connection gets a Close packet after
    /// what is already queued (a newer login, idle, shutdown, a disconnect asked for); without it,
    /// or before login, nothing more is written (hostile input). `reason` goes to the delegate's
    /// `closed`; only the first close counts. The loop does the closing, after this returns.
    public func close(sendingClose: Bool, reason: String) {
        let maxUnsent = loop.limits.maxUnsentBytes
        let wake = shared.withLock { s -> Bool in
            guard s.closing == nil else { return false }
            s.closeReason = reason
            if sendingClose && s.phase == .loggedIn {
                s.enqueue(Close(), maxUnsent: maxUnsent)
                if s.closing == nil { s.closing = .orderly }  // unless the queue overflowed
            } else {
                s.abandon()
            }
            return s.schedule()
        }
        if wake { loop.wake(self) }
    }

    // MARK: The loop's side

    /// Sets up TLS on the accepted socket; false (and the connection ended) when GnuTLS cannot.
    func open(credentials: TLSCredentials) -> Bool {
        do {
            tls = try NonBlockingTLSSession(serverOn: fd, credentials: credentials)
            return true
        } catch {
            end("\(error)")
            return false
        }
    }

    /// The socket is ready (either way): the handshake goes on, then what can be read is read and
    /// what is queued written. `hangup`: the event said the client's side ended (or failed), so
    /// reads go on until they say so.
    func service(now: UInt64, scratch: inout [UInt8], hangup: Bool = true) {
        guard !ended, let tls else { return }
        if !tls.isHandshakeDone {
            switch tls.handshake() {
            case .wouldBlock: return
            case .failed(let why): return end(why)
            case .done: if !admit() { return }
            }
        }
        if readAvailable(now: now, scratch: &scratch, hangup: hangup) { flush(now: now) }
    }

    /// The handshake is done: counted by the server, or ended past its limit.
    private func admit() -> Bool {
        if let refusal = loop.admit(self) {
            end(refusal)
            return false
        }
        admitted = true
        let open = shared.withLock { s -> Bool in
            guard s.closing == nil else { return false }
            s.phase = .awaitingLogin
            return true
        }
        guard open else {
            end("")
            return false
        }
        frames = MCSFrameReader(maxPacketBytes: loop.limits.maxPacketBytes)
        return true
    }

    /// Reads what the socket holds (up to a bound: the rest on the loop's next round) and handles
    /// its packets; false when the connection ended.
    private func readAvailable(now: UInt64, scratch: inout [UInt8], hangup: Bool) -> Bool {
        guard let tls, frames != nil else { return true }
        for _ in 0..<32 {
            if shared.withLock({ $0.closing != nil }) { return true }  // its end is the flush's
            let r = scratch.withUnsafeMutableBytes { tls.read(into: $0.baseAddress!, max: $0.count) }
            switch r {
            case .bytes(let n):
                lastReadNanos = now
                frames!.feed(scratch[0..<n])
                while let event = frames!.next() {
                    if shared.withLock({ $0.closing != nil }) { return true }
                    switch event {
                    case .failure(let why):
                        close(sendingClose: false, reason: why)
                        return true
                    case .packet(let tag, let payload):
                        if !handle(tag, payload) { return true }
                    }
                }
                frames!.releaseIfDrained()
                // Nothing left in GnuTLS or the socket: done until the next edge, without the read
                // that would say so (a GnuTLS call and a recv a packet).
                if !hangup && !tls.hasBufferedData && Self.unreadBytes(fd) == 0 { return true }
            case .wouldBlock:
                return true
            case .end:
                endReading("the client closed the connection", now: now)
                return !ended
            case .failed:
                endReading("the connection failed", now: now)
                return !ended
            }
        }
        loop.readAgain(self)
        return true
    }

    /// The client's side ended: an orderly close still writes what it can; anything else ends.
    private func endReading(_ reason: String, now: UInt64) {
        let orderly = shared.withLock { s -> Bool in
            if s.closing == nil {
                s.closeReason = reason
                s.abandon()
            }
            return s.closing == .orderly
        }
        if orderly { flush(now: now) }
        if !ended { end(reason) }
    }

    /// Writes what is queued until the socket is full; ends the connection when it is abandoned,
    /// or closing and all written.
    func flush(now: UInt64) {
        guard !ended else { return }
        shared.withLock { $0.scheduled = false }
        guard let tls, tls.isHandshakeDone else {
            if shared.withLock({ $0.closing }) != nil { end("") }
            return
        }
        while true {
            // Abandoned (hostile input, too much unsent): nothing more is written, not even the
            // rest of a batch a blocked write holds.
            if shared.withLock({ $0.closing == .abort }) { return end("") }
            if written == writing.count {
                let (next, awaited) = shared.withLock { s -> ([UInt8], Int?) in
                    let taken = s.outbox
                    s.outbox = []
                    s.held = taken.count
                    defer { s.ackAwaited = false }
                    return (taken, s.ackAwaited ? s.serverCount : nil)
                }
                if let awaited {
                    let due = now &+ loop.limits.ackNudge.nanos
                    nudgeDue = due
                    nudgePacket = awaited
                    loop.due(due)
                }
                writing = next
                written = 0
                if next.isEmpty { break }
            }
            let r = writing.withUnsafeBytes { tls.write(UnsafeRawBufferPointer(rebasing: $0[written...])) }
            switch r {
            case .wrote(let n):
                written += n
                blockedSince = nil
            case .wouldBlock:
                if blockedSince == nil {
                    blockedSince = now
                    loop.due(now &+ loop.limits.sendTimeout.nanos)
                }
                return
            case .failed:
                shared.withLock { s in
                    if s.closing == nil { s.closeReason = "the client is gone or stopped reading" }
                    s.abandon()
                }
                return end("")
            }
        }
        writing = []
        written = 0
        blockedSince = nil
        // All written: nothing is held any more toward the unsent bound.
        if shared.withLock({ s -> Closing? in
            s.held = 0
            return s.closing
        }) == .orderly {
            tls.bye()
            end("")
        }
    }

    /// The deadline that applies now (the login's, the idle time-out's, a blocked write's), or
    /// ends the connection when it has passed; the next deadline, or nil once ended.
    func checkTime(now: UInt64) -> UInt64? {
        guard !ended else { return nil }
        let limits = loop.limits
        if let since = blockedSince {
            let due = since &+ limits.sendTimeout.nanos
            if now >= due {
                shared.withLock { s in
                    if s.closing == nil || s.closing == .orderly {
                        s.closeReason = s.closeReason ?? "the client is gone or stopped reading"
                    }
                    s.abandon()
                }
                end("")
                return nil
            }
            return due
        }
        if loggedInOnLoop {
            let due = lastReadNanos &+ limits.idleTimeout.nanos
            if now >= due {
                close(sendingClose: true, reason: "idle for \(limits.idleTimeout)")
                return nil
            }
            guard let nudge = nudgeDue else { return due }
            guard now >= nudge else { return Swift.min(due, nudge) }
            // A write that asked for an immediate acknowledgement has none yet: a client can drop
            // its stream acknowledgement (Chromium does when its socket is not ready to write); a
            // HeartbeatPing is answered with a HeartbeatAck carrying `last_stream_id_received`.
            nudgeDue = nil
            if sendHeartbeatPing() > 0 { loop.delegate.nudged(self) }
            return due
        }
        if now >= loginDeadline {
            close(sendingClose: false, reason: "no LoginRequest within \(limits.loginTimeout)")
            return nil
        }
        return loginDeadline
    }

    /// Ends the connection at once (the loop's last word on it): the descriptor is closed, the
    /// server forgets it and the delegate is told, once. `endReason` counts when no close gave one.
    func end(_ endReason: String) {
        guard !ended else { return }
        ended = true
        let reason = shared.withLock { s -> String in
            if s.closing == nil { s.closing = .abort }
            s.outbox = []
            s.held = 0
            if s.closeReason == nil { s.closeReason = endReason.isEmpty ? "the connection ended" : endReason }
            return s.closeReason!
        }
        tls = nil
        frames = nil
        writing = []
        loop.forget(self, admitted: admitted)
        Glibc.close(fd)
        loop.delegate.closed(self, reason: reason)
        shared.withLock { $0.finished = true }
    }

    /// Bytes the kernel holds unread on `fd` (`FIONREAD`); -1 when it cannot tell.
    private static func unreadBytes(_ fd: Int32) -> Int32 {
        var n: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &n) == 0 ? n : -1
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
