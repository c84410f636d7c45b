public import RoomKit
public import FCMEngine
public import FCMModel
public import FCMCore
public import HTTPServer
import Platform

/// `/api/v1/...`: the mock's own surface for setting up fake devices and inspecting deliveries
/// (docs/spec/control-api.md). Its routes are in Routes.swift; the handlers, one file per resource, in
/// ControlAPI+*.swift.
public struct ControlAPI: Sendable {
    let engine: Engine
    let controlToken: String?
    /// The open XMPP connections, as JSON objects.
    let xmppConnections: @Sendable () -> [String]
    /// Drains one connection (or all for nil); the JSON of those drained.
    let xmppDrain: @Sendable (String?) -> [String]
    /// The local CA's certificate file of `--https-port` (nil: none, or `--tls-cert` given).
    public var tlsCA: String?
    /// Whether every listener is up, for `GET /readyz`.
    public var readiness = Readiness(ready: true)
    /// `--apns-environment`, and whether APNs is also served over TLS (`--https-port`), for health.
    public var apnsEnvironment: APNsEnvironment = .sandbox
    public var apnsTLS = false
    /// Where MCS listens (`HOST:PORT`, nil without `--mcs-port`) and its connections, for health.
    public var mcsStatus: @Sendable () -> (String?, Int) = { (nil, 0) }
    /// The threads that run message searches (`GET /api/v1/messages`), which may walk the whole
    /// store: not on an HTTP/1.1 loop, whose other connections (app servers' sends) would wait.
    let searches = WorkerPool(threads: 2)

    public init(engine: Engine, controlToken: String?, xmppConnections: @escaping @Sendable () -> [String],
                xmppDrain: @escaping @Sendable (String?) -> [String], tlsCA: String?, readiness: Readiness) {
        self.engine = engine
        self.controlToken = controlToken
        self.xmppConnections = xmppConnections
        self.xmppDrain = xmppDrain
        self.tlsCA = tlsCA
        self.readiness = readiness
    }

    /// Runs `handler` behind the checks every `/api/v1/` path makes, in order: the body's size
    /// (413), the control token (401; `/api/v1/health`, `/readyz` and `/livez` are open), the query string's and then
    /// the path's percent-encoding (400). Failures are `{"error":{"code":…,"message":…}}`.
    public func run(_ handler: ControlHandler, _ r: HTTPRequest, _ params: PathParams, _ responder: HTTPResponder) {
        do throws(ControlError) {
            if r.bodyTooLarge { throw .payloadTooLarge("request body is too large") }
            if let controlToken, !Self.openPaths.contains(r.path), !Self.authorized(r, controlToken) {
                let given = r.header("authorization") != nil || (try? Query(r.rawQuery))?["access_token"] != nil
                throw .unauthorized(given ? "the control token given is not this server's (Authorization: Bearer <control token>)"
                                          : "this server needs Authorization: Bearer <control token>")
            }
            let query = try Query(r.rawQuery)
            let call = ControlCall(request: r, query: query, path: try params.decoded(), responder: responder)
            if let answer = try handler(call) { responder.send(answer) }
        } catch {
            responder.send(Self.errorResponse(error))
        }
    }

    /// The calls that need no control token: what orchestrators and health checks ask.
    public static let openPaths: Set<String> = ["/api/v1/health", "/readyz", "/livez"]

    /// Any other `/api/v1/` path or method.
    public func noSuchCall(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        // Under /devices/{token}/ the token was always decoded before the call was looked up:
        // one that does not decode is still a 400, whatever follows it.
        let r = c.request
        let segments = r.path.dropFirst("/api/v1/".count).split(separator: "/", omittingEmptySubsequences: false)
        if segments.count >= 2, segments[0] == "devices", !segments.contains(where: \.isEmpty) {
            _ = try decode(segments[1])
        }
        throw .notFound("no such call: \(r.method) \(r.path)")
    }

    /// `Authorization: Bearer SECRET`, or `?access_token=SECRET` (what a browser's EventSource and
    /// the web page's address can carry).
    /// The web page itself takes `?token=SECRET` (`queryName`).
    static func authorized(_ r: HTTPRequest, _ token: String, queryName: String = "access_token") -> Bool {
        // The scheme's name in any case (RFC 9110 §11.1), the token exactly.
        if let h = r.header("authorization"), h.utf8.count == 7 + token.utf8.count,
           h.utf8.prefix(6).map({ $0 | 0x20 }).elementsEqual("bearer".utf8), h.utf8.dropFirst(6).first == UInt8(ascii: " "),
           h.utf8.dropFirst(7).elementsEqual(token.utf8) { return true }
        return (try? Query(r.rawQuery))?[queryName] == token
    }

    static func errorResponse(_ error: ControlError) -> HTTPResponse {
        var r = HTTPResponse(status: error.status, contentType: ContentType.json, body: Render.error(error))
        // A 401 names the scheme it wants (RFC 9110 §11.6.1).
        if error.status == 401 { r.headers.append(("WWW-Authenticate", "Bearer realm=\"fcm-mock control API\"")) }
        return r
    }

    /// A list the engine holds in memory, paged like every list (`limit`, `cursor`): the cursor
    /// is the position where the next page starts.
    /// Only the page is rendered.
    func paged<T>(_ items: [T], _ q: Query, _ render: (T) -> String) throws(ControlError) -> HTTPResponse {
        try ControlReply.paged(items, q, render)
    }

    func ok(_ json: String, status: Int = 200) -> HTTPResponse { ControlReply.ok(json, status: status) }

    static let noContent = ControlReply.noContent
}

