import FCMCore
import FCMEngine
import HTTPServer

/// Apple's APNs provider API (docs/spec/apns.md, docs/apns.md): `POST /3/device/{token}` over
/// HTTP/2, answered in Apple's shape (`{"reason":…}` with the reason's status, `apns-id` echoed
/// or made). Checks run in the contract's order: path, method, authentication, headers, device
/// token, topic against the key's team, body, size, device.
struct APNsRoutes: Sendable {
    let engine: Engine
    /// `--apns-environment`: the environment of a request to a host that is not Apple's.
    let environment: APNsEnvironment

    static let devicePrefix = "/3/device/"

    /// Everything under `/3/`.
    func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        responder.send(answer(r))
    }

    func answer(_ r: HTTPRequest) -> HTTPResponse {
        guard r.isHTTP2 else {
            return HTTPResponse(status: 505, contentType: ContentType.text,
                                body: "APNs speaks HTTP/2 only: send this request over HTTP/2 (h2, or h2c with prior knowledge)\n")
        }
        // The sender's id when it is one; a new one otherwise (a malformed one too: it is refused).
        let given = r.header("apns-id")
        let apnsID = given.flatMap { isCanonicalUUID($0) ? $0 : nil } ?? newUUID()
        do throws(APNsError) {
            let token = try Self.deviceToken(path: r.path)
            guard r.method == "POST" else {
                throw APNsError(.methodNotAllowed, "\(r.method) on \(r.path): the device path takes POST only")
            }
            let auth: APNsTokenAuthorization
            switch engine.authorizeProviderToken(r.header("authorization")) {
            case .success(let a): auth = a
            case .failure(let e): throw e
            }
            let headers = try APNsHeaders.parse(r.headers, body: r.body, topicRequired: true)
            try APNsDeviceToken.check(token)
            // The topic is required with token authentication, so there is a bundle id.
            let bundle = headers.bundleID ?? ""
            guard engine.apnsTeam(auth.teamID, has: bundle) else {
                throw APNsError(.topicDisallowed, "team \(auth.teamID) (key \(auth.keyID)) has no app \(bundle)")
            }
            if r.bodyTooLarge {
                throw APNsError(.payloadTooLarge, "the payload is over the server's body limit")
            }
            _ = try APNsPayload.check(r.body, pushType: headers.pushType)
            let env = APNsEnvironment.of(host: r.header("host"), fallback: environment)
            throw APNsError(.badDeviceToken, "no \(env.rawValue) device has this APNs token")
        } catch {
            return Self.response(error, apnsID: apnsID)
        }
    }

    /// The token of `/3/device/{token}`; `BadPath` for any other path under `/3/`.
    static func deviceToken(path: String) throws(APNsError) -> String {
        guard path.hasPrefix(devicePrefix) else { throw APNsError(.badPath, "\(path) is not /3/device/{token}") }
        let token = path.dropFirst(devicePrefix.count)
        guard !token.contains("/") else { throw APNsError(.badPath, "\(path) is not /3/device/{token}") }
        return String(token)
    }

    /// Apple's answer to a refusal: its status, exactly `{"reason":…}`, and the `apns-id`.
    static func response(_ e: APNsError, apnsID: String) -> HTTPResponse {
        HTTPResponse(status: e.status, contentType: "application/json", body: e.body, headers: [("apns-id", apnsID)])
    }

    /// Apple's success: 200, no body, the `apns-id`, and in the sandbox an `apns-unique-id`.
    static func success(apnsID: String, uniqueID: String?) -> HTTPResponse {
        var headers = [("apns-id", apnsID)]
        if let uniqueID { headers.append(("apns-unique-id", uniqueID)) }
        return HTTPResponse(status: 200, headers: headers)
    }
}
