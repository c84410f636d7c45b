import FCMEngine
import FCMCore
import HTTPServer
import Platform

/// The version `health` reports.
public let fcmMockVersion = "0.1.0"

/// `/api/v1/...`: the mock's own surface for setting up fake devices and inspecting deliveries
/// (docs/spec/control-api.md). Its routes are in Routes.swift; the handlers, one file per resource, in
/// ControlAPI+*.swift.
struct ControlAPI: Sendable {
    let engine: Engine
    let controlToken: String?
    /// The open XMPP connections, as JSON objects.
    let xmppConnections: @Sendable () -> [String]
    /// Drains one connection (or all for nil); the JSON of those drained.
    let xmppDrain: @Sendable (String?) -> [String]
    /// The local CA's certificate file of `--https-port` (nil: none, or `--tls-cert` given).
    var tlsCA: String?
    /// Whether every listener is up, for `GET /readyz`.
    var readiness = Readiness(ready: true)
    /// Issues APNs client certificates (`/api/v1/apns/certificates`).
    var apnsCertificates: APNsCertificateAuth?
    /// `--apns-environment`, and whether APNs is also served over TLS (`--https-port`), for health.
    var apnsEnvironment: APNsEnvironment = .sandbox
    var apnsTLS = false

    /// What answers one control call: the answer, or nil when `call.responder` will be answered
    /// later (long polls).
    typealias Handler = @Sendable (ControlCall) throws(ControlError) -> HTTPResponse?

    /// Runs `handler` behind the checks every `/api/v1/` path makes, in order: the body's size
    /// (413), the control token (401; `/api/v1/health`, `/readyz` and `/livez` are open), the query string's and then
    /// the path's percent-encoding (400). Failures are `{"error":{"code":…,"message":…}}`.
    func run(_ handler: Handler, _ r: HTTPRequest, _ params: PathParams, _ responder: HTTPResponder) {
        do throws(ControlError) {
            if r.bodyTooLarge { throw .payloadTooLarge("request body is too large") }
            if let controlToken, !Self.openPaths.contains(r.path), !Self.authorized(r, controlToken) {
                throw .unauthorized("this server needs Authorization: Bearer <control token>")
            }
            let query = try Query(r.rawQuery)
            let call = ControlCall(request: r, query: query, path: try params.decoded(), responder: responder)
            if let answer = try handler(call) { responder.send(answer) }
        } catch {
            responder.send(Self.errorResponse(error))
        }
    }

    /// The calls that need no control token: what orchestrators and health checks ask.
    static let openPaths: Set<String> = ["/api/v1/health", "/readyz", "/livez"]

    /// Any other `/api/v1/` path or method.
    func noSuchCall(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
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
        if r.header("authorization") == "Bearer " + token { return true }
        return (try? Query(r.rawQuery))?[queryName] == token
    }

    static func errorResponse(_ error: ControlError) -> HTTPResponse {
        HTTPResponse(status: error.status, contentType: ContentType.json, body: Render.error(error))
    }

    /// A list the engine holds in memory, paged like every list (`limit`, `cursor`): the cursor
    /// is the position where the next page starts.
    /// Only the page is rendered.
    func paged<T>(_ items: [T], _ q: Query, _ render: (T) -> String) throws(ControlError) -> HTTPResponse {
        let limit = try q.limit()
        let start = min(Int(try q.cursor() ?? 0), items.count)
        let end = min(items.count, start + limit)
        return ok(Render.list(items[start..<end].map(render), next: end < items.count ? Int64(end) : nil))
    }

    func ok(_ json: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: ContentType.json, body: json)
    }

    static let noContent = HTTPResponse(status: 204)
}

/// One control call as its handler sees it.
struct ControlCall: Sendable {
    let request: HTTPRequest
    let query: Query
    /// The route's `{name}` segments, decoded.
    let path: PathArguments
    /// For answers given later (long polls).
    let responder: HTTPResponder

    /// The decoded `{name}` segment.
    subscript(_ name: String) -> String { path[name] }

    /// The body as a JSON object (an empty body counts as `{}`).
    func jsonBody() throws(ControlError) -> Body {
        let v: JSONValue
        do {
            v = try JSONParser.parse(request.body.isEmpty ? Array("{}".utf8) : request.body)
        } catch {
            throw .badRequest("invalid JSON body: \(error.message)")
        }
        guard let o = v.objectValue else { throw .badRequest("the body must be a JSON object") }
        return Body(o, path: "")
    }
}
