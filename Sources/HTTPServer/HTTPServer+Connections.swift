import Synchronization
import CMicroHTTPD
import Platform
public import TLS

#if canImport(Glibc)
    import Glibc
#endif

// Where the accept loops hand connections: libmicrohttpd for HTTP/1.1, an `HTTP2Connection`
// for HTTP/2.
extension HTTPServer: ConnectionSink {
    func addHTTP1(_ socket: AcceptedSocket, bridge: Bool) {
        if !bridge, let loops = http1.withLock({ $0 }) {
            loops.adopt(socket.fd)
            return
        }
        var s = socket
        daemons.withLock { d in
            let target = bridge && d.bridge != 0 ? d.bridge : d.main
            guard let daemon = OpaquePointer(bitPattern: target) else {
                close(s.fd)
                return
            }
            // libmicrohttpd closes the socket itself when it cannot take it.
            _ = withUnsafePointer(to: &s.address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, s.fd, $0, s.length) }
            }
        }
    }

    func runHTTP2(_ transport: any HTTP2Transport) {
        guard let c = newHTTP2Connection(transport) else { return }
        c.run()
    }

    func startHTTP2(_ transport: any HTTP2Transport) {
        configureConnectionSocket(transport.fd, seconds: http2Limits.handshakeSeconds)
        guard let c = newHTTP2Connection(transport) else { return }
        spawnThread { c.run() }
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

/// The context libmicrohttpd's callbacks receive for one daemon.
final class DaemonFace: Sendable {
    let core: ServerCore
    let secure: Bool
    init(core: ServerCore, secure: Bool) {
        self.core = core
        self.secure = secure
    }
}
