public import RoomKit
public import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// The Instance ID API's topic paths (docs/spec/fcm-legacy.md section 4): app servers subscribe devices.
public struct IIDRoutes: Sendable {
    let engine: Engine
    let credentials: GoogleCredentials

    public init(engine: Engine, credentials: GoogleCredentials) {
        self.engine = engine
        self.credentials = credentials
    }
    static let maxBatch = 1000

    /// What answers one Instance ID route: the request, its decoded path parameters, and the
    /// sender the server key belongs to.
    /// A batch outcome as the Instance ID API names it (seeds: `{}` or `{"error":"NOT_FOUND"}`).
    static func errorName(_ o: BatchOutcome) -> String {
        switch o {
        case .ok: ""
        case .notFound: "NOT_FOUND"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .tooManyTopics: "TOO_MANY_TOPICS"
        }
    }

    public typealias Handler = @Sendable (HTTPRequest, PathArguments, _ sender: String) throws(ControlError) -> HTTPResponse

    /// Runs `handler` behind the checks every `/iid/` path makes, in order: the body's size
    /// (413), the server key (401 page), the path's percent-encoding; failures are
    /// `{"error": message}`.
    public func run(_ handler: Handler, _ r: HTTPRequest, _ params: PathParams, _ responder: HTTPResponder) {
        if r.bodyTooLarge { return responder.send(bodyTooLargeResponse) }
        // A Bearer token counts only with the header `access_token_auth: true`.
        guard let sender = credentials.senderID(authorization: r.header("authorization"), bearerAllowed: r.accessTokenAuth) else {
            return responder.send(HTTPResponse(status: 401, contentType: ContentType.html, body: unauthorizedHTML))
        }
        PathFaults.answer(engine.pathFault(path: r.path, senderID: sender), to: responder) { () -> HTTPResponse in
            do throws(ControlError) {
                return try handler(r, try params.decoded(), sender)
            } catch {
                return self.error(error.status, error.message)
            }
        }
    }

    public func batchAdd(_ r: HTTPRequest, _: PathArguments, sender: String) throws(ControlError) -> HTTPResponse {
        try batch(r, subscribe: true, sender: sender)
    }

    public func batchRemove(_ r: HTTPRequest, _: PathArguments, sender: String) throws(ControlError) -> HTTPResponse {
        try batch(r, subscribe: false, sender: sender)
    }

    /// `POST /iid/v1/{token}/rel/topics/{topic}`: one device to one topic.
    public func subscribe(_ r: HTTPRequest, _ p: PathArguments, sender: String) throws(ControlError) -> HTTPResponse {
        let topic = p["topic"]
        guard Topics.isValidName(topic) else { return error(400, "Topic name format is invalid") }
        // The batch's outcome codes, as the Instance ID API answers them.
        switch try engine.batch([p["token"]], topic: topic, subscribe: true, senderID: sender).first ?? .notFound {
        case .ok: return json(200, "{}")
        case .notFound: return error(404, Self.errorName(.notFound))
        case let code: return error(400, Self.errorName(code))
        }
    }

    /// `GET /iid/info/{token}`.
    public func info(_ r: HTTPRequest, _ p: PathArguments, sender: String) throws(ControlError) -> HTTPResponse {
        try info(p["token"], details: Query.flag(r.rawQuery, "details"), sender: sender)
    }

    /// Any other `/iid/` path or method.
    public func notFound(_ r: HTTPRequest, _: PathArguments, sender: String) -> HTTPResponse {
        error(404, "Not found: \(r.method) \(r.path)")
    }

    private func batch(_ r: HTTPRequest, subscribe: Bool, sender: String) throws(ControlError) -> HTTPResponse {
        guard let body = try? JSONParser.parse(r.body), let o = body.objectValue else {
            return error(400, "The request body must be a JSON object")
        }
        guard let to = o["to"]?.stringValue else { return error(400, "\"to\" must be a topic: /topics/NAME") }
        let topic = Topics.name(to)
        guard Topics.isValidName(topic) else { return error(400, "Topic name format is invalid") }
        guard let list = o["registration_tokens"]?.arrayValue else { return error(400, "\"registration_tokens\" must be a JSON array") }
        guard !list.isEmpty else { return error(400, "\"registration_tokens\" must not be empty") }
        guard list.count <= Self.maxBatch else { return error(400, "At most \(Self.maxBatch) registration tokens per batch") }
        let tokens = list.map { $0.stringValue ?? "" }
        let outcomes = try engine.batch(tokens, topic: topic, subscribe: subscribe, senderID: sender)
        var w = JSONWriter()
        w.beginObject()
        w.key("results"); w.beginArray()
        for o in outcomes {
            w.beginObject()
            if o != .ok { w.key("error"); w.value(Self.errorName(o)) }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return json(200, w.string)
    }

    private func info(_ token: String, details: Bool, sender: String) throws(ControlError) -> HTTPResponse {
        guard let d = try? engine.device(token), d.senderID == sender, d.state != .unregistered else {
            return error(404, "No information found about this instance id.")
        }
        var w = JSONWriter()
        w.beginObject()
        w.key("application"); w.value(d.app)
        w.key("authorizedEntity"); w.value(d.senderID)
        w.key("platform"); w.value(d.platform.rawValue.uppercased())
        if details {
            w.key("rel"); w.beginObject()
            w.key("topics"); w.beginObject()
            for t in try engine.topics(of: token) {
                w.key(t.name); w.beginObject()
                w.key("addDate"); w.value(String(rfc3339(millis: t.addedAt).prefix(10)))
                w.endObject()
            }
            w.endObject()
            w.endObject()
        }
        w.endObject()
        return json(200, w.string)
    }

    private func json(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: ContentType.json, body: body)
    }

    private func error(_ status: Int, _ message: String) -> HTTPResponse { jsonError(status, message) }
}
