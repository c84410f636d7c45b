import FCMCore
import FCMEngine
import FCMModel
import FCMServer
import FCMTesting
import Foundation
import TLS
import HTTPServer
import Synchronization
import XCTest

/// The OAuth 2.0 token endpoint (docs/spec/fcm-v1.md section 3) over real HTTP: service-account
/// JWTs signed RS256 are exchanged for access tokens; every refusal is Google's JSON.
final class OAuthTests: XCTestCase {
    var server: TestServer!
    var client: HTTPTestClient!
    var key: RSAPrivateKey!
    var keyID = ""
    var email = ""
    /// The `token_uri` of the service account the server handed out.
    var tokenURI = ""
    let messaging = "https://www.googleapis.com/auth/firebase.messaging"

    override func setUpWithError() throws {
        server = try TestServer()
        client = server.client()
        let sa = try XCTUnwrap(try client.post("/api/v1/projects/123456789012/service-accounts").object)
        key = try RSAPrivateKey(pem: try XCTUnwrap(sa["private_key"]?.stringValue))
        keyID = try XCTUnwrap(sa["private_key_id"]?.stringValue)
        email = try XCTUnwrap(sa["client_email"]?.stringValue)
        tokenURI = try XCTUnwrap(sa["token_uri"]?.stringValue)
    }

    override func tearDown() {
        client?.disconnect()
        server?.stop()
    }

    /// A JWT as google-auth makes it, with what a case changes.
    /// `aud` is the claim's JSON value (nil: none).
    func assertion(header: String? = nil, iss: String? = nil, scope: String? = nil, iat: Int64? = nil, lifetime: Int64 = 3600,
                   aud: String? = #""https://oauth2.googleapis.com/token""#, signer: RSAPrivateKey? = nil) throws -> String {
        let now = iat ?? Int64(Date().timeIntervalSince1970)
        let h = header ?? #"{"alg":"RS256","typ":"JWT","kid":"\#(keyID)"}"#
        let audience = aud.map { #""aud":\#($0),"# } ?? ""
        let claims = #"{"iss":"\#(iss ?? email)","scope":"\#(scope ?? messaging)",\#(audience)"iat":\#(now),"exp":\#(now + lifetime)}"#
        let input = base64URLEncode(Array(h.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try (signer ?? key).signRS256(Array(input.utf8)))
    }

    /// The algorithm-confusion attack: an HS256 JWT whose HMAC key is the account's public key
    /// PEM (a verifier that let the token pick the algorithm would accept it).
    func hs256Assertion() throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let h = #"{"alg":"HS256","typ":"JWT","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(email)","scope":"\#(messaging)","aud":"https://oauth2.googleapis.com/token","iat":\#(now),"exp":\#(now + 3600)}"#
        let input = base64URLEncode(Array(h.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try hmacSHA256(key: Array(key.publicKeyPEM.utf8), message: Array(input.utf8)))
    }

    func exchange(_ jwt: String, path: String = "/token", grant: String = "urn:ietf:params:oauth:grant-type:jwt-bearer") throws -> WireResponse {
        let body = "grant_type=\(grant.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&assertion=\(jwt)"
        return try client.request("POST", path, headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(body.utf8))
    }

    func testAServiceAccountGetsAnAccessTokenOnEveryPath() throws {
        for path in ["/token", "/oauth2/v4/token", "/o/oauth2/token"] {
            let r = try exchange(try assertion(), path: path)
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(r.headers["content-type"], jsonType)
            XCTAssertEqual(r.object?.keys, ["access_token", "expires_in", "token_type"])
            XCTAssertTrue(r.object?["access_token"]?.stringValue?.hasPrefix("ya29.") ?? false)
            XCTAssertEqual(r.object?["expires_in"]?.numberValue?.int64, 3599)
            XCTAssertEqual(r.object?["token_type"]?.stringValue, "Bearer")
        }
        XCTAssertEqual(try exchange(try assertion(scope: "openid https://www.googleapis.com/auth/cloud-platform")).status, 200)
        let issued = items(try client.get("/api/v1/access-tokens"))
        XCTAssertEqual(issued.count, 4)
        XCTAssertEqual(issued[0].keys, ["id", "token_prefix", "client_email", "project_id", "scope", "issued_at", "expires_at"])
        XCTAssertEqual(issued[0]["client_email"]?.stringValue, email)
        XCTAssertEqual(issued[0]["project_id"]?.stringValue, "demo-project")
        XCTAssertEqual(issued[0]["token_prefix"]?.stringValue?.count, 12)
        let id = try XCTUnwrap(issued[0]["id"]?.stringValue)
        XCTAssertEqual(try client.delete("/api/v1/access-tokens/\(id)").status, 204)
        XCTAssertEqual(try client.delete("/api/v1/access-tokens/\(id)").status, 404)
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(items(try client.get("/api/v1/access-tokens")).count, 0, "a reset forgets issued tokens")
    }

    /// Google's answer names only a refusal's kind; the log says which check failed, as the
    /// rule that refused found it.
    func testEachRefusalIsLoggedWithWhichCheckFailed() throws {
        let reasons = Mutex<[String]>([])
        server.app.engine.onNotice { n in
            if n.message == "token request refused", let r = n.fields.first(where: { $0.0 == "reason" })?.1 { reasons.withLock { $0.append(r) } }
        }
        let other = try RSAPrivateKey()
        let cases: [(String, String)] = [
            (try assertion(header: #"{"alg":"RS256","kid":"nope"}"#), "kid nope is no service account's key (deleted, or of another server's store?)"),
            (try assertion(signer: other), "the signature does not verify with key \(keyID) (\(email))"),
            ("abc.def", "the assertion is not a JWT this server takes (a JWT has three parts separated by dots)"),
            (try assertion(iss: "someone@else.iam.gserviceaccount.com"),
             "iss 'someone@else.iam.gserviceaccount.com' is not \(email), the account of key \(keyID)"),
            (try assertion(lifetime: 7200), "exp is 7200 s after iat (at most 3600)"),
            (try assertion(scope: "openid"), "scope 'openid' has neither https://www.googleapis.com/auth/firebase.messaging nor …/cloud-platform"),
        ]
        for (jwt, _) in cases { XCTAssertEqual(try exchange(jwt).status, 400) }
        XCTAssertEqual(try exchange(try assertion(), grant: "password").status, 400)
        XCTAssertEqual(reasons.withLock { $0 }, cases.map(\.1) + ["grant_type 'password' is not urn:ietf:params:oauth:grant-type:jwt-bearer"])
    }

    func testRefusalsAreGooglesJSON() throws {
        let signature = #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#
        let other = try RSAPrivateKey()
        let long = String(repeating: "x", count: 9000)
        let cases: [(String, String, String)] = [
            ("alg none", try assertion(header: #"{"alg":"none","kid":"\#(keyID)"}"#), signature),
            ("HS256 keyed with the public key", try hs256Assertion(), signature),
            ("no kid", try assertion(header: #"{"alg":"RS256"}"#), signature),
            ("unknown kid", try assertion(header: #"{"alg":"RS256","kid":"nope"}"#), signature),
            ("another key's signature", try assertion(signer: other), signature),
            ("not a JWT", "abc.def", signature),
            ("over 8 KiB", try assertion(scope: long), signature),
            ("unknown iss", try assertion(iss: "someone@else.iam.gserviceaccount.com"),
             #"{"error":"invalid_grant","error_description":"Invalid grant: account not found"}"#),
            ("longer than an hour", try assertion(lifetime: 7200),
             #"{"error":"invalid_grant","error_description":"Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."}"#),
            ("issued in the future", try assertion(iat: Int64(Date().timeIntervalSince1970) + 3000),
             #"{"error":"invalid_grant","error_description":"Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."}"#),
            ("another scope", try assertion(scope: "https://www.googleapis.com/auth/userinfo.email"),
             #"{"error":"invalid_scope","error_description":"Invalid OAuth scope or ID token audience provided."}"#),
        ]
        for (name, jwt, expected) in cases {
            let r = try exchange(jwt)
            XCTAssertEqual(r.status, 400, name)
            XCTAssertEqual(r.text, expected, name)
        }
        let grant = try exchange(try assertion(), grant: "password")
        XCTAssertEqual(grant.status, 400)
        XCTAssertEqual(grant.text, #"{"error":"unsupported_grant_type","error_description":"Invalid grant_type: password"}"#)
        XCTAssertEqual(try client.get("/token").status, 405)
        XCTAssertEqual(items(try client.get("/api/v1/access-tokens")).count, 0, "nothing was issued")
    }

    /// `aud` must name this endpoint: Google's token URIs, or the `token_uri` the mock handed out
    /// (the scheme and host the request came with), or the path it came to; anything else is
    /// Google's "Failed audience check".
    func testTheAudienceMustNameTheTokenEndpoint() throws {
        XCTAssertEqual(tokenURI, "http://127.0.0.1:\(server.port)/token")
        let here = "127.0.0.1:\(server.port)"
        let accepted: [(String, String)] = [
            (#""https://oauth2.googleapis.com/token""#, "/token"),
            (#""https://www.googleapis.com/oauth2/v4/token""#, "/token"),
            (#""https://accounts.google.com/o/oauth2/token""#, "/o/oauth2/token"),
            (#""\#(tokenURI)""#, "/token"),
            (#""\#(tokenURI)""#, "/oauth2/v4/token"),
            (#""HTTP://\#(here)/token""#, "/token"),
            (#""http://\#(here)/oauth2/v4/token""#, "/oauth2/v4/token"),
        ]
        for (aud, path) in accepted {
            let r = try exchange(try assertion(aud: aud), path: path)
            XCTAssertEqual(r.status, 200, "\(aud) at \(path): \(r.text)")
        }
        let failed = #"{"error":"invalid_grant","error_description":"Invalid JWT: Failed audience check."}"#
        let refused: [(String?, String)] = [
            (nil, "/token"),
            (#""""#, "/token"),
            (#"["https://oauth2.googleapis.com/token"]"#, "/token"),
            (#""https://fcm.googleapis.com/""#, "/token"),
            (#""https://oauth2.googleapis.com/token/""#, "/token"),
            (#""https://\#(here)/token""#, "/token"),
            (#""http://127.0.0.1:1/token""#, "/token"),
            (#""http://localhost:\#(server.port)/token""#, "/token"),
            (#""http://evil.example/token""#, "/token"),
            (#""\#(tokenURI)?x=1""#, "/token"),
            (#""http://\#(here)/oauth2/v4/token""#, "/token"),
            (#""http://\#(here)""#, "/token"),
        ]
        for (aud, path) in refused {
            let r = try exchange(try assertion(aud: aud), path: path)
            XCTAssertEqual(r.status, 400, "\(aud ?? "no aud") at \(path)")
            XCTAssertEqual(r.text, failed, "\(aud ?? "no aud") at \(path)")
        }
        // The Host the request came with decides, whatever address the socket has; a default
        // port counts as absent on either side.
        func exchangeAt(host: String, aud: String) throws -> WireResponse {
            let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(try assertion(aud: #""\#(aud)""#))"
            return try client.raw(Array(("POST /token HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8))
        }
        XCTAssertEqual(try exchangeAt(host: "mock.test:4004", aud: "http://mock.test:4004/token").status, 200)
        XCTAssertEqual(try exchangeAt(host: "mock.test", aud: "http://mock.test:80/token").status, 200)
        XCTAssertEqual(try exchangeAt(host: "mock.test:80", aud: "http://MOCK.test/token").status, 200)
        XCTAssertEqual(try exchangeAt(host: "mock.test:4004", aud: tokenURI).text, failed)
    }

    /// Times are on the mock's clock; a revoked key's JWTs are refused.
    func testTheClockAndRevocation() throws {
        let jwt = try assertion()
        XCTAssertEqual(try exchange(jwt).status, 200)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":7200}"#).status, 200)
        XCTAssertEqual(try exchange(jwt).object?["error"]?.stringValue, "invalid_grant", "expired on the mock's clock")
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).status, 200)
        XCTAssertEqual(try client.delete("/api/v1/projects/123456789012/service-accounts/\(keyID)").status, 204)
        XCTAssertEqual(try exchange(try assertion()).object?["error_description"]?.stringValue, "Invalid JWT Signature.")
    }

    /// `--accept-any-key`: an RS256 assertion of a key no project knows is the first project's
    /// (its signature cannot be checked); a known key is still verified, and times and scope
    /// still count. The token then sends over v1 and, with `access_token_auth`, over legacy.
    func testAcceptAnyKeyTakesAnUnknownKeysAssertion() throws {
        let loose = try TestServer(extraArguments: ["--accept-any-key"])
        defer { loose.stop() }
        let c = loose.client()
        defer { c.disconnect() }
        let stranger = try RSAPrivateKey(generatingBits: 2048)
        let header = #"{"alg":"RS256","typ":"JWT","kid":"0123456789abcdef0123456789abcdef01234567"}"#
        func post(_ jwt: String) throws -> WireResponse {
            try c.request("POST", "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                          body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(jwt)".utf8))
        }
        let ok = try post(try assertion(header: header, iss: "ci@elsewhere.iam.gserviceaccount.com", signer: stranger))
        XCTAssertEqual(ok.status, 200, ok.text)
        let token = try XCTUnwrap(ok.object?["access_token"]?.stringValue)
        let listed = try c.get("/api/v1/access-tokens").text
        XCTAssertTrue(listed.contains(#""client_email":"ci@elsewhere.iam.gserviceaccount.com""#), listed)
        XCTAssertTrue(listed.contains(#""project_id":"demo-project""#), listed)
        // Times and scope are still checked.
        let stale = try post(try assertion(header: header, iat: Int64(Date().timeIntervalSince1970) - 7200, signer: stranger))
        XCTAssertEqual(stale.object?["error"]?.stringValue, "invalid_grant")
        XCTAssertEqual(try post(try assertion(header: header, scope: "openid", signer: stranger)).object?["error"]?.stringValue,
                       "invalid_scope")
        // The token sends over v1 and over legacy with access_token_auth.
        let v1 = try c.request("POST", "/v1/projects/123456789012/messages:send",
                               headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                               body: Array(#"{"message":{"token":"demo-android-1","data":{"via":"any-key"}}}"#.utf8))
        XCTAssertEqual(v1.status, 200, v1.text)
        let legacy = try c.request("POST", "/fcm/send",
                                   headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"),
                                             ("access_token_auth", "true")],
                                   body: Array(#"{"to":"demo-android-1","data":{"via":"any-key"}}"#.utf8))
        XCTAssertEqual(legacy.status, 200, legacy.text)
        XCTAssertTrue(legacy.text.contains(#""success":1"#), legacy.text)
    }
}
