// Long because: the two Firebase APIs a web client registers through (Installations, FCM
// registrations) share their checks (API key, installation auth), Google's error shape and the
// JSON they answer.
public import FCMEngine
public import FCMModel
public import HTTPServer
import FCMCore
import FCMStore
import RoomKit

/// Firebase's web registration APIs (docs/real-clients.md), as firebase-messaging and Firebase's
/// web SDK call them: Installations (`/v1/projects/{project}/installations…`) and FCM
/// registrations (`/v1/projects/{project}/registrations…`). Answers and refusals are Google's
/// JSON (`google.rpc.Status` for errors). An FCM registration is a `web` device that FCM's
/// sends reach, its pushes encrypted by the mock for its keys and carried over the Web Push
/// subscription its endpoint names.
public struct FCMRegistrationRoutes: Sendable {
    let engine: Engine

    /// Installations and registrations have no errors of their own for a fault: one naming them
    /// takes a status (answered in Google's shape), a delay or a close.
    public static let faultErrors = ["installations", "registrations"].map {
        FaultErrors(transport: "http", kind: "", listName: "", names: [], path: "/v1/projects/*/" + $0)
    }

    public init(engine: Engine) {
        self.engine = engine
        engine.setRelayPayload(Self.webMessage)
    }

    /// FCM's JSON for a web client (`data`, `notification`, `fcmOptions`, `from`, `priority`,
    /// `collapse_key`, `fcmMessageId`), made from the send's effective `webpush` block: what an
    /// FCM registration's push carries before it is encrypted. `fcmOptions` comes with the
    /// block's `fcm_options` as sent: the effective `link`, and `analytics_label`, which the
    /// effective payload leaves out.
    static func webMessage(_ web: JSONObject?, sent: JSONObject?, senderID: String, collapseKey: String?, messageID: String) -> String {
        var payload = JSONObject()
        if let data = web?["data"]?.objectValue, data.count > 0 { payload["data"] = .object(data) }
        if let n = web?["notification"]?.objectValue, n.count > 0 { payload["notification"] = .object(n) }
        let effective = web?["fcm_options"]?.objectValue, asSent = sent?["fcm_options"]?.objectValue
        if effective != nil || asSent != nil {
            var fcm = JSONObject()
            if let link = effective?["link"] ?? asSent?["link"] { fcm["link"] = link }
            if let label = asSent?["analytics_label"] ?? effective?["analytics_label"] { fcm["analytics_label"] = label }
            payload["fcmOptions"] = .object(fcm)
        }
        payload["from"] = .string(senderID)
        let urgency = web?["headers"]?.objectValue?["Urgency"]?.stringValue
        payload["priority"] = .string(urgency == "high" ? "high" : "normal")
        // The web platform's collapse key: its effective `Topic` (a legacy send's `collapse_key`,
        // an HTTP v1 send's `webpush.headers.Topic`; not `android.collapse_key`).
        let topic = web.map { $0["headers"]?.objectValue?["Topic"]?.stringValue } ?? collapseKey
        payload["collapse_key"] = .string(topic ?? "do_not_collapse")
        payload["fcmMessageId"] = .string(messageID)
        return JSONValue.object(payload).serialized()
    }

    // MARK: Installations

    /// `POST /v1/projects/{project}/installations`.
    public func createInstallation(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        respond(r, p, responder, surface: "installations") { project, body throws(Refusal) in
            guard let o = body else { throw .argument("the body must be a JSON object") }
            guard let appID = o["appId"]?.stringValue, !appID.isEmpty else { throw .argument("appId is required") }
            guard o["authVersion"]?.stringValue == "FIS_v2" else { throw .argument("authVersion must be FIS_v2") }
            let row = try Self.mapped { () throws(FirebaseRefusal) in
                try engine.createInstallation(project: project, fid: o["fid"]?.stringValue, appID: appID, tokens: FirebaseTokens.new())
            }
            return Self.installation(row, projectID: engine.project(named: project)?.projectID ?? project)
        }
    }

    /// `POST …/installations/{fid}/authTokens:generate` (`Authorization: FIS_v2 <refresh token>`).
    public func generateAuthToken(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        respond(r, p, responder, surface: "installations") { project, _ throws(Refusal) in
            let refresh = try Self.refreshToken(r)
            let row = try Self.mapped { () throws(FirebaseRefusal) in
                try engine.refreshInstallation(project: project, fid: String(p["fid"] ?? ""), refreshToken: refresh,
                                               tokens: FirebaseTokens.new())
            }
            return Self.authToken(row)
        }
    }

    /// `DELETE …/installations/{fid}` (`Authorization: FIS_v2 <refresh token>`): `{}`.
    public func deleteInstallation(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        respond(r, p, responder, surface: "installations") { project, _ throws(Refusal) in
            let refresh = try Self.refreshToken(r)
            try Self.mapped { () throws(FirebaseRefusal) in
                try engine.deleteInstallation(project: project, fid: String(p["fid"] ?? ""), refreshToken: refresh)
            }
            return "{}"
        }
    }

    // MARK: Registrations

    /// `POST /v1/projects/{project}/registrations`.
    public func createRegistration(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        respond(r, p, responder, surface: "registrations", authenticate: installationCaller(r)) { project, body throws(Refusal) in
            let auth = try Self.installationAuth(r)
            guard let web = body?["web"]?.objectValue else { throw .argument("web is required") }
            let (registration, subscription) = try Self.web(web)
            let d = try Self.mapped { () throws(FirebaseRefusal) in
                try engine.fcmRegister(project: project, auth: auth, web: registration, subscriptionID: subscription, newToken: Self.newToken)
            }
            return Self.registration(token: d.token, projectID: engine.project(named: project)?.projectID ?? project, web: .object(web))
        }
    }

    /// The check of a registrations call's caller: a live auth token of an installation of the
    /// path's project.
    func installationCaller(_ r: HTTPRequest) -> (_ project: String) throws(Refusal) -> Void {
        { [engine] project throws(Refusal) in
            let auth = try Self.installationAuth(r)
            try Self.mapped { () throws(FirebaseRefusal) in try engine.fcmAuthenticate(project: project, auth: auth) }
        }
    }

    /// `GET`, `PATCH` (`{"web":{…}}`) and `DELETE` (`{}`) of `…/registrations/{token}`.
    public func registration(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        respond(r, p, responder, surface: "registrations", authenticate: installationCaller(r)) { project, body throws(Refusal) in
            let auth = try Self.installationAuth(r)
            // As sent, or percent-encoded (a token's `:` as `%3A`).
            guard let token = try? decode(p["token"] ?? "") else { throw .argument("bad percent-encoding in path") }
            let projectID = engine.project(named: project)?.projectID ?? project
            let (device, sub) = try Self.mapped { () throws(FirebaseRefusal) in
                try engine.fcmRegistration(project: project, auth: auth, token: token)
            }
            switch r.method {
            case "GET", "HEAD":
                // The object as the client last sent it (a store from before kept only the keys).
                let asSent = device.client?.web.flatMap { try? JSONParser.parse($0) }
                return Self.registration(token: device.token, projectID: projectID, web: asSent ?? Self.webJSON(sub))
            case "PATCH":
                guard let web = body?["web"]?.objectValue else { throw .argument("web is required") }
                let (registration, subscription) = try Self.web(web)
                // This registration, whatever subscription it named: it keeps its token.
                let d = try Self.mapped { () throws(FirebaseRefusal) in
                    try engine.fcmRegister(project: project, auth: auth, web: registration, subscriptionID: subscription, token: device.token,
                                           newToken: Self.newToken)
                }
                return Self.registration(token: d.token, projectID: projectID, web: .object(web))
            case "DELETE":
                do { _ = try engine.unregister(device.token) } catch { throw .status(500, "INTERNAL", "the store failed") }
                return "{}"
            default:
                throw .status(405, "INVALID_ARGUMENT", "\(r.method) is not allowed on a registration")
            }
        }
    }

    /// A new registration's token, as Google's: the installation's FID (22 characters), `:APA91b`,
    /// 124 characters of base64url (153 in all, register3's shape too).
    static func newToken(fid: String) -> String {
        var rng = SystemRandomNumberGenerator()
        while true {
            let t = fid + ":APA91b" + randomString(124, from: RandomAlphabet.base64URL, using: &rng)
            if !t.contains("Error") { return t }
        }
    }

    // MARK: Checks and answers

    /// A refusal in Google's shape.
    enum Refusal: Error {
        case status(Int, String, String)

        static func argument(_ message: String) -> Refusal { .status(400, "INVALID_ARGUMENT", message) }
    }

    /// A registration's field as Google names it in a refusal.
    static func fieldName(_ field: WebRegistrationField) -> String {
        switch field {
        case .p256dh: "web.p256dh"
        case .auth: "web.auth"
        case .applicationPubKey: "web.applicationPubKey"
        case .endpoint: "web.endpoint: no subscription the mock serves has this endpoint"
        }
    }

    static func mapped<T>(_ body: () throws(FirebaseRefusal) -> T) throws(Refusal) -> T {
        do { return try body() } catch {
            switch error {
            case .unknownProject, .notFound: throw .status(404, "NOT_FOUND", "Requested entity was not found.")
            case .missingAuthToken:
                throw .status(401, "UNAUTHENTICATED",
                              "Request is missing required authentication credential. Expected a valid Firebase installation auth token.")
            case .invalidField(let field): throw .argument("Request contains an invalid argument: \(Self.fieldName(field))")
            case .unauthenticated(let m): throw .status(401, "UNAUTHENTICATED", m)
            case .permissionDenied(let m): throw .status(403, "PERMISSION_DENIED", m)
            case .failed: throw .status(500, "INTERNAL", "Internal error encountered.")
            }
        }
    }

    /// Answers a call on `surface` as a fault naming it says (`when.path` its pattern,
    /// `/v1/projects/*/installations`, or as this call names it, with its project; `when.sender_id`
    /// the project's), else with `answer`.
    /// `authenticate`: who calls, checked before the body is read (401 before 400, as Google).
    func respond(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder, surface: String,
                 authenticate: ((_ project: String) throws(Refusal) -> Void)? = nil,
                 _ make: (_ project: String, _ body: JSONObject?) throws(Refusal) -> String) {
        let project = String(p["project"] ?? "")
        let known = engine.project(named: project)
        // The project as the call names it, by its id or its sender id: a fault may name either.
        let fault = engine.surfaceFault(path: "/v1/projects/*/" + surface,
                                        named: Set([project] + [known?.projectID, known?.senderID].compactMap { $0 })
                                            .map { "/v1/projects/\($0)/" + surface },
                                        senderID: known?.senderID)
        FaultAnswer.send(fault, to: responder, status: { code, retry in
            var answer = Self.error(code, Self.statusName(code), fault?.detail ?? "")
            if let retry { answer.headers.append(("Retry-After", String(retry))) }
            return answer
        }, error: { _ in Self.error(500, "INTERNAL", fault?.detail ?? "") }, otherwise: { answer(r, project: project, known: known != nil, authenticate: authenticate, make) })
    }

    /// The API key (any non-empty one: the mock has no API keys), the project (`known`: the mock
    /// has it), the body as JSON whatever its content type (firebase-messaging sends
    /// `text/plain`), then `make`.
    func answer(_ r: HTTPRequest, project: String, known: Bool, authenticate: ((_ project: String) throws(Refusal) -> Void)? = nil,
                _ make: (_ project: String, _ body: JSONObject?) throws(Refusal) -> String) -> HTTPResponse {
        do throws(Refusal) {
            let key = r.header("x-goog-api-key") ?? r.rawQuery.first { $0.0 == "key" }?.1
            guard let key, !key.isEmpty else {
                throw .status(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
            }
            guard known else { throw .status(404, "NOT_FOUND", "Requested entity was not found.") }
            try authenticate?(project)
            var body: JSONObject?
            if !r.body.isEmpty {
                guard !r.bodyTooLarge, let v = try? JSONParser.parse(r.body) else { throw .argument("the body is not JSON") }
                body = v.objectValue
            }
            return HTTPResponse(status: 200, contentType: ContentType.json, body: try make(project, body))
        } catch {
            guard case .status(let code, let status, let message) = error else { return Self.error(500, "INTERNAL", "") }
            return Self.error(code, status, message)
        }
    }

    static func error(_ code: Int, _ status: String, _ message: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("error"); w.beginObject()
        w.key("code"); w.value(code)
        w.key("message"); w.value(message)
        w.key("status"); w.value(status)
        w.endObject()
        w.endObject()
        return HTTPResponse(status: code, contentType: ContentType.json, body: w.string)
    }

    static func statusName(_ code: Int) -> String {
        switch code {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 503: "UNAVAILABLE"
        default: "INTERNAL"
        }
    }

    /// `Authorization: FIS_v2 <refresh token>`.
    static func refreshToken(_ r: HTTPRequest) throws(Refusal) -> String {
        guard let v = r.header("authorization"), v.hasPrefix("FIS_v2 "), v.count > 7 else {
            throw .status(401, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected FIS_v2 and the installation's refresh token.")
        }
        return String(v.dropFirst(7))
    }

    /// `x-goog-firebase-installations-auth`: the auth token, bare or after `FIS `.
    static func installationAuth(_ r: HTTPRequest) throws(Refusal) -> String {
        guard var v = r.header("x-goog-firebase-installations-auth"), !v.isEmpty else {
            throw .status(401, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected a valid Firebase installation auth token.")
        }
        if v.hasPrefix("FIS ") { v = String(v.dropFirst(4)) }
        return v
    }

    /// A registration's `web`: its keys (padding forgiven) and the id of the subscription its
    /// endpoint names, by path whatever the host.
    static func web(_ o: JSONObject) throws(Refusal) -> (FCMWebRegistration, String) {
        func field(_ name: String) throws(Refusal) -> String {
            guard let v = o[name]?.stringValue, !v.isEmpty else { throw .argument("Request contains an invalid argument: web.\(name)") }
            return v
        }
        let endpoint = try field("endpoint")
        let key: String?
        switch o["applicationPubKey"] {
        case nil, .null?: key = nil
        case .string(let s)?: key = s.isEmpty ? nil : s
        default: throw .argument("Request contains an invalid argument: web.applicationPubKey")
        }
        let unpadded = { (s: String) in String(s.prefix { $0 != "=" }) }
        guard let id = subscriptionID(endpoint) else {
            throw .argument("Request contains an invalid argument: web.endpoint (not a push endpoint the mock serves)")
        }
        return (FCMWebRegistration(applicationPubKey: key.map(unpadded), auth: unpadded(try field("auth")), endpoint: endpoint,
                                   p256dh: unpadded(try field("p256dh")), asSent: JSONValue.object(o).serialized()), id)
    }

    /// The subscription id of a push endpoint: the last segment after `/fcm/send/`, `/wp/` or
    /// `/wpush/v2/`.
    static func subscriptionID(_ endpoint: String) -> String? {
        let parts = endpoint.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // scheme:, "", host, path
        guard parts.count == 4, parts[0].hasSuffix(":"), parts[1].isEmpty, !parts[2].isEmpty else { return nil }
        let path = "/" + parts[3]
        for prefix in ["/fcm/send/", WebPushEndpoints.path, "/wpush/v2/"] where path.hasPrefix(prefix) {
            let id = String(path.dropFirst(prefix.count))
            guard !id.isEmpty, !id.contains("/") else { return nil }
            return FormBody.percentDecode(id.utf8, plusIsSpace: false)
        }
        return nil
    }

    static func installation(_ row: InstallationRow, projectID: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("name"); w.value("projects/\(projectID)/installations/\(row.fid)")
        w.key("fid"); w.value(row.fid)
        w.key("refreshToken"); w.value(row.refreshToken)
        w.key("authToken"); w.raw(authToken(row))
        w.endObject()
        return w.string
    }

    static func authToken(_ row: InstallationRow) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("token"); w.value(row.authToken)
        w.key("expiresIn"); w.value("\(FirebaseTokens.authSeconds)s")
        w.endObject()
        return w.string
    }

    static func registration(token: String, projectID: String, web: JSONValue) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("name"); w.value("projects/\(projectID)/registrations/\(token)")
        w.key("token"); w.value(token)
        w.key("web"); w.raw(web.serialized())
        w.endObject()
        return w.string
    }

    static func webJSON(_ sub: WebPushSubscription) -> JSONValue {
        .object(JSONObject([("applicationPubKey", sub.applicationServerKey.map { .string($0) } ?? .null),
                            ("auth", .string(base64URLEncode(sub.auth))), ("endpoint", .string(sub.endpointOverride ?? "")),
                            ("p256dh", .string(base64URLEncode(sub.publicKey)))]))
    }
}
