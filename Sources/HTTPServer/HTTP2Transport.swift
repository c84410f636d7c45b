import Platform
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// The byte stream under an HTTP/2 connection: a plain socket (h2c) or a TLS session (h2).
/// Used by the connection's own thread only; the socket is blocking with send and receive
/// time-outs, and is read only after `poll` says so (or `hasBufferedData`).
protocol HTTP2Transport: AnyObject {
    var fd: Int32 { get }
    /// Bytes already decrypted that `poll` on the socket would not see.
    var hasBufferedData: Bool { get }
    /// Up to `max` bytes; 0 at the end of the stream, -1 on error.
    func read(_ buffer: UnsafeMutableRawPointer, _ max: Int) -> Int
    /// All of `bytes`; false on error (or the peer not reading within the send time-out).
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// Ends the stream and closes the socket.
    func close()
    /// Whether the bytes travel over TLS.
    var isSecure: Bool { get }
    /// The client's certificate (DER) when it presented one in the TLS handshake.
    var peerCertificate: [UInt8]? { get }
}

/// Makes `fd` blocking with `seconds` of send and receive time-out: the connection threads
/// wait in `poll`, and a write to a peer that stopped reading fails instead of hanging.
func configureConnectionSocket(_ fd: Int32, seconds: Int) {
    let flags = fcntl(fd, F_GETFL)
    if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
    setReceiveTimeout(fd, seconds: seconds)
    var tv = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}

/// A TCP socket as is.
final class PlainTransport: HTTP2Transport {
    let fd: Int32
    init(fd: Int32) { self.fd = fd }
    var hasBufferedData: Bool { false }
    var isSecure: Bool { false }
    var peerCertificate: [UInt8]? { nil }

    func read(_ buffer: UnsafeMutableRawPointer, _ max: Int) -> Int {
        while true {
            let n = recv(fd, buffer, max, 0)
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { writeAll(fd, bytes) }

    func close() { _ = Glibc.close(fd) }
}

/// A TLS session over its socket.
final class TLSTransport: HTTP2Transport {
    let fd: Int32
    let session: TLSSession
    var isSecure: Bool { true }
    /// Read once, after the handshake: every request of the connection carries it.
    let peerCertificate: [UInt8]?
    /// Bytes already read from the session and given back (`unread`): the next reads return them
    /// first.
    private var pending: [UInt8] = []

    init(fd: Int32, session: TLSSession) {
        self.fd = fd
        self.session = session
        peerCertificate = session.peerCertificate
    }

    var hasBufferedData: Bool { !pending.isEmpty || session.hasBufferedData }

    func read(_ buffer: UnsafeMutableRawPointer, _ max: Int) -> Int {
        guard !pending.isEmpty else { return session.read(buffer, max) }
        let n = min(max, pending.count)
        pending.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: n) }
        pending.removeFirst(n)
        return n
    }

    /// Puts `bytes` back in front of what the session has not yet been read of.
    func unread(_ bytes: [UInt8]) { pending = bytes + pending }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool { session.write(bytes) }
    func close() {
        session.bye()
        _ = Glibc.close(fd)
    }
}

/// Writes all of `bytes` to a blocking socket; false on error or time-out.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var off = 0
    while off < bytes.count {
        let n = send(fd, bytes.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL))
        if n < 0 {
            if errno == EINTR { continue }
            return false
        }
        off += n
    }
    return true
}

/// A pipe whose ends are close-on-exec and non-blocking: [read end, write end] (`pipe2` is a GNU
/// extension Swift does not see).
func wakePipe() -> (Int32, Int32)? {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return nil }
    for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
    return (fds[0], fds[1])
}
