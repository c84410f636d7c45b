import CLinuxEvents
import Platform
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// The one thread that serves an MCS listener: it accepts, handshakes, reads, judges packets,
/// writes and keeps the time-outs of every connection, on non-blocking sockets in one
/// edge-triggered epoll (each connection registered once, for both directions, never changed).
/// Other threads hand it work through `wake` (a connection with bytes queued, or closed): a
/// `Mutex`-guarded inbox and an eventfd, as the HTTP/1.1 loops do. A connection costs no thread,
/// and none of its buffers outlives a read or a write: the loop reads into one buffer of its
/// own, a frame stays only while partial, and the bytes queued only until written.
///
/// `@unchecked Sendable`: other threads reach it only through `wake`, `stop` and the getters,
/// which go through `inbox`, `table` (both `Mutex`es) and the atomics; every other stored
/// property is the loop thread's alone.
final class MCSLoop: @unchecked Sendable {
    let limits: MCSLimits
    let delegate: any MCSDelegate
    private let credentials: TLSCredentials
    private let listenFD: Int32
    private let epollFD: Int32
    private let wakeFD: Int32
    /// Connections with something to write or a close to carry out, posted from other threads;
    /// `stop` asked; the thread ended (its eventfd closed, nothing more posted).
    private let inbox = Mutex<(wake: [MCSConnection], stop: Bool, ended: Bool)>(([], false, false))
    /// Every open connection (in its handshake or past it) by number, and how many are past
    /// their handshake and admitted: for other threads' questions and the limits.
    private let table = Mutex<(all: [Int: MCSConnection], established: Int)>(([:], 0))
    private let thread = Atomic<UInt>(0)
    private let started = Atomic<Bool>(false)
    let ended = Atomic<Bool>(false)

    /// Connections not yet past their handshake beyond `maxConnections`: more are closed at once
    /// (each holds a GnuTLS session until its handshake ends).
    static let handshakeAllowance = 64

    // The loop thread's own.
    private var byFD: [MCSConnection?] = []
    private var dirty: [MCSConnection] = []
    private var again: [MCSConnection] = []
    /// The lists above are swapped with these while they are worked through.
    private var posted: [MCSConnection] = []
    private var flushing: [MCSConnection] = []
    private var servingAgain: [MCSConnection] = []
    private var accepted = 0
    private var listening = true
    private var stopDeadline: UInt64?
    /// The earliest deadline any connection may have (a lower bound: reads only push them later).
    private var nextDue = UInt64.max
    /// Accepting paused until then (out of descriptors).
    private var acceptPausedUntil: UInt64?

    init?(listenFD: Int32, credentials: TLSCredentials, limits: MCSLimits, delegate: any MCSDelegate) {
        self.listenFD = listenFD
        self.credentials = credentials
        self.limits = limits
        self.delegate = delegate
        epollFD = epoll_create1(FCM_EPOLL_CLOEXEC)
        wakeFD = eventfd(0, FCM_EFD_FLAGS)
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL) | O_NONBLOCK)
        guard epollFD >= 0, wakeFD >= 0, Self.watch(epollFD, wakeFD, FCM_EPOLLIN), Self.watch(epollFD, listenFD, FCM_EPOLLIN) else {
            if epollFD >= 0 { close(epollFD) }
            if wakeFD >= 0 { close(wakeFD) }
            return nil
        }
    }

    private static func watch(_ epollFD: Int32, _ fd: Int32, _ events: UInt32) -> Bool {
        var ev = epoll_event()
        ev.events = events
        ev.data.fd = fd
        return epoll_ctl(epollFD, Int32(EPOLL_CTL_ADD), fd, &ev) == 0
    }

    func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        spawnThread { [self] in
            thread.store(UInt(pthread_self()), ordering: .releasing)
            run()
            thread.store(0, ordering: .releasing)
            // A loop that ended on an epoll failure still holds the port.
            if listening {
                listening = false
                close(listenFD)
            }
            close(epollFD)
            inbox.withLock { q in
                q.ended = true
                q.wake = []
                close(wakeFD)
            }
            ended.store(true, ordering: .releasing)
        }
    }

    private var onLoopThread: Bool {
        pthread_equal(pthread_self(), pthread_t(thread.load(ordering: .acquiring))) != 0
    }

    /// `c` has bytes queued or a close to carry out: flushed this round on the loop thread, else
    /// posted.
    func wake(_ c: MCSConnection) {
        if onLoopThread {
            dirty.append(c)
            return
        }
        inbox.withLock { q in
            guard !q.ended else { return }
            q.wake.append(c)
            if q.wake.count == 1 { signal() }
        }
    }

    private func signal() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Stops accepting, sends Close on every logged-in connection and closes them all, waiting up
    /// to 2 seconds for what is queued to go out; returns once the loop has ended (at once when
    /// called on the loop itself, which ends after the call it is in).
    func stop() {
        guard started.exchange(true, ordering: .acquiringAndReleasing) else {
            // Never started: nothing was accepted. Marked ended first, so a second call signals
            // no descriptor number these closes give back.
            inbox.withLock { q in
                q.ended = true
                q.stop = true
            }
            close(listenFD)
            close(epollFD)
            close(wakeFD)
            ended.store(true, ordering: .releasing)
            return
        }
        inbox.withLock { q in
            guard !q.ended, !q.stop else { return }
            q.stop = true
            signal()
        }
        guard !onLoopThread else { return }
        let deadline = monotonicNanos() + 3_000_000_000
        while !ended.load(ordering: .acquiring) && monotonicNanos() < deadline { usleep(2000) }
    }

    var connectionCount: Int { table.withLock { $0.established } }
    var connections: [MCSConnection] { table.withLock { Array($0.all.values) }.sorted { $0.number < $1.number } }

    /// Takes a connection whose handshake is done; nil, or why not (stopping, or `maxConnections`
    /// open already).
    func admit(_ c: MCSConnection) -> String? {
        if stopDeadline != nil { return "the server is shutting down" }
        return table.withLock { t in
            guard t.established < limits.maxConnections else {
                return "the server holds \(limits.maxConnections) connections, the most it takes"
            }
            t.established += 1
            return nil
        }
    }

    /// `c` ended (its descriptor is about to close).
    func forget(_ c: MCSConnection, admitted: Bool) {
        if Int(c.fd) < byFD.count, byFD[Int(c.fd)] === c { byFD[Int(c.fd)] = nil }
        table.withLock { t in
            t.all.removeValue(forKey: c.number)
            if admitted { t.established -= 1 }
        }
    }

    /// `c` stopped reading with more to read: it reads again next round.
    func readAgain(_ c: MCSConnection) { again.append(c) }

    /// A connection has a deadline at `when`.
    func due(_ when: UInt64) { nextDue = Swift.min(nextDue, when) }

    // MARK: The loop

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        // The one read buffer: a TLS record's worth, shared by every connection.
        var scratch = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            var now = monotonicNanos()
            let timeout: Int32
            if !dirty.isEmpty || !again.isEmpty {
                timeout = 0
            } else {
                var until = nextDue
                if let p = acceptPausedUntil { until = Swift.min(until, p) }
                if stopDeadline != nil { until = Swift.min(until, now &+ 20_000_000) }
                timeout = until <= now ? 0 : Int32(Swift.min(1000, (until - now) / 1_000_000 + 1))
            }
            let n = epoll_wait(epollFD, &events, Int32(events.count), timeout)
            if n < 0 && errno != EINTR { break }
            now = monotonicNanos()
            for i in 0..<Swift.max(0, Int(n)) {
                let fd = events[i].data.fd
                if fd == wakeFD {
                    var sink: UInt64 = 0
                    _ = read(wakeFD, &sink, 8)
                } else if fd == listenFD {
                    acceptAll(now: now)
                } else if Int(fd) < byFD.count, let c = byFD[Int(fd)] {
                    let ended = events[i].events & (FCM_EPOLLRDHUP | FCM_EPOLLHUP | FCM_EPOLLERR) != 0
                    c.service(now: now, scratch: &scratch, hangup: ended)
                }
            }
            if let p = acceptPausedUntil, now >= p {
                acceptPausedUntil = nil
                if listening, Self.watch(epollFD, listenFD, FCM_EPOLLIN) { acceptAll(now: now) }
            }
            drainInbox(now: now)
            if !again.isEmpty {
                swap(&again, &servingAgain)
                for c in servingAgain { c.service(now: now, scratch: &scratch) }
                servingAgain.removeAll(keepingCapacity: true)
            }
            flushDirty(now: now)
            if now >= nextDue { sweep(now: now) }
            if let d = stopDeadline {
                if now >= d { for case let c? in byFD { c.end("the server is shutting down") } }
                if byFD.allSatisfy({ $0 == nil }) { return }
            }
        }
        for case let c? in byFD { c.end("the server is shutting down") }
    }

    private func drainInbox(now: UInt64) {
        // Swapped, not copied: no array is allocated a round.
        let stop = inbox.withLock { q -> Bool in
            swap(&q.wake, &posted)
            return q.stop
        }
        dirty.append(contentsOf: posted)
        posted.removeAll(keepingCapacity: true)
        if stop && stopDeadline == nil { beginStop(now: now) }
    }

    private func flushDirty(now: UInt64) {
        // A flush may close another connection (a delegate's call), which lists it again.
        var rounds = 0
        while !dirty.isEmpty && rounds < 8 {
            rounds += 1
            swap(&dirty, &flushing)
            for c in flushing { c.flush(now: now) }
            flushing.removeAll(keepingCapacity: true)
        }
    }

    /// Every connection's time-outs; the next deadline.
    private func sweep(now: UInt64) {
        nextDue = UInt64.max
        for case let c? in byFD {
            if let d = c.checkTime(now: now) { nextDue = Swift.min(nextDue, d) }
        }
        flushDirty(now: now)
    }

    private func beginStop(now: UInt64) {
        stopDeadline = now &+ 2_000_000_000
        if listening {
            listening = false
            close(listenFD)  // out of the epoll with it
        }
        for case let c? in byFD { c.close(sendingClose: true, reason: "the server is shutting down") }
    }

    /// Accepts what the backlog holds (up to a bound; the listening socket is level-triggered).
    private func acceptAll(now: UInt64) {
        for _ in 0..<64 {
            guard listening, acceptPausedUntil == nil else { return }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let e = errno
                if e == EAGAIN || e == EWOULDBLOCK { return }
                if e == EINTR || e == ECONNABORTED { continue }
                // Out of descriptors: the backlog waits 50 ms, listening goes on.
                epoll_ctl(epollFD, Int32(EPOLL_CTL_DEL), listenFD, nil)
                acceptPausedUntil = now &+ 50_000_000
                return
            }
            adopt(fd, now: now)
        }
    }

    private func adopt(_ fd: Int32, now: UInt64) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        accepted += 1
        let c = MCSConnection(fd: fd, number: accepted, loop: self, now: now)
        let full = table.withLock { t -> Bool in
            if t.all.count >= limits.maxConnections + Self.handshakeAllowance { return true }
            t.all[c.number] = c
            return false
        }
        if full {
            close(fd)
            delegate.closed(c, reason: "too many connections in their handshake")
            return
        }
        if Int(fd) >= byFD.count { byFD += Array(repeating: nil, count: Int(fd) + 1 - byFD.count) }
        byFD[Int(fd)] = c
        guard c.open(credentials: credentials) else { return }
        guard Self.watch(epollFD, fd, FCM_EPOLLIN | FCM_EPOLLOUT | FCM_EPOLLRDHUP | FCM_EPOLLET) else {
            return c.end("cannot watch the socket: \(String(cString: strerror(errno)))")
        }
        due(now &+ limits.loginTimeout.nanos)
    }
}
