public import FCMEngine
public import FCMCore
public import HTTPServer
public import TLS

/// Answers every HTTP request through one route table (Routes.swift): the FCM paths, the
/// control API, the web page, and 404s in each one's own format.
public struct HTTPApp: Sendable {
    let router: Router<RouteHandler>

    /// The application over `engine`. `apnsAuthority` issues and recognizes APNs client
    /// certificates (the local CA of `--https-port`).
    public init(engine: Engine, controlToken: String?, maxBodyBytes: Int, tlsCA: String? = nil,
                readiness: Readiness = Readiness(ready: true), apnsEnvironment: APNsEnvironment = .sandbox,
                apnsAuthority: LocalCertificateAuthority? = nil, apnsTLS: Bool = false,
                xmppConnections: @escaping @Sendable () -> [String] = { [] },
                xmppDrain: @escaping @Sendable (String?) -> [String] = { _ in [] }) {
        let certificates = APNsCertificateAuth(engine: engine, authority: apnsAuthority)
        var control = ControlAPI(engine: engine, controlToken: controlToken, xmppConnections: xmppConnections, xmppDrain: xmppDrain,
                                 tlsCA: tlsCA, readiness: readiness)
        control.apnsCertificates = certificates
        control.apnsEnvironment = apnsEnvironment
        control.apnsTLS = apnsTLS
        router = Self.router(send: FCMSendRoute(engine: engine, maxBodyBytes: maxBodyBytes),
                             groups: GroupRoutes(engine: engine),
                             page: WebPageRoute(controlToken: controlToken),
                             iid: IIDRoutes(engine: engine),
                             control: control,
                             token: TokenRoute(engine: engine),
                             apns: APNsRoutes(engine: engine, environment: apnsEnvironment, certificates: certificates))
    }

    /// Answers one request through `responder` (now, or later for sends and long polls).
    public func handle(_ r: HTTPRequest, _ responder: HTTPResponder) {
        let (handler, params) = router.match(r.method, r.path)
        handler(r, params, responder)
    }
}

/// `/` and `/index.html`: the web page.
struct WebPageRoute: Sendable {
    let controlToken: String?

    func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        // The page carries no data itself, but it is the control API's face: the same token.
        if let controlToken, !ControlAPI.authorized(r, controlToken, queryName: "token") {
            return responder.send(HTTPResponse(status: 401, contentType: ContentType.text,
                                               body: "This server needs its control token: open /?token=SECRET\n"))
        }
        guard r.method == "GET" || r.method == "HEAD" else {
            return responder.send(HTTPResponse(status: 405, contentType: ContentType.text, body: "Method Not Allowed\n"))
        }
        responder.send(HTTPResponse(status: 200, headers: [("Content-Type", ContentType.html), ("Cache-Control", "no-store"),
                                                           ("Content-Security-Policy", WebPage.contentSecurityPolicy)],
                                    body: WebPage.bytes))
    }
}

extension HTTPRequest {
    /// The header `access_token_auth: true`, with which a Bearer token stands for a server key
    /// (firebase-admin's form).
    var accessTokenAuth: Bool { header("access_token_auth")?.lowercased() == "true" }
}
