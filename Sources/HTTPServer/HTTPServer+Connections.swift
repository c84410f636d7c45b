import Synchronization
import Platform
public import TLS

#if canImport(Glibc)
    import Glibc
#endif

// Where the accept loops hand connections: the HTTP/1.1 loops, or an `HTTP2Connection` for
// HTTP/2.
extension HTTPServer: ConnectionSink {
    func addHTTP1(_ fd: Int32, secure: Bool, remote: String?) {
        guard let loops = http1.withLock({ $0 }) else {
            close(fd)
            return
        }
        loops.adopt(fd, secure: secure, remote: remote)
    }

    func runHTTP2(_ transport: any HTTP2Transport) {
        guard let c = newHTTP2Connection(transport) else { return }
        c.run()
    }

    func startHTTP2(_ transport: any HTTP2Transport) {
        configureConnectionSocket(transport.fd, seconds: http2Limits.handshakeSeconds)
        guard let c = newHTTP2Connection(transport) else { return }
        // No thread to be had (a process or address-space limit): this connection is refused,
        // the server goes on.
        if !trySpawnThread({ c.run() }) {
            core.untrack(c)
            transport.close()
        }
    }

    /// A registered connection, or nil (and the transport closed) past the connection limit or
    /// once stopping.
    private func newHTTP2Connection(_ transport: any HTTP2Transport) -> HTTP2Connection? {
        let core = self.core
        guard !stopped.load(ordering: .relaxed),
              let c = HTTP2Connection(transport: transport, core: core, limits: http2Limits, onEnd: { core.untrack($0) }),
              core.track(c, max: http2Limits.maxConnections) else {
            transport.close()
            return nil
        }
        if core.refusing.load(ordering: .sequentiallyConsistent) { c.post(.goAway) }
        return c
    }
}

/// The HTTPS port: its number (0 picks one) and the certificate it presents.
public struct HTTPSListenerOptions: Sendable {
    public let port: Int
    public let credentials: TLSCredentials
    public init(port: Int, credentials: TLSCredentials) {
        self.port = port
        self.credentials = credentials
    }
}
