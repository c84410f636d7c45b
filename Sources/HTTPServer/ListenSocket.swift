#if canImport(Glibc)
    import Glibc
#endif

/// Opens listening TCP sockets with errors a person can act on (busy port, bad address).
public enum ListenSocket {
    /// Binds and listens on `host:port` (IPv4 or IPv6 literal, or a name such as `localhost`);
    /// returns the descriptor and the bound port (useful when `port` is 0).
    public static func open(host: String, port: Int) throws(HTTPServerError) -> (fd: Int32, port: Int) {
        guard (0...65535).contains(port) else { throw HTTPServerError("port \(port) is out of range 0-65535") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var res: UnsafeMutablePointer<addrinfo>?
        let gai = getaddrinfo(host, String(port), &hints, &res)
        guard gai == 0, let first = res else {
            throw HTTPServerError("cannot use host '\(host)': \(String(cString: gai_strerror(gai)))")
        }
        defer { freeaddrinfo(res) }
        let ai = first.pointee
        let fd = socket(ai.ai_family, ai.ai_socktype, ai.ai_protocol)
        guard fd >= 0 else { throw HTTPServerError("cannot create a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, ai.ai_addr, ai.ai_addrlen) == 0, listen(fd, 1024) == 0 else {
            let code = errno
            close(fd)
            throw HTTPServerError("cannot listen on \(host):\(port): \(String(cString: strerror(code)))", code: code)
        }
        var addr = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard bound == 0 else { close(fd); throw HTTPServerError("getsockname failed") }
        let actual: Int = withUnsafePointer(to: &addr) { p in
            if Int32(p.pointee.ss_family) == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        return (fd, actual)
    }
}
