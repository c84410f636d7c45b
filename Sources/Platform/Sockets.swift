#if canImport(Glibc)
    import Glibc
#endif

/// Why a socket could not be opened: a sentence for a person, and the `errno` behind it.
public struct SocketError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The `errno` behind it, when a system call failed (`EADDRINUSE` for a busy port).
    public let code: Int32
    /// For a listener that could not open: the address it asked for and why it failed, so a
    /// caller can say which listener it was without taking the description apart.
    public let listening: (address: String, reason: String)?

    public init(_ description: String, code: Int32 = 0) {
        self.description = description
        self.code = code
        listening = nil
    }

    init(listeningOn address: String, reason: String, code: Int32) {
        description = "cannot listen on \(address): \(reason)"
        self.code = code
        listening = (address, reason)
    }
}

/// Opens listening TCP sockets with errors a person can act on (busy port, bad address).
public enum ListenSocket {
    /// Binds and listens on `host:port` (IPv4 or IPv6 literal, or a name such as `localhost`);
    /// returns the descriptor and the bound port (useful when `port` is 0).
    public static func open(host: String, port: Int) throws(SocketError) -> (fd: Int32, port: Int) {
        guard (0...65535).contains(port) else { throw SocketError("port \(port) is out of range 0-65535") }
        let fd = try newSocket(host: host, port: port, passive: true) { fd, ai throws(SocketError) in
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            guard bind(fd, ai.ai_addr, ai.ai_addrlen) == 0, listen(fd, 1024) == 0 else {
                let code = errno
                throw SocketError(listeningOn: "\(host):\(port)", reason: String(cString: strerror(code)), code: code)
            }
        }
        var addr = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard bound == 0 else { close(fd); throw SocketError("getsockname failed") }
        let actual: Int = withUnsafePointer(to: &addr) { p in
            if Int32(p.pointee.ss_family) == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        return (fd, actual)
    }
}

/// Opens client TCP connections.
public enum ConnectSocket {
    /// A socket connected to `host:port` (an IP literal or a name; the first address the resolver
    /// gives), with `receiveTimeout` seconds on each receive when given (set before connecting),
    /// and on the connect and each send too (Linux bounds `connect` by the send time-out: a
    /// server whose accept queue is full would otherwise hold it for minutes).
    public static func open(host: String, port: Int, receiveTimeout: Int? = nil) throws(SocketError) -> Int32 {
        try newSocket(host: host, port: port, passive: false) { fd, ai throws(SocketError) in
            if let receiveTimeout {
                setReceiveTimeout(fd, seconds: receiveTimeout)
                var tv = timeval(tv_sec: receiveTimeout, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            }
            guard connect(fd, ai.ai_addr, ai.ai_addrlen) == 0 else {
                let code = errno
                throw SocketError("connect to \(host):\(port) failed: \(String(cString: strerror(code)))", code: code)
            }
        }
    }
}

/// A TCP socket for the first address `host:port` resolves to (`passive`: an address to bind),
/// set up by `body` (bind and listen, or connect); closed again when `body` throws.
private func newSocket(host: String, port: Int, passive: Bool,
                       _ body: (Int32, addrinfo) throws(SocketError) -> Void) throws(SocketError) -> Int32 {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = passive ? AI_PASSIVE | AI_NUMERICSERV : 0
    var res: UnsafeMutablePointer<addrinfo>?
    let gai = getaddrinfo(host, String(port), &hints, &res)
    guard gai == 0, let first = res else {
        throw SocketError("cannot use host '\(host)': \(String(cString: gai_strerror(gai)))")
    }
    defer { freeaddrinfo(res) }
    let ai = first.pointee
    let fd = socket(ai.ai_family, ai.ai_socktype, ai.ai_protocol)
    guard fd >= 0 else { throw SocketError("cannot create a socket: \(String(cString: strerror(errno)))") }
    do {
        try body(fd, ai)
    } catch {
        close(fd)
        throw error
    }
    return fd
}

/// Sets how long each receive on `fd` may wait (0: for ever); a receive that times out fails
/// with `EAGAIN`.
public func setReceiveTimeout(_ fd: Int32, seconds: Int) {
    setReceiveTimeout(fd, nanos: UInt64(seconds) * 1_000_000_000)
}

/// Sets how long each receive on `fd` may wait, in nanoseconds (rounded down to microseconds).
public func setReceiveTimeout(_ fd: Int32, nanos: UInt64) {
    var tv = timeval(tv_sec: Int(nanos / 1_000_000_000), tv_usec: Int(nanos % 1_000_000_000 / 1000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
}
