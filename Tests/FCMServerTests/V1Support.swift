import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import TLS
import HTTPServer
import XCTest

/// Two projects with project ids, devices of every kind the v1 error table needs, and one fid
/// given by the fixture.
let v1Fixture = """
    {"projects": [
       {"sender_id": "111", "project_id": "demo-a", "server_keys": ["key-111"],
        "apps": [{"app": "com.a", "platform": "android"},
                 {"app": "com.a.ios", "platform": "ios", "apns_credential": "valid"},
                 {"app": "com.a.ios.nocred", "platform": "ios", "apns_credential": "missing"}]},
       {"sender_id": "222", "project_id": "demo-b", "server_keys": ["key-222"], "apps": [{"app": "com.b", "platform": "android"}]}],
     "devices": [
       {"token": "a1", "sender_id": "111", "app": "com.a", "fid": "dFixedInstallationId01"},
       {"token": "a2", "sender_id": "111", "app": "com.a"},
       {"token": "ios-ok", "sender_id": "111", "app": "com.a.ios", "platform": "ios"},
       {"token": "ios-nocred", "sender_id": "111", "app": "com.a.ios.nocred", "platform": "ios"},
       {"token": "a-offline", "sender_id": "111", "app": "com.a", "online": false},
       {"token": "b1", "sender_id": "222", "app": "com.b"}]}
    """

/// A service account's private half, as an SDK holds it.
struct ServiceAccountKey {
    let key: RSAPrivateKey
    let keyID: String
    let email: String
}

/// The exact v1 error bodies the spec's table fixes (docs/spec/fcm-v1.md section 2).
enum V1Body {
    static func error(_ code: Int, _ message: String, _ status: String, fcm: String? = nil,
                      violations: [(String, String)] = []) -> String {
        var details: [String] = []
        if let fcm { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(fcm)"}"#) }
        if !violations.isEmpty {
            let list = violations.map { #"{"field":"\#($0.0)","description":"\#($0.1)"}"# }.joined(separator: ",")
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[\#(list)]}"#)
        }
        let tail = details.isEmpty ? "" : #","details":[\#(details.joined(separator: ","))]"#
        return #"{"error":{"code":\#(code),"message":"\#(message)","status":"\#(status)"\#(tail)}}"#
    }

    static let unauthenticated = error(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.", "UNAUTHENTICATED")
    static let unregistered = error(404, "Requested entity was not found.", "NOT_FOUND", fcm: "UNREGISTERED")
    static let notFound = error(404, "Requested entity was not found.", "NOT_FOUND")
    static let senderMismatch = error(403, "SenderId mismatch", "PERMISSION_DENIED", fcm: "SENDER_ID_MISMATCH")
    static func permissionDenied(_ project: String) -> String {
        error(403, "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).", "PERMISSION_DENIED")
    }
}

/// End-to-end tests of HTTP v1 against an in-process server with `v1Fixture`, a service account
/// of each project and an access token of demo-a, fresh per test.
class V1TestCase: XCTestCase {
    var server: TestServer!
    var client: HTTPTestClient!
    var accountA: ServiceAccountKey!
    /// An access token of demo-a (sender 111), from the token endpoint.
    var tokenA = ""

    /// Extra command-line arguments for the server of every test of the class.
    var serverArguments: [String] { [] }

    /// What a class changes in the configuration no flag sets.
    func configure(_ c: inout Configuration) {}

    override func setUpWithError() throws {
        server = try TestServer(fixtures: [v1Fixture], extraArguments: serverArguments) { configure(&$0) }
        client = server.client()
        accountA = try serviceAccount("demo-a")
        tokenA = try accessToken(accountA)
    }

    override func tearDown() {
        client?.disconnect()
        server?.stop()
    }

    /// A new service account of `project`, through the control API.
    func serviceAccount(_ project: String) throws -> ServiceAccountKey {
        let r = try client.post("/api/v1/projects/\(project)/service-accounts")
        XCTAssertEqual(r.status, 201, r.text)
        let o = try XCTUnwrap(r.object)
        return ServiceAccountKey(key: try RSAPrivateKey(pem: try XCTUnwrap(o["private_key"]?.stringValue)),
                                 keyID: try XCTUnwrap(o["private_key_id"]?.stringValue),
                                 email: try XCTUnwrap(o["client_email"]?.stringValue))
    }

    /// A JWT signed by `signer` (the account's key unless given) with these parts.
    func jwt(_ a: ServiceAccountKey, header: String? = nil, claims: String, signer: RSAPrivateKey? = nil) throws -> String {
        let h = header ?? #"{"alg":"RS256","typ":"JWT","kid":"\#(a.keyID)"}"#
        let input = base64URLEncode(Array(h.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try (signer ?? a.key).signRS256(Array(input.utf8)))
    }

    /// An access token for `a`, as google-auth gets one.
    func accessToken(_ a: ServiceAccountKey) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let assertion = try jwt(a, claims: #"{"iss":"\#(a.email)","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"https://oauth2.googleapis.com/token","iat":\#(now),"exp":\#(now + 3600)}"#)
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let r = try client.request("POST", "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(body.utf8))
        XCTAssertEqual(r.status, 200, r.text)
        return try XCTUnwrap(r.object?["access_token"]?.stringValue)
    }

    /// A self-signed JWT for FCM (google-auth's "JWT access"), valid for an hour unless changed.
    func selfSignedJWT(_ a: ServiceAccountKey, header: String? = nil, aud: String = "https://fcm.googleapis.com/",
                       lifetime: Int64 = 3600, signer: RSAPrivateKey? = nil) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return try jwt(a, header: header, claims: #"{"iss":"\#(a.email)","sub":"\#(a.email)","aud":"\#(aud)","iat":\#(now),"exp":\#(now + lifetime)}"#,
                       signer: signer)
    }

    /// `POST /v1/projects/{project}/messages:send` as firebase-admin sends it; `bearer` nil: no
    /// Authorization header.
    func v1Send(_ body: String, project: String = "demo-a", bearer: String?? = .some(nil)) throws -> WireResponse {
        var headers = [("Content-Type", "application/json; charset=UTF-8"), ("X-GOOG-API-FORMAT-VERSION", "2"),
                       ("X-Firebase-Client", "fire-admin-python/7.7.0"), ("access_token_auth", "true")]
        switch bearer {
        case .none: break
        case .some(.none): headers.append(("Authorization", "Bearer \(tokenA)"))
        case .some(.some(let t)): headers.append(("Authorization", "Bearer \(t)"))
        }
        return try client.request("POST", "/v1/projects/\(project)/messages:send", headers: headers, body: Array(body.utf8))
    }

    /// A v1 request to any path with demo-a's token.
    func v1Request(_ method: String, _ path: String, body: String = "", bearer: String? = nil) throws -> WireResponse {
        try client.request(method, path, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(bearer ?? tokenA)")],
                           body: Array(body.utf8))
    }

    /// Checks a v1 answer's status, content type and exact body; `what` names the case in failures.
    func assertV1(_ r: WireResponse, _ status: Int, _ body: String, _ what: String = "",
                  file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, status, "\(what) \(r.text)", file: file, line: line)
        XCTAssertEqual(r.headers["content-type"], jsonType, what, file: file, line: line)
        XCTAssertEqual(r.text, body, what, file: file, line: line)
    }

    /// The message id in a token send's `name`, checking the name's shape.
    func messageID(_ r: WireResponse, project: String = "demo-a", file: StaticString = #filePath, line: UInt = #line) -> String {
        XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
        XCTAssertEqual(r.object?.keys, ["name"], file: file, line: line)
        let name = r.object?["name"]?.stringValue ?? ""
        let prefix = "projects/\(project)/messages/"
        XCTAssertTrue(name.hasPrefix(prefix), name, file: file, line: line)
        return String(name.dropFirst(prefix.count))
    }
}
