import FCMCore
import HTTPServer

/// The Instance ID API's topic paths (fcm-legacy.md section 4): app servers subscribe devices.
struct IIDRoutes: Sendable {
    let engine: Engine
    static let maxBatch = 1000

    func handle(_ r: HTTPRequest) -> HTTPResponse {
        // A Bearer token counts only with the header `access_token_auth: true`.
        guard let sender = engine.senderID(authorization: r.header("authorization"), bearerAllowed: r.accessTokenAuth) else {
            return HTTPResponse(status: 401, contentType: ContentType.html, body: unauthorizedHTML)
        }
        let path = r.path
        do throws(ControlError) {
            switch (r.method, path) {
            case ("POST", "/iid/v1:batchAdd"), ("POST", "/iid/v1:batchRemove"):
                return try batch(r, subscribe: path.hasSuffix("batchAdd"), sender: sender)
            default:
                break
            }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            // /iid/v1/{token}/rel/topics/{topic}
            if r.method == "POST", parts.count == 7, parts[1] == "iid", parts[2] == "v1", parts[4] == "rel", parts[5] == "topics" {
                let token = try decode(parts[3]), topic = try decode(parts[6])
                guard Topics.isValidName(topic) else { return error(400, "Topic name format is invalid") }
                // The batch's outcome codes, as the Instance ID API answers them.
                switch try engine.batch([token], topic: topic, subscribe: true, senderID: sender).first ?? .notFound {
                case .ok: return json(200, "{}")
                case .notFound: return error(404, BatchOutcome.notFound.rawValue)
                case let code: return error(400, code.rawValue)
                }
            }
            // /iid/info/{token}
            if r.method == "GET", parts.count == 4, parts[1] == "iid", parts[2] == "info" {
                return try info(try decode(parts[3]), details: Query.flag(r.rawQuery, "details"), sender: sender)
            }
            return error(404, "Not found: \(r.method) \(path)")
        } catch {
            return self.error(error.status, error.message)
        }
    }

    private func batch(_ r: HTTPRequest, subscribe: Bool, sender: String) throws(ControlError) -> HTTPResponse {
        guard let body = try? JSONParser.parse(r.body), let o = body.objectValue else {
            return error(400, "The request body must be a JSON object")
        }
        guard let to = o["to"]?.stringValue else { return error(400, "\"to\" must be a topic: /topics/NAME") }
        let topic = to.hasPrefix("/topics/") ? String(to.dropFirst(8)) : to
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
            if o != .ok { w.key("error"); w.value(o.rawValue) }
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
