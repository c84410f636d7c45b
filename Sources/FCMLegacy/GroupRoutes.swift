public import RoomKit
public import FCMEngine
import FCMModel
import FCMCore
public import HTTPServer

/// `/fcm/notification` and `/gcm/notification`: device group management (seeds Table 10).
public struct GroupRoutes: Sendable {
    let engine: Engine
    let credentials: GoogleCredentials

    public init(engine: Engine, credentials: GoogleCredentials) {
        self.engine = engine
        self.credentials = credentials
    }

    public func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        if r.bodyTooLarge { return responder.send(bodyTooLargeResponse) }
        guard let sender = credentials.senderID(authorization: r.header("authorization"), bearerAllowed: false) else {
            return responder.send(HTTPResponse(status: 401, contentType: ContentType.html, body: unauthorizedHTML))
        }
        // A fault naming this path answers the request as it would a send (after authentication).
        PathFaults.answer(engine.pathFault(path: r.path, senderID: sender), to: responder) { answer(r, sender: sender) }
    }

    private func answer(_ r: HTTPRequest, sender: String) -> HTTPResponse {
        guard let project = r.header("project_id")?.trimmingSpaces(), !project.isEmpty else {
            return error(400, "project_id header is missing")
        }
        guard project == sender else { return error(401, "project_id does not match the project of the server key") }
        switch r.method {
        case "GET":
            let q = (try? Query(r.rawQuery))
            guard let name = q?["notification_key_name"] else { return error(400, "notification_key_name is missing") }
            guard let key = engine.groupKey(name: name, senderID: sender) else { return error(400, "notification_key not found") }
            return keyAnswer(key)
        case "POST":
            guard let body = try? JSONParser.parse(r.body), let o = body.objectValue else {
                return error(400, "the body must be a JSON object")
            }
            guard let op = o["operation"]?.stringValue else { return error(400, "operation is missing") }
            guard let ids = o["registration_ids"]?.arrayValue else { return error(400, "registration_ids must be a JSON array") }
            let tokens = ids.compactMap(\.stringValue)
            guard tokens.count == ids.count else { return error(400, "registration_ids must be strings") }
            do {
                let key = try engine.groupOperation(op, name: o["notification_key_name"]?.stringValue,
                                                    key: o["notification_key"]?.stringValue, tokens: tokens, senderID: sender)
                return keyAnswer(key)
            } catch {
                return self.error(error.kind == .refused ? 400 : 500, error.message)
            }
        default:
            return HTTPResponse(status: 405, contentType: ContentType.text, body: "Method Not Allowed\n", headers: [("Allow", "GET, POST")])
        }
    }

    private func keyAnswer(_ key: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("notification_key"); w.value(key)
        w.endObject()
        return HTTPResponse(status: 200, contentType: ContentType.json, body: w.string)
    }

    private func error(_ status: Int, _ message: String) -> HTTPResponse { jsonError(status, message) }
}
