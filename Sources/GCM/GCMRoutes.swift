public import FCMEngine
public import FCMModel
public import HTTPServer
import FCMCore
import Platform
import Protobuf
import RoomKit

/// FCM's device side for Chromium's GCM driver and raw GCM clients (docs/real-clients.md):
/// `POST /checkin` (protobuf) and `POST /c2dm/register3` (a form), on every port and HTTP
/// version. Every register3 refusal is exactly `Error=<CODE>` as text (clients read the body);
/// checkin's are plain sentences.
public struct GCMRoutes: Sendable {
    let engine: Engine

    public init(engine: Engine) {
        self.engine = engine
    }

    /// register3's codes a fault may answer with (`when.path` `/c2dm/register3`, `then.error`).
    public static let faultErrors = FaultErrors(
        transport: "http", kind: "a register3 error", listName: "register3's errors",
        names: ["PHONE_REGISTRATION_ERROR", "QUOTA_EXCEEDED", "AUTHENTICATION_FAILED", "INVALID_PARAMETERS", "INVALID_SENDER",
                "TOO_MANY_REGISTRATIONS", "SERVICE_NOT_AVAILABLE", "INTERNAL_SERVER_ERROR", "DEPRECATED_ENDPOINT"],
        path: "/c2dm/register3")

    /// A checkin has no errors of its own: a fault naming it takes a status, a delay or a close.
    public static let checkinFaultErrors = FaultErrors(transport: "http", kind: "", listName: "", names: [], path: checkinPath)

    static let checkinPath = "/checkin"
    static let registerPath = "/c2dm/register3"

    // MARK: Checkin

    /// `POST /checkin`: `AndroidCheckinRequest` in, `AndroidCheckinResponse` out.
    public func checkin(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        guard r.method == "POST" else {
            return responder.send(HTTPResponse(status: 405, headers: [("Content-Type", ContentType.text), ("Allow", "POST")],
                                               body: Array("POST /checkin only".utf8)))
        }
        let fault = engine.surfaceFault(path: Self.checkinPath, senderID: nil)
        FaultAnswer.send(fault, to: responder, status: { Self.faulted($0, $1, body: fault?.detail ?? "") },
                         error: { _ in Self.text(500, fault?.detail ?? "") }, otherwise: { checkinAnswer(r) })
    }

    func checkinAnswer(_ r: HTTPRequest) -> HTTPResponse {
        // Plain sentences without a line end, as the contract gives them.
        guard !r.bodyTooLarge, let request = try? CheckinRequest(decoding: r.body) else {
            return Self.text(400, "the body is no AndroidCheckinRequest (checkin.proto)")
        }
        let info = CheckinInfo(platform: request.platform, chromeVersion: request.chromeVersion, channel: request.channel,
                               userAgent: r.header("user-agent"))
        do {
            guard let pair = try engine.checkin(androidID: request.androidID, securityToken: request.securityToken, info: info) else {
                return Self.text(401, "the android id and security token do not match")
            }
            let body = CheckinResponse.encode(androidID: pair.androidID, securityToken: pair.securityToken, timeMillis: engine.clock.nowMillis())
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/x-protobuf")], body: body)
        } catch {
            return Self.text(500, "the store failed")
        }
    }

    // MARK: register3

    /// `POST /c2dm/register3`: GetToken (GCM and Instance ID) and `delete=true`.
    public func register(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        guard r.method == "POST" else {
            return responder.send(HTTPResponse(status: 405, headers: [("Content-Type", ContentType.text), ("Allow", "POST")],
                                               body: Array("Error=INVALID_PARAMETERS".utf8)))
        }
        // A fault's `when.sender_id` is the request's `sender` (read only while a fault is in force).
        let fault = engine.surfaceFault(path: Self.registerPath,
                                        senderID: r.bodyTooLarge ? nil : FormBody.parse(r.body)?.first { $0.0 == "sender" }?.1)
        FaultAnswer.send(fault, to: responder, status: { Self.faulted($0, $1, body: "Error=" + Self.registerCode(forStatus: $0)) },
                         error: Self.error, otherwise: { answer(r) })
    }

    /// The `Error=` code a status fault on register3 answers with: the one that status means there
    /// (401 is register3's own `AUTHENTICATION_FAILED`), `SERVICE_NOT_AVAILABLE` for the rest.
    static func registerCode(forStatus status: Int) -> String {
        switch status {
        case 400: "INVALID_PARAMETERS"
        case 401, 403: "AUTHENTICATION_FAILED"
        case 429: "QUOTA_EXCEEDED"
        case 500: "INTERNAL_SERVER_ERROR"
        default: "SERVICE_NOT_AVAILABLE"
        }
    }

    func answer(_ r: HTTPRequest) -> HTTPResponse {
        guard let auth = r.header("authorization"), let (androidID, token) = Self.aidLogin(auth),
              engine.gcmAuthenticates(androidID: androidID, securityToken: token) else {
            return Self.error("AUTHENTICATION_FAILED")
        }
        guard !r.bodyTooLarge, let form = FormBody.parse(r.body) else { return Self.error("INVALID_PARAMETERS") }
        var fields: [String: String] = [:]
        for (k, v) in form where fields[k] == nil { fields[k] = v }
        guard let app = fields["app"], !app.isEmpty else { return Self.error("INVALID_PARAMETERS") }
        if let device = fields["device"], device != androidID { return Self.error("INVALID_PARAMETERS") }
        let delete = fields["delete"] == "true"
        // A sender id (digits) or a VAPID key, kept as a registration keeps it (unpadded), so a
        // delete names what a registration stored; `*` (every sender) only with `delete`.
        guard let sender = fields["sender"], !sender.isEmpty else { return Self.error("INVALID_SENDER") }
        // A VAPID key in base64url only (Chromium's and firebase-messaging's alphabet; `=` forgiven);
        // a delete takes any, so a registration kept in another alphabet can still go.
        let urlAlphabet = delete || !sender.utf8.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }
        let key = urlAlphabet ? engine.applicationServerKey(sender) : nil
        guard key != nil || sender.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) || (delete && sender == "*") else {
            return Self.error("INVALID_SENDER")
        }
        let subtype = fields["X-subtype"]
        if subtype?.isEmpty == true { return Self.error("INVALID_PARAMETERS") }
        let instanceID = fields["appid"]
        let isInstanceID = instanceID != nil || fields["scope"] != nil || fields["X-scope"] != nil || fields["gmsv"] != nil
        do {
            if delete {
                let gone = try engine.gcmUnregister(androidID: androidID, app: app, subtype: subtype, sender: sender == "*" ? nil : key ?? sender)
                return Self.text(200, isInstanceID ? "token=" + (gone.first ?? "") : "deleted=" + app, charset: true)
            }
            var origin: String?
            if let subtype, subtype.hasPrefix("wp:") {
                let scope = subtype.dropFirst(3).split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
                guard !scope.isEmpty else { return Self.error("INVALID_PARAMETERS") }
                origin = scope
            }
            let registration = GCMRegistration(androidID: androidID, app: app, subtype: subtype, sender: key ?? sender, senderIsKey: key != nil,
                                               instanceID: instanceID, webOrigin: origin)
            let token = try engine.gcmRegister(registration, newToken: Self.newToken) { token, channel in
                Self.endpoint(token: token, channel: channel)
            }
            return Self.text(200, "token=" + token, charset: true)
        } catch {
            return Self.error("INTERNAL_SERVER_ERROR")
        }
    }

    /// A new register3 token: FCM's shape, 22 characters, `:APA91b`, 124 more (153 in all), of
    /// base64url; never holding `Error` (a client looks for it in the answer).
    static func newToken() -> String {
        var rng = SystemRandomNumberGenerator()
        while true {
            let t = randomString(22, from: RandomAlphabet.base64URL, using: &rng) + ":APA91b"
                + randomString(124, from: RandomAlphabet.base64URL, using: &rng)
            if !t.contains("Error") { return t }
        }
    }

    /// The endpoint a `wp:` registration's client holds: Google's public host after a stable or
    /// beta checkin, else the one Chromium builds for other channels (Debian's says unknown).
    static func endpoint(token: String, channel: String?) -> String {
        let host = channel == "CHANNEL_STABLE" || channel == "CHANNEL_BETA" ? "https://fcm.googleapis.com" : "https://jmt17.google.com"
        return host + "/fcm/send/" + token
    }

    /// `AidLogin <android_id>:<security_token>` (decimal).
    static func aidLogin(_ value: String) -> (String, String)? {
        guard value.hasPrefix("AidLogin ") else { return nil }
        let parts = value.dropFirst(9).split(separator: ":", maxSplits: 1)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
              parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    /// `Error=<CODE>`: 401 for a failed authentication, 200 for the others.
    static func error(_ code: String) -> HTTPResponse {
        text(code == "AUTHENTICATION_FAILED" ? 401 : 200, "Error=" + code, charset: true)
    }

    static func text(_ status: Int, _ body: String, charset: Bool = false) -> HTTPResponse {
        HTTPResponse(status: status, contentType: charset ? "text/plain; charset=UTF-8" : ContentType.text, body: body)
    }

    /// A fault's status, in the surface's shape (`Retry-After` when set).
    static func faulted(_ code: Int, _ retry: Int64?, body: String) -> HTTPResponse {
        var answer = text(code, body, charset: true)
        if let retry { answer.headers.append(("Retry-After", String(retry))) }
        return answer
    }
}
