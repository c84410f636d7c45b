// Long because: the loop, its inbox of messages from other threads, its time-outs (idle, slow
// heads, lingering close) and the off-loop workers for large bodies share one thread's state.
import CLinuxEvents
import Platform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The bounds of the plain port's HTTP/1.1 clients that are slow to send a request head (a
/// "slowloris" holds many connections open, each sending a head a byte at a time, or not at all).
public struct HTTP1Limits: Sendable {
    /// Milliseconds a request head has to arrive whole, counted from the connection's start (for
    /// its first request), or from the first byte of the head, or from the answer before it when
    /// that byte came earlier (pipelined). Past it: `408` and close when some of the head came,
    /// a plain close when nothing did. A request's body has as long again, counted from its
    /// head's end (then `408` and close). An idle keep-alive connection (nothing sent since its
    /// last answer) is not on this clock: it has the 300 s idle time-out.
    public var headTimeoutMillis = 20_000
    /// Connections at once that are waiting for a request head (or a body) on that clock (over
    /// all loops). One more closes the one that has waited longest, without an answer, so
    /// clients that hold connections open without sending a request cannot lock new clients out
    /// (under such a flood, an upload in progress can be the one closed).
    public var maxWaitingForHead = 4096
    /// WebSocket connections open at once (over both ports): an upgrade past it is answered 503
    /// with `Retry-After` (see `WebSocketUpgrade.accept`).
    public var maxWebSockets = 1024

    public init() {}
}

/// The threads that serve the plain port's HTTP/1.1 connections (each connection stays on one).
///
/// Each loop waits in `epoll` (edge-triggered, a connection registered once and never changed),
/// reads every ready connection and hands over the requests it finds, then calls the server's
/// `afterBatch` once for all of them (the sends of one round are committed together, on this
/// thread), then writes the answers. A request's answer that comes from another thread (a commit
/// another thread ran, a long poll) is posted to the loop, which an eventfd wakes. Nothing is
/// suspended or resumed, and no descriptor is re-registered per request, which is what
/// libmicrohttpd's suspend/resume cost on every send that waited for a commit, when it served
/// HTTP/1.1.
final class HTTP1Loops: Sendable {
    let loops: [HTTP1Loop]
    private let next = Atomic<Int>(0)
    /// Connections open on all the loops (each loop counts its own closes here).
    let open = OpenCount()
    let workers = OffLoopWorkers()
    let maxConnections: Int

    init?(count: Int, core: ServerCore, maxConnections: Int, limits: HTTP1Limits) {
        var made: [HTTP1Loop] = []
        let n = Swift.max(1, count)
        for _ in 0..<n {
            guard let l = HTTP1Loop(core: core, open: open, workers: workers, headTimeoutMillis: limits.headTimeoutMillis,
                                    maxWaitingForHead: Swift.max(1, limits.maxWaitingForHead / n)) else { return nil }
            made.append(l)
        }
        loops = made
        self.maxConnections = maxConnections
        for l in loops { l.start() }
    }

    /// Takes an accepted connection (its first bytes may still be unread); closes it past the
    /// connection limit.
    func adopt(_ fd: Int32, secure: Bool, remote: String?) {
        guard open.value.load(ordering: .relaxed) < maxConnections else {
            close(fd)
            return
        }
        open.value.add(1, ordering: .relaxed)
        let i = next.add(1, ordering: .relaxed).newValue
        loops[i % loops.count].post(.adopt(fd, secure: secure, remote: remote))
    }

    /// Answers every waiting request (its decided answer, else 503), writes what can be written
    /// within a second, closes every connection and ends the threads.
    func stop() {
        workers.stop()
        for l in loops { l.post(.stop) }
        var waited = 0
        while loops.contains(where: { !$0.ended.load(ordering: .acquiring) }) && waited < 300 {
            usleep(5000)
            waited += 1
        }
    }
}

/// One loop thread (see `HTTP1Loops`).
///
/// `@unchecked Sendable`: other threads reach it only through `post` (a `Mutex`-guarded inbox
/// and an eventfd) and the atomics; everything else is the loop thread's alone.
final class HTTP1Loop: @unchecked Sendable {
    enum Message {
        /// `remote`: the client's address when `fd` is a socket pair's end (TLS).
        case adopt(Int32, secure: Bool, remote: String?)
        case answer(HTTP1Connection, UInt64, HTTPResponse)
        case resume(HTTP1Connection)
        /// Work handed back to the loop (`HTTPResponder.continueOnConnection`).
        case run(@Sendable (_ inBatch: Bool) -> Void)
        case stop
    }

    let core: ServerCore
    private let open: OpenCount
    let workers: OffLoopWorkers
    private let headTimeoutNanos: UInt64
    private let maxWaitingForHead: Int
    private let epollFD: Int32
    private let wakeFD: Int32
    /// Posted messages, and whether the thread has ended (its eventfd closed): a message posted
    /// after the end is dropped, never written to a closed (or reused) descriptor.
    private let inbox = Mutex<(messages: [Message], ended: Bool)>(([], false))
    private let thread = Atomic<UInt>(0)
    let ended = Atomic<Bool>(false)

    // The loop thread's own state.
    private var connections: [HTTP1Connection?] = []
    private var dirty: [HTTP1Connection] = []
    private var again: [HTTP1Connection] = []
    var batchPending = false
    private(set) var isStopping = false
    private var date: [UInt8] = []
    private var dateSecond = -1
    /// The connections waiting for a request head on its clock (`HTTP1Limits`), oldest first: a
    /// list through the connections themselves, so joining, leaving and finding the oldest cost
    /// no search however many there are.
    private var waitingFirst: HTTP1Connection?
    private weak var waitingLast: HTTP1Connection?
    private var waitingCount = 0

    init?(core: ServerCore, open: OpenCount, workers: OffLoopWorkers, headTimeoutMillis: Int, maxWaitingForHead: Int) {
        self.core = core
        self.open = open
        self.workers = workers
        headTimeoutNanos = UInt64(Swift.max(1, headTimeoutMillis)) * 1_000_000
        self.maxWaitingForHead = maxWaitingForHead
        epollFD = epoll_create1(FCM_EPOLL_CLOEXEC)
        wakeFD = eventfd(0, FCM_EFD_FLAGS)
        var ev = epoll_event()
        ev.events = FCM_EPOLLIN
        ev.data.fd = wakeFD
        guard epollFD >= 0, wakeFD >= 0, epoll_ctl(epollFD, Int32(EPOLL_CTL_ADD), wakeFD, &ev) == 0 else {
            if epollFD >= 0 { close(epollFD) }
            if wakeFD >= 0 { close(wakeFD) }
            return nil
        }
    }

    func start() {
        spawnThread { [self] in
            thread.store(UInt(pthread_self()), ordering: .releasing)
            run()
            thread.store(0, ordering: .releasing)
            close(epollFD)
            let left = inbox.withLock { q -> [Message] in
                q.ended = true
                close(wakeFD)
                defer { q.messages = [] }
                return q.messages
            }
            for m in left { discard(m) }
            ended.store(true, ordering: .releasing)
        }
    }

    /// Hands a message to the loop thread (from any thread).
    func post(_ m: Message) {
        var dropped: Message?
        inbox.withLock { q in
            guard !q.ended else {
                dropped = m
                return
            }
            q.messages.append(m)
            if q.messages.count == 1 {
                var one: UInt64 = 1
                _ = write(wakeFD, &one, 8)
            }
        }
        if let dropped { discard(dropped) }
    }

    /// A message the ended loop will never handle: a connection handed over is closed, a
    /// stream's producer learns its reader is gone.
    private func discard(_ m: Message) {
        switch m {
        case .adopt(let fd, _, _):
            close(fd)
            open.value.subtract(1, ordering: .relaxed)
        case .answer(_, _, let r): r.stream?.released()
        case .run(let body): body(false)
        case .resume, .stop: break
        }
    }

    /// Request `seq` of `c` is answered: at once on the loop thread (a commit it ran), else
    /// posted.
    func answer(_ c: HTTP1Connection, _ seq: UInt64, _ r: HTTPResponse) {
        if pthread_equal(pthread_self(), pthread_t(thread.load(ordering: .acquiring))) != 0 {
            c.answered(seq, r)
        } else {
            post(.answer(c, seq, r))
        }
    }

    /// Asks the loop to flush `c` soon, from any thread (at once on the loop's own).
    func wake(_ c: HTTP1Connection) {
        if pthread_equal(pthread_self(), pthread_t(thread.load(ordering: .acquiring))) != 0 {
            markDirty(c)
        } else {
            post(.resume(c))
        }
    }

    func markDirty(_ c: HTTP1Connection) {
        guard !c.isDirty else { return }
        c.isDirty = true
        dirty.append(c)
    }

    /// `c` stopped reading to let answers out: read it again this round.
    func readAgain(_ c: HTTP1Connection) { again.append(c) }

    /// `c` starts waiting for a request head (its `headSince` just set): past the bound, the one
    /// that has waited longest is closed.
    func startWaiting(_ c: HTTP1Connection) {
        c.waitingPrevious = waitingLast
        c.waitingNext = nil
        if let last = waitingLast { last.waitingNext = c } else { waitingFirst = c }
        waitingLast = c
        waitingCount += 1
        if waitingCount > maxWaitingForHead, let oldest = waitingFirst, oldest !== c {
            // Nothing is written to it: under a flood, a lingering close would hold the
            // descriptor for two more seconds.
            oldest.closeNow()
        }
    }

    /// `c` no longer waits for a head (it came, or the connection closed).
    func stopWaiting(_ c: HTTP1Connection) {
        let previous = c.waitingPrevious, next = c.waitingNext
        if let previous { previous.waitingNext = next } else { waitingFirst = next }
        if let next { next.waitingPrevious = previous } else { waitingLast = previous }
        c.waitingPrevious = nil
        c.waitingNext = nil
        waitingCount -= 1
    }

    /// Ends the heads whose time is up (the list is in the order their clocks started); returns
    /// the milliseconds until the next one's, at most `cap`.
    private func endLateHeads(now: UInt64, cap: Int32) -> Int32 {
        while let c = waitingFirst, let since = c.headSince {
            let due = since &+ headTimeoutNanos
            if now < due { return Int32(Swift.min(UInt64(cap), (due - now) / 1_000_000 + 1)) }
            c.headTimedOut()
        }
        return cap
    }

    func forget(_ c: HTTP1Connection) {
        if Int(c.fd) < connections.count, connections[Int(c.fd)] === c { connections[Int(c.fd)] = nil }
        open.value.subtract(1, ordering: .relaxed)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        var lastSweep = monotonicNanos()
        var stopDeadline: UInt64?
        /// Connections to read, and whether their event said the client's input ended.
        var readable: [(HTTP1Connection, ended: Bool)] = []
        while true {
            // Connections left dirty by `flushDirty`'s bound are served again at once.
            let untilLateHead = stopDeadline == nil ? endLateHeads(now: monotonicNanos(), cap: 1000) : 20
            let n = epoll_wait(epollFD, &events, Int32(events.count), !dirty.isEmpty ? 0 : untilLateHead)
            if n < 0 && errno != EINTR { break }
            readable.removeAll(keepingCapacity: true)
            for i in 0..<Swift.max(0, Int(n)) {
                let fd = events[i].data.fd
                if fd == wakeFD {
                    var sink: UInt64 = 0
                    _ = read(wakeFD, &sink, 8)
                    continue
                }
                guard Int(fd) < connections.count, let c = connections[Int(fd)] else { continue }
                let ev = events[i].events
                if ev & (FCM_EPOLLHUP | FCM_EPOLLERR) != 0 {
                    // Reset or shut both ways: nothing more can be answered.
                    c.abandon()
                    continue
                }
                if ev & (FCM_EPOLLIN | FCM_EPOLLRDHUP) != 0 { readable.append((c, ev & FCM_EPOLLRDHUP != 0)) }
                if ev & FCM_EPOLLOUT != 0 { markDirty(c) }
            }
            drainInbox(&stopDeadline)
            for (c, ended) in readable { c.readAvailable(into: &scratch, shortReadDrains: !ended) }
            endBatch()
            drainInbox(&stopDeadline)
            endBatch()  // work handed back to the loop since (`.run`)
            flushDirty(&scratch)
            let now = monotonicNanos()
            if let d = stopDeadline {
                if now > d || connections.allSatisfy({ $0 == nil || $0!.isIdle || $0!.lingerUntil != nil }) {
                    for case let c? in connections { c.abandon() }
                    return
                }
            } else if now &- lastSweep > 1_000_000_000 {
                lastSweep = now
                sweepIdle(now)
            }
        }
    }

    /// Every request handed over this round: `afterBatch` once for them all.
    private func endBatch() {
        guard batchPending else { return }
        batchPending = false
        core.afterBatch?()
    }

    private func drainInbox(_ stopDeadline: inout UInt64?) {
        let messages = inbox.withLock { q -> [Message] in
            defer { q.messages.removeAll(keepingCapacity: true) }
            return q.messages
        }
        for m in messages {
            switch m {
            case .adopt(let fd, let secure, let remote): adopt(fd, secure: secure, remote: remote)
            case .answer(let c, let seq, let r): c.answered(seq, r)
            case .resume(let c): markDirty(c)
            case .run(let body):
                body(core.afterBatch != nil)
                batchPending = true
            case .stop:
                guard !isStopping else { continue }
                isStopping = true
                stopDeadline = monotonicNanos() + 1_000_000_000
                for case let c? in connections { c.answerWaitingWhileStopping() }
            }
        }
    }

    private func adopt(_ fd: Int32, secure: Bool, remote: String?) {
        guard !isStopping else {
            close(fd)
            open.value.subtract(1, ordering: .relaxed)
            return
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let c = HTTP1Connection(fd: fd, loop: self, secure: secure, remote: remote)
        if Int(fd) >= connections.count { connections += Array(repeating: nil, count: Int(fd) + 1 - connections.count) }
        connections[Int(fd)] = c
        // Its first request's head is on the clock from now.
        c.updateHeadClock()
        var ev = epoll_event()
        ev.events = FCM_EPOLLIN | FCM_EPOLLOUT | FCM_EPOLLRDHUP | FCM_EPOLLET
        ev.data.fd = fd
        guard epoll_ctl(epollFD, Int32(EPOLL_CTL_ADD), fd, &ev) == 0 else {
            c.closeNow()
            return
        }
    }

    private func flushDirty(_ scratch: inout [UInt8]) {
        // Flushing may read more (room made for pipelined requests), which may answer more.
        var rounds = 0
        while !dirty.isEmpty && rounds < 8 {
            rounds += 1
            let d = date(now: time(nil))
            let list = dirty
            dirty.removeAll(keepingCapacity: true)
            for c in list {
                c.isDirty = false
                c.flush(date: d)
            }
            let more = again
            again.removeAll(keepingCapacity: true)
            for c in more where !c.closed { c.readAvailable(into: &scratch) }
            endBatch()
        }
    }

    /// Closes connections idle, or not reading their answers, for longer than libmicrohttpd's
    /// time-out was (300 s), and ends lingering closes whose time is up. An upgraded connection
    /// has its own deadlines instead (idle, first message, the closing handshake).
    private func sweepIdle(_ now: UInt64) {
        for case let c? in connections {
            if let until = c.lingerUntil {
                if now > until { c.abandon() }
            } else if let ws = c.webSocket {
                c.sweepWebSocket(ws, now: now)
            } else if (c.isIdle || c.isStalled) && now &- c.lastActivity > 300 * 1_000_000_000 {
                c.closeNow()
            }
        }
    }

    /// The `Date` field's value (RFC 9110's IMF-fixdate), made once a second.
    private func date(now: time_t) -> [UInt8] {
        if Int(now) == dateSecond { return date }
        var t = now
        var tm = tm()
        gmtime_r(&t, &tm)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let text = "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) "
            + "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) GMT"
        date = Array(text.utf8)
        dateSecond = Int(now)
        return date
    }
}

/// A count of open connections shared by the loops (a class, so each loop holds it without
/// holding the group).
final class OpenCount: Sendable {
    let value = Atomic<Int>(0)
}

/// The threads that handle requests with large bodies off the loop (see
/// `HTTP1Connection.offLoopBodyBytes`): two, started when first needed, so two such requests
/// run on both cores at once. Threads of our own rather than a Dispatch queue: the bench's memory
/// after 100,000 messages (sent as multicasts, so all handled here) was 0.6 MB lower.
///
/// `@unchecked Sendable`: `jobs`, `started`, `idle`, `stopped` and `done` are reached only under
/// `lock`.
final class OffLoopWorkers: @unchecked Sendable {
    private let lock = ConditionLock()
    private var jobs: [@Sendable () -> Void] = []
    private var started = 0
    private var idle = 0
    private var stopped = false
    private var done = 0
    static let threads = 2

    func run(_ job: @escaping @Sendable () -> Void) {
        let spawn = lock.withLock { () -> Bool in
            jobs.append(job)
            if idle > 0 {
                lock.broadcast()
                return false
            }
            guard started < Self.threads else { return false }
            started += 1
            return true
        }
        guard spawn, !trySpawnThread({ [self] in work() }) else { return }
        // No thread to be had (a process or address-space limit): a running one takes the job;
        // with none running, what is queued runs here rather than never.
        let orphans = lock.withLock { () -> [@Sendable () -> Void] in
            started -= 1
            guard started == 0 else { return [] }
            defer { jobs.removeAll(keepingCapacity: true) }
            return jobs
        }
        for j in orphans { j() }
    }

    /// Lets the threads end once the jobs queued are done.
    func stop() {
        lock.withLock {
            stopped = true
            lock.broadcast()
        }
    }

    private func work() {
        while true {
            let job = lock.withLock { () -> (@Sendable () -> Void)? in
                while jobs.isEmpty && !stopped {
                    idle += 1
                    lock.wait()
                    idle -= 1
                }
                return jobs.isEmpty ? nil : jobs.removeFirst()
            }
            guard let job else { return }
            job()
            // Large requests leave large free blocks in this thread's malloc arena, which the
            // loop's own arena never reuses: given back every fourth one, when no other waits
            // (after each one it cost 8% of a multicast's CPU).
            let trim = lock.withLock { () -> Bool in
                done += 1
                return jobs.isEmpty && done % 4 == 0
            }
            if trim { SystemIO.releaseFreedMemory() }
        }
    }
}
