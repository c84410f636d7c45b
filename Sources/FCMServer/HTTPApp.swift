import FCMCore
import HTTPServer

/// Routes every HTTP request: the FCM paths, the control API, and 404s in each one's own format.
public struct HTTPApp: Sendable {
    let engine: Engine
    let send: FCMSendRoute
    let control: ControlAPI
    let iid: IIDRoutes
    let groups: GroupRoutes

    /// The application over `engine`.
    public init(engine: Engine, controlToken: String?, maxBodyBytes: Int,
                xmppConnections: @escaping @Sendable () -> [String] = { [] },
                xmppDrain: @escaping @Sendable (String?) -> [String] = { _ in [] }) {
        self.engine = engine
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
        if path == "/" {
            return responder.send(HTTPResponse(status: 200, contentType: ContentType.text,
                                               body: "fcm-mock \(fcmMockVersion): POST /fcm/send, control API under /api/v1/ (see README)\n"))
        }
        responder.send(HTTPResponse(status: 404, contentType: ContentType.text, body: "Not Found: \(path)\n"))
    }
}
