import Autopush
import GCM
import FCMRegistrations
import MCSServer
import APNs
import CCS
import FCMV1
import WebPush
import Control
public import RoomKit
public import FCMEngine
public import FCMModel
import FCMCore
import FCMStore
import HTTPServer
import Platform
import TLS
import XMPPServer

#if canImport(Glibc)
    import Glibc
#endif

/// The running mock: store, engine and listeners, started and stopped together.
public final class Application: Sendable {
    /// The host names real clients hard-code, which `cert` always includes.
    public static let googleHosts = [
        "fcm.googleapis.com", "gcm-http.googleapis.com", "android.googleapis.com", "iid.googleapis.com",
        "fcm-xmpp.googleapis.com", "gcm.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com",
        "accounts.google.com", "localhost", "127.0.0.1", "::1",
        // Apple's APNs hosts (docs/apns.md), served on the same ports.
        "api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com",
        // The real clients' hosts (docs/real-clients.md): GCM's checkin, registrations and MCS,
        // Firebase's installations and registrations, Chromium's and Firefox's push services.
        "android.clients.google.com", "mtalk.google.com", "firebaseinstallations.googleapis.com",
        "fcmregistrations.googleapis.com", "jmt17.google.com", "push.services.mozilla.com", "updates.push.services.mozilla.com",
    ]

    public let configuration: Configuration
    public let engine: Engine
    let http: HTTPServer
    let xmpp: XMPPServer
    let ccs: CCS
    /// How many XMPP delivery receipts wait for their message to reach its device (tests).
    package var awaitedReceipts: Int { ccs.awaitedReceiptCount }
    /// Google's MCS for real GCM clients (`--mcs-port`), and the room behind it.
    let mcs: MCSServer?
    let gcm: GCMDelivery
    let log: Log
    /// The local CA's certificate file (absolute) when `--https-port` made or reused one.
    public let tlsCA: String?
    /// The certificate file (absolute) of the local CA that issues APNs client certificates
    /// (`--https-port`; with `--tls-cert` too).
    public let apnsCA: String?
    /// The local CA's folder when it is a temporary one (a `:memory:` store without `--tls-dir`):
    /// removed when the server stops.
    let temporaryCA: String?
    /// The descriptor holding the store file's lock (nil for `:memory:`).
    private let storeLock: Locked<Int32?>
    /// Keeps the store within `--max-messages` and `--max-age`, and counts it for health.
    let pruner: Pruner
    /// Set once every listener is up; `GET /readyz` answers 503 before.
    let readiness: Readiness

    /// The bound HTTP port (the real one when 0 was asked for).
    public var httpPort: Int { http.port }
    /// The bound XMPP port.
    public var xmppPort: Int { xmpp.port }
    /// The bound HTTPS port (nil without `--https-port`).
    public var httpsPort: Int? { http.httpsPort }
    /// The bound MCS port (nil without `--mcs-port`).
    public var mcsPort: Int? { mcs?.port }

    /// Opens the store, loads fixtures and binds both ports; nothing is started when any step fails.
    public init(_ c: Configuration, log: Log = Log()) throws(ConfigurationError) {
        self.configuration = c
        self.log = log
        let readiness = Readiness()
        self.readiness = readiness
        if c.dbPath != ":memory:" && c.dbPath == Configuration().dbPath {
            // The default path lives in ./data/, created on first use; a path the user names must
            // already have its folder.
            SystemIO.makeDirectory("./data")
        }
        // A store this start makes is removed again when the start fails (nothing half-made is
        // left: a later start would find what a refused fixture file had written so far).
        // (Nothing at the path at all: a dangling symbolic link is the user's, not new.)
        var seen = stat()
        let newStore = c.dbPath != ":memory:" && lstat(c.dbPath, &seen) != 0
        let lock = Locked(try Self.lockStore(c))
        storeLock = lock
        let store: Store
        do {
            store = try Store(path: c.dbPath, maxPageCount: c.storeMaxPages)
        } catch {
            // Removed while the lock is still held: no other server can have opened it.
            if newStore { Self.removeStore(c.dbPath) }
            Self.release(lock)
            throw ConfigurationError("cannot use database '\(c.dbPath)': \(error.message)")
        }
        do {
            engine = try Engine(store: store, webPush: TLSWebPush(), unknownTokens: c.unknownTokens, acceptAnyKey: c.acceptAnyKey,
                                deviceRate: c.deviceRate, topicRate: c.topicRate, maxConditionOperators: c.maxConditionOperators,
                                eventKeepaliveMillis: c.eventKeepaliveMillis,
                                rooms: RoomHooks(recordBlocks: RecordBlocks(APNsRoom.recordBlocks, fields: [Transport.apns.rawValue: APNsRoom.recordFields],
                                                                           received: APNsRoom.received, forms: Self.recordForms),
                                                 faultErrors: [APNsRoom.faultErrors, GCMRoutes.faultErrors, GCMRoutes.checkinFaultErrors, V1Routes.faultErrors]
                                                     + FCMRegistrationRoutes.faultErrors,
                                                 holding: [.apns: APNsRoom.holding]))
            // The one count of the whole table, before any request: later passes add what is new.
            try store.refreshHistory()
        } catch {
            store.close()
            if newStore { Self.removeStore(c.dbPath) }
            Self.release(lock)
            throw ConfigurationError("cannot read database '\(c.dbPath)': \(error.message)")
        }
        // Why a credential was refused, and hints the wire answer cannot give: a log line each.
        engine.onNotice { [log] n in log.info(n.message, n.fields) }
        pruner = Pruner(engine: engine, limits: c.storageLimits)
        store.observeHealth { [log] failure in log.storeHealth(failure) }
        // A temporary CA made before a failure is removed with it.
        var madeCA: String?
        do throws(ConfigurationError) {
            try Fixtures.load(c.fixtures, into: engine)
            let ccs = CCS(engine: engine, log: log, connectionsPerSender: c.xmppConnectionsPerSender)
            self.ccs = ccs
            let (tls, tlsCA, apnsAuthority) = try Self.tlsCredentials(c, log: log)
            self.tlsCA = tlsCA
            apnsCA = apnsAuthority.map { SystemIO.absolutePath($0.caCertificate) }
            madeCA = c.tlsDirectory == nil ? apnsAuthority.map { String($0.caCertificate.dropLast("/ca.pem".count)) } : nil
            // A self-signed certificate (`--http-tls`/`--xmpp-tls` alone) lives in a temporary
            // folder too: removed with the server, as the temporary CA is.
            if madeCA == nil, tlsCA == nil, apnsAuthority == nil, c.tlsCert == nil, let path = tls?.certificatePath,
               path.hasSuffix("/server.pem") {
                madeCA = String(path.dropLast("/server.pem".count))
            }
            temporaryCA = madeCA
            let xmpp: XMPPServer
            do {
                xmpp = try Self.openXMPP(c, tls: c.xmppTLS ? tls : nil, delegate: ccs, log: log)
            } catch {
                // The HTTP listeners open after this one: a port of theirs that is taken too is
                // named now, so one run tells everything that is in the way.
                throw Self.listenError(error, listener: "XMPP", flag: "--xmpp-port",
                                       others: [("HTTP", "--http-port", c.httpPort)] + (c.httpsPort.map { [("HTTPS", "--https-port", $0)] } ?? []),
                                       host: c.host, pickFree: Self.pickFree(c))
            }
            self.xmpp = xmpp
            let gcm = GCMDelivery(engine: engine, log: log)
            self.gcm = gcm
            if let port = c.mcsPort, let tls {
                var limits = MCSLimits()
                limits.idleTimeout = .seconds(c.mcsIdleSeconds)
                do {
                    mcs = try MCSServer(host: c.host, port: port, tls: tls, limits: limits, delegate: gcm)
                } catch {
                    xmpp.stop()
                    throw Self.listenError(error, listener: "MCS", flag: "--mcs-port", others: [], host: c.host, pickFree: Self.pickFree(c))
                }
            } else {
                mcs = nil
            }
            let mcsListening: @Sendable () -> (String?, Int) = { [mcs, gcm] in
                (mcs.map { "\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)" }, mcs == nil ? 0 : gcm.openConnections)
            }
            let app = HTTPApp(engine: engine, controlToken: c.controlToken, maxBodyBytes: c.maxBodyBytes, log: log, tlsCA: tlsCA,
                              readiness: readiness, autopush: AutopushRoom(engine: engine, log: log, idleSeconds: c.autopushIdleSeconds),
                              apnsEnvironment: c.apnsEnvironment, apnsAuthority: apnsAuthority, apnsTLS: c.httpsPort != nil,
                              xmppConnections: { xmpp.connections.map(ccs.connectionJSON) },
                              xmppDrain: { id in ccs.drain(id) }, mcsStatus: mcsListening)
            do {
                http = try Self.httpServer(c, tls: tls, log: log, engine: engine, handler: app.handle)
            } catch {
                xmpp.stop()
                mcs?.stop()
                throw error
            }
        } catch {
            store.close()
            if newStore { Self.removeStore(c.dbPath) }
            Self.release(lock)
            if let madeCA { Self.removeCA(madeCA) }
            throw error
        }
    }

    /// The HTTP listeners (the plain port's loops, and HTTPS with `--https-port`), with the
    /// access log at info and below, and the store's queued writes committed after each loop's
    /// round; a port that is taken is named with the flag that set it.
    private static func httpServer(_ c: Configuration, tls: TLSCredentials?, log: Log, engine: Engine,
                                   handler: @escaping @Sendable (HTTPRequest, HTTPResponder) -> Void) throws(ConfigurationError) -> HTTPServer {
        let accessLog: (@Sendable (HTTPAccess) -> Void)?
        if log.level <= .info {
            let l = log
            accessLog = { l.access($0) }
        } else {
            accessLog = nil
        }
        var http2Limits = HTTP2Limits()
        http2Limits.idleSeconds = c.http2IdleSeconds
        http2Limits.idleNotice = APNsRoom.idleNotice
        do {
            return try HTTPServer(host: c.host, port: c.httpPort, maxBodyBytes: c.maxBodyBytes, http1Loops: c.httpLoops,
                                  tls: c.httpTLS ? tls : nil,
                                  https: c.httpsPort.map { HTTPSListenerOptions(port: $0, credentials: tls!) }, http2Limits: http2Limits,
                                  accessLog: accessLog, afterBatch: { [engine] in engine.commitQueued() },
                                  handler: handler)
        } catch {
            let https = c.httpsPort.map { error.listening?.address.hasSuffix(":\($0)") == true && $0 != c.httpPort } ?? false
            // HTTP opens before HTTPS: when HTTP's port was the one, HTTPS's may be taken too.
            let others = !https ? (c.httpsPort.map { [("HTTPS", "--https-port", $0)] } ?? []) : []
            throw listenError(error, listener: https ? "HTTPS" : "HTTP", flag: https ? "--https-port" : "--http-port",
                              others: others, host: c.host, pickFree: pickFree(c))
        }
    }

    /// How each room's records show beyond what every record has.
    static let recordForms: [String: RecordForm] = [
        Transport.httpV1.rawValue: V1Routes.recordForm, Transport.xmpp.rawValue: CCS.recordForm,
        Transport.apns.rawValue: APNsRoom.recordForm, Transport.webpush.rawValue: WebPushRoutes.recordForm,
    ]

    /// One server per store file: two would each keep their own idea of the devices and
    /// interleave their writes. The store file's lock (nil for `:memory:`, or where the file
    /// system has none), or why it cannot be had.
    private static func lockStore(_ c: Configuration) throws(ConfigurationError) -> Int32? {
        guard c.dbPath != ":memory:" else { return nil }
        switch SystemIO.lockExclusively(c.dbPath) {
        case .locked(let fd): return fd
        case .heldByAnother(let pid):
            var line = "the store \(c.dbPath) is in use by another fcm-mock\(pid.map { " (pid \($0))" } ?? ""): "
                + "stop that one, or give another --db (or --db :memory:)"
            // Started twice with the same flags (`make run` twice), the ports are taken too:
            // say so now rather than after the next try.
            let ports = [(c.httpPort, "--http-port"), (c.xmppPort, "--xmpp-port")] + [(c.httpsPort, "--https-port"), (c.mcsPort, "--mcs-port")]
                .compactMap { port, flag in port.map { ($0, flag) } }
            let taken = ports.filter { $0.0 != 0 && isTaken(host: c.host, port: $0.0) }
            if !taken.isEmpty {
                line += "; " + taken.map { "\(c.host):\($0.0) (\($0.1))" }.joined(separator: " and ")
                    + (taken.count == 1 ? " is" : " are") + " taken too: give other ports (0 picks free ones)"
            }
            throw ConfigurationError(line)
        case .unavailable: return nil
        }
    }

    /// The TLS listeners' credentials: the files given (`--tls-cert`, `--tls-key`), the local CA
    /// kept beside the store (the HTTPS and MCS ports), or a self-signed pair for `--xmpp-tls` /
    /// `--http-tls` alone; with the local CA's file for clients to trust and the authority that
    /// issues APNs client certificates. All nil when no listener speaks TLS.
    private static func tlsCredentials(_ c: Configuration, log: Log) throws(ConfigurationError)
        -> (TLSCredentials?, String?, LocalCertificateAuthority?) {
        var tls: TLSCredentials?
        var tlsCA: String?
        var apnsAuthority: LocalCertificateAuthority?
        // MCS is TLS from the first byte, with the certificate of --https-port.
        let localCA = c.httpsPort != nil || c.mcsPort != nil
        if c.xmppTLS || c.httpTLS || localCA {
            do {
                if let cert = c.tlsCert, let key = c.tlsKey {
                    tls = try TLSCredentials(certificate: cert, key: key)
                    // APNs client certificates come from the local CA all the same.
                    if localCA {
                        let (authority, created, renewed) = try LocalCertificateAuthority.loadOrCreate(names: googleHosts,
                                                                                                       directory: caDirectory(c))
                        apnsAuthority = authority
                        if let renewed { log.warning("the local CA's server certificate: " + renewed, [("tls.ca", SystemIO.absolutePath(authority.caCertificate))]) }
                        log.info(created ? "made a local CA for APNs client certificates" : "using the local CA for APNs client certificates",
                                 [("tls.ca", SystemIO.absolutePath(authority.caCertificate))])
                    }
                } else if localCA {
                    // One local CA for every TLS listener, kept beside the store.
                    let (credentials, ca, authority) = try Self.localCA(c, log: log)
                    tls = credentials
                    tlsCA = ca
                    apnsAuthority = authority
                } else {
                    let dir = processEnvironment()["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
                    tls = try TLSCredentials.selfSigned(names: googleHosts, directory: dir)
                    // A warning, so the path is logged at every level clients may need it at.
                    log.warning("generated a self-signed TLS certificate (clients must trust it)",
                                [("tls.cert", tls!.certificatePath), ("tls.key", tls!.keyPath)])
                }
            } catch {
                throw ConfigurationError("TLS: \(error.description)")
            }
        }
        return (tls, tlsCA, apnsAuthority)
    }

    /// Lets another server open the store file (after the store is closed: closing any
    /// descriptor of the file also drops this process's SQLite record locks on it).
    private static func release(_ lock: Locked<Int32?>) {
        lock.withLock { fd in
            if let f = fd { close(f) }
            fd = nil
        }
    }

    /// Where the store is, for the start-up line: an absolute path, or that nothing is kept.
    public var storeDescription: String {
        configuration.dbPath == ":memory:" ? ":memory: (nothing is kept)" : SystemIO.absolutePath(configuration.dbPath)
    }

    /// The store's limits in words, for the start-up line (it says so when there is none).
    public var limitsDescription: String { configuration.storageLimits.description }

    /// The fixtures loaded at start (reset applies them again), for the start-up line.
    public var fixturesDescription: String {
        engine.startFixtures.withLock { $0.map(\.name) }.joined(separator: ", ")
    }

    /// Starts accepting connections on both ports.
    public func start() throws(ConfigurationError) {
        do {
            try http.start()
        } catch {
            throw ConfigurationError(error.description)
        }
        xmpp.start()
        mcs?.start()
        engine.setWebPushEndpoints(base: webPushEndpointBase, path: WebPushEndpoints.path)
        readiness.markListenersUp()
        engine.startExpirySweeper()
        pruner.start()
        // The counters' count of what the store held, so the page's first screen does not wait.
        engine.startCountingStoredSends()
    }

    /// Where Web Push endpoints point: `--web-push-origin` when given (Google's host, for an
    /// unmodified library), else the mock itself, so a test posting to a subscription never
    /// leaves the machine unless told to: the plain port's origin, or, when no port speaks plain
    /// HTTP (`--http-tls`), the HTTPS port's (`--https-port`'s, whose local CA names 127.0.0.1,
    /// else the HTTP port's). A wildcard address is shown as loopback.
    var webPushEndpointBase: String {
        if let origin = configuration.webPushOrigin { return origin }
        let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : hostForDisplay
        guard configuration.httpTLS else { return "http://" + host + ":" + String(httpPort) }
        return "https://" + host + ":" + String(httpsPort ?? httpPort)
    }

    /// The machine-readable line tests wait for.
    public var listeningLine: String {
        "listening http=\(hostForDisplay):\(httpPort) xmpp=\(hostForDisplay):\(xmppPort)"
            + (httpsPort.map { " https=\(hostForDisplay):\($0)" } ?? "")
            + (mcsPort.map { " mcs=\(hostForDisplay):\($0)" } ?? "")
    }

    private var hostForDisplay: String {
        configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    }

    /// Stops accepting, answers long polls, lets sends in flight commit and answer, then closes
    /// the connections and checkpoints the store.
    public func stop() {
        xmpp.stop()
        // Every logged-in MCS client gets Close.
        mcs?.stop()
        // New HTTP requests get 503; those already taken get their own answers (a stored send
        // is never answered 503), then the listener stops.
        // HTTP/2 clients get GOAWAY with Apple's notice (APNs clients log it; others ignore it).
        http.refuseNewRequests(notice: APNsRoom.shutdownNotice)
        engine.beginShutdown()
        pruner.stop()
        engine.store.drain()
        http.stop()
        engine.close()
        Self.release(storeLock)
        if let dir = temporaryCA { Self.removeCA(dir) }
    }
}

extension StoreError {
    var message: String { description }
}
