import CCS
import FCMModel
import Platform
import RoomKit
import TLS
import XMPPServer
#if canImport(Glibc)
    import Glibc
#endif

/// What starting the server needs besides the assembly itself: the local CA, the files a failed
/// start removes again, and the lines that say which port is in the way and how to get free ones.
extension Application {
    /// The local CA of `--https-port` (made once in `tlsDirectory`, reused after) and the server
    /// certificate it signed, loaded; the CA file's absolute path; the CA itself.
    static func localCA(_ c: Configuration, log: Log) throws(TLSError) -> (TLSCredentials, String, LocalCertificateAuthority) {
        let (ca, created, renewed) = try LocalCertificateAuthority.loadOrCreate(names: Self.googleHosts, directory: caDirectory(c))
        if let renewed { log.warning("the local CA's server certificate: " + renewed, [("tls.ca", SystemIO.absolutePath(ca.caCertificate))]) }
        let credentials = try TLSCredentials(certificate: ca.serverCertificate, key: ca.serverKey)
        let path = SystemIO.absolutePath(ca.caCertificate)
        // A warning, so the path is logged at every level clients may need it at.
        // Named by the listeners that use it (MCS takes the HTTPS port's certificate).
        let users = [c.httpsPort.map { _ in "--https-port" }, c.mcsPort.map { _ in "--mcs-port" }].compactMap { $0 }
        let listeners = users.isEmpty ? "--https-port" : users.joined(separator: " and ")
        log.warning(created ? "made a local CA for \(listeners) (clients trust its ca.pem once)"
                            : "using the local CA for \(listeners) (clients trust its ca.pem)",
                    [("tls.ca", path)])
        return (credentials, path, ca)
    }

    /// A store file this start made, with its write-ahead log and shared memory.
    static func removeStore(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// Removes a temporary local CA's (or self-signed certificate's) folder: its files, then the folder.
    static func removeCA(_ dir: String) {
        for f in ["ca.pem", "ca.key", "server.pem", "server.key"] { unlink(dir + "/" + f) }
        rmdir(dir)
    }

    /// Where the local CA lives (`Configuration.tlsDirectory`, or a fresh temporary folder for a
    /// `:memory:` store, which keeps nothing, removed when the server stops); `./data` is made
    /// for the default store.
    static func caDirectory(_ c: Configuration) -> String {
        if c.dbPath == Configuration().dbPath && c.tlsDir == nil { SystemIO.makeDirectory("./data") }
        if let d = c.tlsDirectory { return d }
        let tmp = processEnvironment()["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return tmp + "/fcm-mock-ca-\(getpid())-\(wallClockMicros())"
    }

    /// Whether `host:port` is already bound by someone (port 0 never is).
    static func isTaken(host: String, port: Int) -> Bool {
        guard port != 0 else { return false }
        do {
            let (fd, _) = try ListenSocket.open(host: host, port: port)
            close(fd)
            return false
        } catch {
            return error.code == EADDRINUSE
        }
    }

    /// The XMPP listener on `--xmpp-port`. A run that picks its other ports (`--http-port 0`, say)
    /// and leaves the XMPP port to its default takes a free one when the default is in use
    /// (another fcm-mock started the same way): the started line names it, and a warning says so.
    static func openXMPP(_ c: Configuration, tls: TLSCredentials?, delegate: CCS, log: Log) throws(SocketError) -> XMPPServer {
        func open(_ port: Int) throws(SocketError) -> XMPPServer {
            try XMPPServer(host: c.host, port: port, tls: tls, loginTimeout: c.xmppLoginTimeout, stanzaTimeout: c.xmppStanzaTimeout,
                           maxConnections: c.xmppMaxConnections, delegate: delegate)
        }
        do {
            return try open(c.xmppPort)
        } catch {
            let picksPorts = c.httpPort == 0 || c.httpsPort == 0 || c.mcsPort == 0
            guard error.code == EADDRINUSE, !c.xmppPortGiven, picksPorts else { throw error }
            let xmpp = try open(0)
            log.warning("the default XMPP port is in use: listening on another (give --xmpp-port to choose)",
                        [("default", "\(c.host):\(c.xmppPort)"), ("xmpp", "\(c.host):\(xmpp.port)")])
            return xmpp
        }
    }

    /// The flags that give every listener `c` opens a free port: `--http-port 0 --xmpp-port 0`,
    /// and `--https-port 0`, `--mcs-port 0` when those listen.
    static func pickFree(_ c: Configuration) -> String {
        "--http-port 0 --xmpp-port 0" + (c.httpsPort == nil ? "" : " --https-port 0") + (c.mcsPort == nil ? "" : " --mcs-port 0")
    }

    /// A listener that could not open, said so that the reader knows which port and what to do:
    /// `cannot listen on 127.0.0.1:8080 for HTTP (--http-port): Address already in use; …`.
    ///
    /// When the port was in use, the `others` listeners not yet opened (name, flag, port) whose
    /// ports are in use too are named in the same line, so a second run does not find the next:
    /// `cannot listen on 127.0.0.1:5235 for XMPP (--xmpp-port) and 127.0.0.1:8080 for HTTP
    /// (--http-port): Address already in use; …`.
    /// `pickFree`: the flags that give every listener of the run a free port.
    static func listenError(_ error: SocketError, listener: String, flag: String,
                            others: [(String, String, Int)] = [], host: String = "",
                            pickFree: String = "--http-port 0 --xmpp-port 0") -> ConfigurationError {
        guard let (address, reason) = error.listening else { return ConfigurationError(error.description) }
        var taken = [(address, listener, flag)]
        if error.code == EADDRINUSE {
            // Written as the socket layer writes the first one.
            for (name, otherFlag, port) in others where !taken.contains(where: { $0.0 == "\(host):\(port)" })
                && isTaken(host: host, port: port) {
                taken.append(("\(host):\(port)", name, otherFlag))
            }
        }
        var line = "cannot listen on " + taken.map { "\($0.0) for \($0.1) (\($0.2))" }.joined(separator: " and ") + ": \(reason)"
        if error.code == EADDRINUSE {
            let flags = taken.map { "\($0.2) N" }.joined(separator: ", ")
            line += "; is another fcm-mock running? Give \(flags), or \(pickFree) to pick free ports"
        }
        return ConfigurationError(line)
    }
}
