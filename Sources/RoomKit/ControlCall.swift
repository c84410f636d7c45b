import FCMCore
import FCMEngine
public import FCMModel
public import HTTPServer

/// The version `health` and `--version` report.
public let fcmMockVersion = "0.1.0"

/// What answers one control call: the answer, or nil when `call.responder` will be answered
/// later (long polls). A room's control resources (`/api/v1/apns/...`) are handlers of this
/// type; the control API runs each behind its checks (ControlAPI.run).
public typealias ControlHandler = @Sendable (ControlCall) throws(ControlError) -> HTTPResponse?

/// One control call as its handler sees it.
public struct ControlCall: Sendable {
    public init(request: HTTPRequest, query: Query, path: PathArguments, responder: HTTPResponder) {
        self.request = request
        self.query = query
        self.path = path
        self.responder = responder
    }

    public let request: HTTPRequest
    public let query: Query
    /// The route's `{name}` segments, decoded.
    public let path: PathArguments
    /// For answers given later (long polls).
    public let responder: HTTPResponder

    /// The decoded `{name}` segment.
    public subscript(_ name: String) -> String { path[name] }

    /// The body as a JSON object (an empty body counts as `{}`).
    public func jsonBody() throws(ControlError) -> Body {
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

/// The control API's answers, for every resource (the control API's own and the rooms').
public enum ControlReply {
    /// A list the engine holds in memory, paged like every list (`limit`, `cursor`): the cursor
    /// is the position where the next page starts. Only the page is rendered.
    public static func paged<T>(_ items: [T], _ q: Query, _ render: (T) -> String) throws(ControlError) -> HTTPResponse {
        let limit = try q.limit()
        let start = min(Int(try q.cursor() ?? 0), items.count)
        let end = min(items.count, start + limit)
        return ok(Render.list(items[start..<end].map(render), next: end < items.count ? Int64(end) : nil))
    }

    public static func ok(_ json: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: ContentType.json, body: json)
    }

    public static let noContent = HTTPResponse(status: 204)
}
