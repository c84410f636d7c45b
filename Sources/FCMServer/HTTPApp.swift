public import Autopush
public import RoomKit
import APNs
public import Control
public import FCMEngine
public import FCMCore
import FCMLegacy
import FCMV1
public import HTTPServer
public import TLS

/// Answers every HTTP request through one route table (Routes.swift): the FCM paths, the
/// control API, the web page, and 404s in each one's own format.
public struct HTTPApp: Sendable {
    let router: Router<RouteHandler>

    /// The application over `engine`. `apnsAuthority` issues and recognizes APNs client
    /// certificates (the local CA of `--https-port`). `log`: the server's, for the rooms made here.
    public init(engine: Engine, controlToken: String?, maxBodyBytes: Int, log: Log = Log(), tlsCA: String? = nil,
                readiness: Readiness = Readiness(ready: true), autopush: AutopushRoom? = nil, apnsEnvironment: APNsEnvironment = .sandbox,
                apnsAuthority: LocalCertificateAuthority? = nil, apnsTLS: Bool = false,
                xmppConnections: @escaping @Sendable () -> [String] = { [] },
                xmppDrain: @escaping @Sendable (String?) -> [String] = { _ in [] },
                mcsStatus: @escaping @Sendable () -> (String?, Int) = { (nil, 0) }) {
        let certificates = APNsCertificateAuth(engine: engine, authority: apnsAuthority)
        var control = ControlAPI(engine: engine, controlToken: controlToken, xmppConnections: xmppConnections, xmppDrain: xmppDrain,
                                 tlsCA: tlsCA, readiness: readiness)
        control.apnsEnvironment = apnsEnvironment
        control.apnsTLS = apnsTLS
        control.mcsStatus = mcsStatus
        // One for every FCM room, so a verified self-signed JWT is remembered for all of them.
        let google = GoogleCredentials(engine: engine)
        router = Self.router(engine: engine, maxBodyBytes: maxBodyBytes, credentials: google,
                             send: FCMSendRoute(engine: engine, credentials: google, maxBodyBytes: maxBodyBytes),
                             groups: GroupRoutes(engine: engine, credentials: google),
                             page: WebPageRoute(controlToken: controlToken),
                             iid: IIDRoutes(engine: engine, credentials: google),
                             control: control,
                             token: TokenRoute(engine: engine),
                             apns: APNsRoutes(engine: engine, environment: apnsEnvironment, certificates: certificates),
                             apnsControl: APNsControl(engine: engine, certificates: certificates),
                             autopush: autopush ?? AutopushRoom(engine: engine, log: log), log: log)
    }

    /// Answers one request through `responder` (now, or later for sends and long polls).
    public func handle(_ r: HTTPRequest, _ responder: HTTPResponder) {
        let (handler, params) = router.match(r.method, r.path)
        handler(r, params, responder)
    }
}

