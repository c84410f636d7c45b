import FCMCore
import FCMStore
import HTTPServer
import XMPPServer

/// The running mock: store, engine and listeners, started and stopped together.
public final class Application: Sendable {
    public let configuration: Configuration
    public let engine: Engine
    let http: HTTPServer
    let xmpp: XMPPServer
    let ccs: CCS
    let log: Log

    /// The bound HTTP port (the real one when 0 was asked for).
    public var httpPort: Int { http.port }
    /// The bound XMPP port.
    public var xmppPort: Int { xmpp.port }

    /// Opens the store, loads fixtures and binds both ports; nothing is started when any step fails.
    public init(_ c: Configuration, log: Log = Log()) throws(ConfigurationError) {
        self.configuration = c
        self.log = log
        if c.dbPath != ":memory:" && c.dbPath == Configuration().dbPath {
            // The default path lives in ./data/, created on first use; a path the user names must
            // already have its folder.
            SystemIO.makeDirectory("./data")
        }
        let store: Store
        do {
            store = try Store(path: c.dbPath)
        } catch {
            throw ConfigurationError("cannot use database '\(c.dbPath)': \(error.message)")
        }
        do {
            engine = try Engine(store: store, unknownTokens: c.unknownTokens, acceptAnyKey: c.acceptAnyKey,
                                deviceRate: c.deviceRate, topicRate: c.topicRate, maxConditionOperators: c.maxConditionOperators,
                                eventKeepaliveMillis: c.eventKeepaliveMillis)
        } catch {
            store.close()
            throw ConfigurationError("cannot read database '\(c.dbPath)': \(error.message)")
        }
        do throws(ConfigurationError) {
            try Fixtures.load(c.fixtures, into: engine)
            let ccs = CCS(engine: engine, log: log, connectionsPerSender: c.xmppConnectionsPerSender)
            self.ccs = ccs
            var tls: TLSCredentials?
            if c.xmppTLS || c.httpTLS {
                do {
                    if let cert = c.tlsCert, let key = c.tlsKey {
                        tls = try TLSCredentials(certificate: cert, key: key)
                    } else {
                        let dir = processEnvironment()["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
                        tls = try TLSCredentials.selfSigned(names: CLI.googleHosts, directory: dir)
                        // A warning, so the path is logged at every level clients may need it at.
                        log.warning("generated a self-signed TLS certificate (clients must trust it)",
                                    [("tls.cert", tls!.certificatePath), ("tls.key", tls!.keyPath)])
                    }
                } catch {
                    throw ConfigurationError("TLS: \(error.description)")
                }
            }
            var httpTLS: HTTPServerTLS?
            if c.httpTLS, let tls {
                // libmicrohttpd takes the PEM texts GnuTLS has just loaded and checked.
                httpTLS = HTTPServerTLS(certificatePEM: tls.certificatePEM, keyPEM: tls.keyPEM)
            }
            do {
                let xmpp = try XMPPServer(host: c.host, port: c.xmppPort, tls: c.xmppTLS ? tls : nil,
                                             loginTimeout: c.xmppLoginTimeout, maxConnections: c.xmppMaxConnections,
                                             delegate: ccs)
                self.xmpp = xmpp
                let app = HTTPApp(engine: engine, controlToken: c.controlToken, maxBodyBytes: c.maxBodyBytes,
                                  xmppConnections: { xmpp.connections.map(ccs.connectionJSON) },
                                  xmppDrain: { id in ccs.drain(id).map(ccs.connectionJSON) })
                let accessLog: (@Sendable (HTTPAccess) -> Void)?
                if log.level <= .info {
                    let l = log
                    accessLog = { l.access($0) }
                } else {
                    accessLog = nil
                }
                http = try HTTPServer(host: c.host, port: c.httpPort, maxBodyBytes: c.maxBodyBytes, tls: httpTLS,
                                      accessLog: accessLog, handler: app.handle)
            } catch {
                throw ConfigurationError(error.description)
            }
        } catch {
            store.close()
            throw error
        }
    }

    /// Starts accepting connections on both ports.
    public func start() throws(ConfigurationError) {
        do {
            try http.start()
        } catch {
            throw ConfigurationError(error.description)
        }
        xmpp.start()
        engine.startExpirySweeper()
    }

    /// The machine-readable line tests wait for.
    public var listeningLine: String {
        "listening http=\(hostForDisplay):\(httpPort) xmpp=\(hostForDisplay):\(xmppPort)"
    }

    private var hostForDisplay: String {
        configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    }

    /// Stops accepting, answers long polls, lets sends in flight commit and answer, then closes
    /// the connections and checkpoints the store.
    public func stop() {
        xmpp.stop()
        // New HTTP requests get 503; those already taken get their own answers (a stored send
        // is never answered 503), then the listener stops.
        http.refuseNewRequests()
        engine.beginShutdown()
        engine.store.drain()
        http.stop()
        engine.close()
    }
}

extension StoreError {
    var message: String { description }
}
