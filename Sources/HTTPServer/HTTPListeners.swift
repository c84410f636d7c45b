import Platform
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP/2 connection preface (RFC 9113 §3.4): a client with prior knowledge sends it first.
let http2Preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// A socket `accept` gave, with the peer's address.
struct AcceptedSocket {
    var fd: Int32
    var address = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
}

/// `address` as "ip:port" ("[ip]:port" for IPv6); "unknown" for another family.
func addressText(_ address: sockaddr_storage) -> String {
    var a = address
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    return withUnsafePointer(to: &a) { p -> String in
        switch Int32(address.ss_family) {
        case AF_INET:
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 -> String in
                var addr = v4.pointee.sin_addr
                inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
                return "\(cText(text)):\(UInt16(bigEndian: v4.pointee.sin_port))"
            }
        case AF_INET6:
            return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 -> String in
                var addr = v6.pointee.sin6_addr
                inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
                return "[\(cText(text))]:\(UInt16(bigEndian: v6.pointee.sin6_port))"
            }
        default:
            return "unknown"
        }
    }
}

/// A NUL-terminated buffer's text.
private func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The peer of connected socket `fd` as `addressText` writes it.
func peerAddress(of fd: Int32) -> String {
    var address = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let rc = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
    }
    return rc == 0 ? addressText(address) : "unknown"
}

/// Where accepted connections go: the HTTP/1.1 loops or an HTTP/2 connection thread.
protocol ConnectionSink: AnyObject, Sendable {
    /// Hands `fd` to an HTTP/1.1 loop, which owns it from now on; `secure`: its bytes came over
    /// TLS (the socket is one end of a pair a TLS connection's thread pumps), which each of its
    /// requests then says. `remote`: the client's "ip:port" when `fd` is not its socket.
    func addHTTP1(_ fd: Int32, secure: Bool, remote: String?)
    /// Serves `transport` as HTTP/2 on the calling thread until the connection ends.
    func runHTTP2(_ transport: any HTTP2Transport)
    /// Serves `transport` as HTTP/2 on a new thread.
    func startHTTP2(_ transport: any HTTP2Transport)
}

/// A thread accepting on a listening socket until `stop()`; `poll` also watches a pipe, so
/// stopping never waits for a client.
///
/// `@unchecked Sendable`: the descriptors are immutable; `stopped`/`finished` are atomics.
class Acceptor: @unchecked Sendable {
    let listenFD: Int32
    let wake: (Int32, Int32)
    let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    unowned let sink: any ConnectionSink
    /// How long a new connection has to show its first bytes before it is taken for HTTP/1.1:
    /// the plain port's h2c sniffing and the HTTPS port's clients without ALPN wait as long.
    let sniffMillis = 2000

    init(listenFD: Int32, sink: any ConnectionSink) {
        self.wake = wakePipe() ?? (-1, -1)
        self.listenFD = listenFD
        self.sink = sink
        let flags = fcntl(listenFD, F_GETFL)
        _ = fcntl(listenFD, F_SETFL, flags | O_NONBLOCK)
    }

    func start() {
        spawnThread { [self] in
            loop()
            finished.store(true, ordering: .sequentiallyConsistent)
        }
    }

    /// Stops accepting (waits up to a second for the thread) and closes the listening socket.
    func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var one: UInt8 = 1
        _ = Glibc.write(wake.1, &one, 1)
        var waited = 0
        while !finished.load(ordering: .sequentiallyConsistent) && waited < 200 {
            usleep(5000)
            waited += 1
        }
        close(listenFD)
        close(wake.0)
        close(wake.1)
    }

    func loop() {}

    /// Every connection waiting on the listening socket (non-blocking accept until none).
    func acceptAll(nonBlocking: Bool) -> [AcceptedSocket] {
        var out: [AcceptedSocket] = []
        while out.count < 256 {
            var s = AcceptedSocket(fd: -1)
            let fd = withUnsafeMutablePointer(to: &s.address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listenFD, $0, &s.length)
                }
            }
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                break
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            // Linux sockets do not inherit O_NONBLOCK from the listening socket.
            if nonBlocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            s.fd = fd
            out.append(s)
        }
        return out
    }
}

/// The plain HTTP port: each new connection's first bytes are peeked at (never consumed); the
/// HTTP/2 preface makes it h2c, anything else goes to the HTTP/1.1 loops untouched. One thread polls
/// the listening socket and every connection not yet classified, so a slow client holds no
/// one up: after `sniffMillis` without a verdict, or past `maxPending` undecided connections
/// (the oldest first), a connection is taken as HTTP/1.1, which is what a client waiting for
/// the server to speak first (none should) gets today.
final class PlainAcceptor: Acceptor, @unchecked Sendable {
    let maxPending = 1024

    private struct Pending {
        var socket: AcceptedSocket
        var deadline: UInt64
        /// The first bytes matched a part of the preface: `poll` would wake at once again, so
        /// the socket is peeked at every few milliseconds instead.
        var partial = false
    }

    override func loop() {
        var pending: [Pending] = []
        var peek = [UInt8](repeating: 0, count: http2Preface.count)
        defer { for p in pending { close(p.socket.fd) } }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            var fds = [pollfd(fd: wake.0, events: Int16(POLLIN), revents: 0), pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            var anyPartial = false
            for p in pending {
                fds.append(pollfd(fd: p.socket.fd, events: p.partial ? 0 : Int16(POLLIN), revents: 0))
                anyPartial = anyPartial || p.partial
            }
            let now = monotonicNanos()
            var timeout = 1000
            if let next = pending.map(\.deadline).min() { timeout = min(timeout, Int((next > now ? next - now : 0) / 1_000_000) + 1) }
            if anyPartial { timeout = min(timeout, 10) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(timeout))
            if ready < 0 && errno != EINTR { return }
            if stopped.load(ordering: .sequentiallyConsistent) { return }
            let after = monotonicNanos()
            var keep: [Pending] = []
            for (i, var p) in pending.enumerated() {
                let r = fds[i + 2].revents
                guard r != 0 || p.partial || after >= p.deadline else {
                    keep.append(p)
                    continue
                }
                let n = recv(p.socket.fd, &peek, peek.count, Int32(MSG_PEEK))
                if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) {
                    close(p.socket.fd)  // gone before saying anything
                } else if n > 0 && peek[0..<n] != http2Preface[0..<n] {
                    sink.addHTTP1(p.socket.fd, secure: false, remote: nil)
                } else if n == http2Preface.count {
                    sink.startHTTP2(PlainTransport(fd: p.socket.fd))
                } else if after >= p.deadline {
                    sink.addHTTP1(p.socket.fd, secure: false, remote: nil)
                } else {
                    p.partial = n > 0
                    keep.append(p)
                }
            }
            pending = keep
            if fds[1].revents != 0 {
                for s in acceptAll(nonBlocking: true) {
                    if pending.count >= maxPending { sink.addHTTP1(pending.removeFirst().socket.fd, secure: false, remote: nil) }
                    pending.append(Pending(socket: s, deadline: monotonicNanos() + UInt64(sniffMillis) * 1_000_000))
                }
            }
            if fds[0].revents != 0 {
                var sinkBytes = [UInt8](repeating: 0, count: 16)
                while read(wake.0, &sinkBytes, 16) > 0 {}
            }
        }
    }
}

/// A TLS port (the HTTPS port, or the plain port with `--http-tls`): each connection gets a
/// thread that runs the TLS handshake offering `protocols` by ALPN (ours first); `h2` is served
/// by an HTTP/2 connection on that thread, anything else (http/1.1, or no ALPN) by the HTTP/1.1
/// loops through a socket pair the thread pumps: the loop sees a plain HTTP/1.1 client (its
/// requests marked secure), so every HTTP/1.1 port has one implementation, with one set of
/// limits, answers and error pages, one access log and one shutdown.
///
/// A client that offered no ALPN on a port that serves `h2` is told apart by its first bytes, as
/// on the plain port: the HTTP/2 preface makes the connection HTTP/2 (aioapns, like some other
/// APNs clients, speaks HTTP/2 over TLS without offering `h2`), anything else is HTTP/1.1. The
/// bytes read to decide are handed on, not lost.
final class TLSAcceptor: Acceptor, @unchecked Sendable {
    let credentials: TLSCredentials
    let limits: HTTP2Limits
    /// The ALPN protocols offered, ours first: `h2` and `http/1.1` on the HTTPS port,
    /// `http/1.1` alone on a plain port that speaks TLS (`--http-tls`).
    let protocols: [String]
    /// Whether the handshake asks the client for a certificate (never requiring one): the HTTPS
    /// port does, for APNs certificate authentication (`HTTPRequest.clientCertificate`).
    let requestsClientCertificate: Bool
    /// Connections being handshaken or pumped (each holds a thread).
    private let open = Atomic<Int>(0)

    init(listenFD: Int32, sink: any ConnectionSink, credentials: TLSCredentials, limits: HTTP2Limits, protocols: [String],
         requestsClientCertificate: Bool = false) {
        self.credentials = credentials
        self.limits = limits
        self.protocols = protocols
        self.requestsClientCertificate = requestsClientCertificate
        super.init(listenFD: listenFD, sink: sink)
    }

    override func loop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            var fds = [pollfd(fd: wake.0, events: Int16(POLLIN), revents: 0), pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, 1000)
            if ready < 0 && errno != EINTR { return }
            if stopped.load(ordering: .sequentiallyConsistent) || fds[0].revents != 0 { return }
            guard fds[1].revents != 0 else { continue }
            for s in acceptAll(nonBlocking: false) {
                guard open.load(ordering: .relaxed) < limits.maxConnections else {
                    close(s.fd)
                    continue
                }
                open.add(1, ordering: .relaxed)
                let started = trySpawnThread { [self] in
                    serve(s)
                    open.subtract(1, ordering: .relaxed)
                }
                if !started {
                    // No thread to be had: this connection is refused, the server goes on.
                    open.subtract(1, ordering: .relaxed)
                    close(s.fd)
                }
            }
        }
    }

    private func serve(_ s: AcceptedSocket) {
        configureConnectionSocket(s.fd, seconds: limits.handshakeSeconds)
        let session: TLSSession
        do {
            session = try TLSSession(serverOn: s.fd, credentials: credentials, protocols: protocols,
                                     requestingClientCertificate: requestsClientCertificate, handshakeSeconds: limits.handshakeSeconds)
        } catch {
            close(s.fd)
            return
        }
        let tls = TLSTransport(fd: s.fd, session: session)
        switch session.negotiatedProtocol {
        case "h2":
            sink.runHTTP2(tls)
            return
        case nil where protocols.contains("h2"):
            guard let first = firstBytes(tls) else {
                tls.close()
                return
            }
            // Back to the handshake's time-out, which the sniffing shortened.
            setReceiveTimeout(tls.fd, seconds: limits.handshakeSeconds)
            tls.unread(first)
            if first.starts(with: http2Preface) {
                sink.runHTTP2(tls)
                return
            }
        default:
            break
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            tls.close()
            return
        }
        // The loop sees a socket pair: the client's address travels with it (a WebSocket's `remote`).
        sink.addHTTP1(pair[1], secure: true, remote: addressText(s.address))
        pump(tls, pair[0])
    }

    /// The first bytes a client without ALPN sends: read until they are the whole HTTP/2
    /// preface or stop matching it, or `sniffMillis` pass (a client waiting for the server, taken
    /// for HTTP/1.1); nil when the client closes or fails before sending anything. A read of a
    /// TLS record that has begun to arrive waits for the rest of it: the socket's receive time-out
    /// is set to the time left first, so half a record holds the decision no longer either.
    private func firstBytes(_ tls: TLSTransport) -> [UInt8]? {
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let deadline = monotonicNanos() + UInt64(sniffMillis) * 1_000_000
        while got.count < http2Preface.count && got.elementsEqual(http2Preface.prefix(got.count)) {
            if !tls.hasBufferedData {
                let now = monotonicNanos()
                guard now < deadline else { return got }
                var p = pollfd(fd: tls.fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1)
                if ready < 0 && errno != EINTR { return nil }
                if ready <= 0 { continue }
                let before = monotonicNanos()
                setReceiveTimeout(tls.fd, nanos: before < deadline ? max(deadline - before, 1000) : 1000)
            }
            let n = buffer.withUnsafeMutableBytes { tls.read($0.baseAddress!, $0.count) }
            if n < 0 && errno == EAGAIN { continue }
            if n <= 0 { return got.isEmpty ? nil : got }
            got += buffer[0..<n]
        }
        return got
    }

    /// Copies bytes both ways between the TLS client and the loop's end of the pair until either
    /// side closes (the loop's time-outs included).
    private func pump(_ tls: TLSTransport, _ local: Int32) {
        defer {
            tls.close()
            close(local)
        }
        configureConnectionSocket(local, seconds: 30)
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var fromClient = tls.hasBufferedData
            var fromServer = false
            if !fromClient {
                var fds = [pollfd(fd: tls.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: local, events: Int16(POLLIN), revents: 0)]
                let ready = poll(&fds, 2, 1000)
                if ready < 0 && errno != EINTR { return }
                fromClient = fds[0].revents != 0
                fromServer = fds[1].revents != 0
            }
            if fromClient {
                let n = buffer.withUnsafeMutableBytes { tls.read($0.baseAddress!, $0.count) }
                if n < 0 && errno == EAGAIN { continue }
                if n <= 0 { return }
                guard buffer.withUnsafeBytes({ writeAll(local, UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { return }
            }
            if fromServer {
                let n = buffer.withUnsafeMutableBytes { recv(local, $0.baseAddress!, $0.count, 0) }
                if n <= 0 { return }
                guard buffer.withUnsafeBytes({ tls.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) else { return }
            }
        }
    }
}
