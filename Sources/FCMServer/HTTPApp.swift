import FCMCore
import HTTPServer

/// Routes every HTTP request: the FCM paths, the control API, and 404s in each one's own format.
public struct HTTPApp: Sendable {
    let engine: Engine
    let send: FCMSendRoute
    let control: ControlAPI
    let iid: IIDRoutes
    let groups: GroupRoutes
    let controlToken: String?

    /// The application over `engine`.
    public init(engine: Engine, controlToken: String?, maxBodyBytes: Int,
                xmppConnections: @escaping @Sendable () -> [String] = { [] },
                xmppDrain: @escaping @Sendable (String?) -> [String] = { _ in [] }) {
        self.engine = engine
        self.controlToken = controlToken
        self.send = FCMSendRoute(engine: engine, maxBodyBytes: maxBodyBytes)
        self.control = ControlAPI(engine: engine, controlToken: controlToken, xmppConnections: xmppConnections, xmppDrain: xmppDrain)
        self.iid = IIDRoutes(engine: engine)
        self.groups = GroupRoutes(engine: engine)
    }

    /// Answers one request through `responder` (now, or later for sends and long polls).
    public func handle(_ r: HTTPRequest, _ responder: HTTPResponder) {
        let path = r.path
        switch path {
        case "/fcm/send", "/gcm/send":
            return send.handle(r, responder)
        case "/fcm/notification", "/gcm/notification":
            return responder.send(r.bodyTooLarge
                ? HTTPResponse(status: 413, contentType: ContentType.text, body: "Request body too large\n") : groups.handle(r))
        default:
            break
        }
        if path.hasPrefix("/iid/") {
            return responder.send(r.bodyTooLarge
                ? HTTPResponse(status: 413, contentType: ContentType.text, body: "Request body too large\n") : iid.handle(r))
        }
        if path.hasPrefix("/api/v1/") {
            let rest = path.dropFirst("/api/v1/".count)
            let segments = rest.split(separator: "/", omittingEmptySubsequences: false)
            if segments.contains(where: { $0.isEmpty }) {
                return control.handle(r, segments: [""], responder)
            }
            return control.handle(r, segments: segments, responder)
        }
        if path == "/" || path == "/index.html" {
            // The page carries no data itself, but it is the control API's face: the same token.
            if let controlToken, !ControlAPI.authorized(r, controlToken, queryName: "token") {
                return responder.send(HTTPResponse(status: 401, contentType: ContentType.text,
                                                   body: "This server needs its control token: open /?token=SECRET\n"))
            }
            guard r.method == "GET" || r.method == "HEAD" else {
                return responder.send(HTTPResponse(status: 405, contentType: ContentType.text, body: "Method Not Allowed\n"))
            }
            return responder.send(HTTPResponse(status: 200, headers: [("Content-Type", ContentType.html), ("Cache-Control", "no-store"),
                                                                      ("Content-Security-Policy", WebPage.contentSecurityPolicy)],
                                               body: WebPage.bytes))
        }
        responder.send(HTTPResponse(status: 404, contentType: ContentType.text, body: "Not Found: \(path)\n"))
    }
}

extension HTTPRequest {
    /// The header `access_token_auth: true`, with which a Bearer token stands for a server key
    /// (firebase-admin's form).
    var accessTokenAuth: Bool { header("access_token_auth")?.lowercased() == "true" }
}
