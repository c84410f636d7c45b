import FCMCore
import HTTPServer
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Holds the XMPP port until the CCS listener exists: it binds the port (so the `listening` line
/// reports a real, reserved port) and answers every connection with a stream error saying the
/// service is not available, then closes it.
final class XMPPPlaceholderListener: Sendable {
    let port: Int
    private let fd: Int32
    private let stopped = Mutex(false)

    init(host: String, port: Int) throws(HTTPServerError) {
        let (fd, bound) = try ListenSocket.open(host: host, port: port)
        self.fd = fd
        self.port = bound
    }

    func start() {
        let fd = self.fd
        spawnThread { [self] in
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 {
                    if stopped.withLock({ $0 }) { return }
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                let reply = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' "
                    + "id='0000000000000000' version='1.0'><stream:error><service-unavailable xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
                    + "<text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>XMPP (CCS) is not implemented in this version of fcm-mock</text>"
                    + "</stream:error></stream:stream>"
                _ = reply.withCString { send(c, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                close(c)
            }
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
