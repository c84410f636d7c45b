import FCMCore
import FCMTesting
import Foundation
import TLS
import HTTPServer
import XCTest

/// Bearer credentials (docs/spec/fcm-v1.md sections 2 and 3) on the v1 send path, and on the
/// legacy and Instance ID paths that take them with `access_token_auth`.
final class V1AuthTests: V1TestCase {
    let send = #"{"message":{"token":"a1"}}"#

    func assertUnauthenticated(_ r: WireResponse, file: StaticString = #filePath, line: UInt = #line) {
        assertV1(r, 401, V1Body.unauthenticated, file: file, line: line)
        XCTAssertEqual(r.headers["www-authenticate"], #"Bearer realm="https://accounts.google.com/""#, file: file, line: line)
    }

    func testMissingOrGarbageCredentials() throws {
        assertUnauthenticated(try v1Send(send, bearer: .none))
        assertUnauthenticated(try v1Send(send, bearer: "garbage"))
        assertUnauthenticated(try v1Send(send, bearer: "ya29.mock-not-issued"))
        assertUnauthenticated(try client.request("POST", "/v1/projects/demo-a/messages:send",
                                                 headers: [("Authorization", "key=key-111")], body: Array(send.utf8)))
        // Recorded, under the path's project.
        let records = items(try client.get("/api/v1/messages?status=rejected"))
        XCTAssertEqual(records.count, 4)
        XCTAssertEqual(records.first?["error"]?.stringValue, "UNAUTHENTICATED")
        XCTAssertEqual(records.first?["http_status"]?.numberValue?.int64, 401)
        XCTAssertEqual(records.first?["sender_id"]?.stringValue, "111")
        XCTAssertEqual(records.first?["transport"]?.stringValue, "http_v1")
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
    }

    func testAccessTokensExpireAndAreRevokedOnTheMocksTerms() throws {
        XCTAssertEqual(try v1Send(send).status, 200)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3600}"#).status, 200)
        assertUnauthenticated(try v1Send(send))
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).status, 200)
        XCTAssertEqual(try v1Send(send).status, 200, "back within its hour")
        let id = try XCTUnwrap(items(try client.get("/api/v1/access-tokens")).first?["id"]?.stringValue)
        XCTAssertEqual(try client.delete("/api/v1/access-tokens/\(id)").status, 204)
        assertUnauthenticated(try v1Send(send))
        // A deleted service account's tokens go with it.
        tokenA = try accessToken(accountA)
        XCTAssertEqual(try v1Send(send).status, 200)
        XCTAssertEqual(try client.delete("/api/v1/projects/demo-a/service-accounts/\(accountA.keyID)").status, 204)
        assertUnauthenticated(try v1Send(send))
    }

    func testAnotherProjectsCredentialIsPermissionDenied() throws {
        let b = try serviceAccount("demo-b")
        let tokenB = try accessToken(b)
        assertV1(try v1Send(send, bearer: tokenB), 403, V1Body.permissionDenied("demo-a"))
        assertV1(try v1Send(send, project: "111", bearer: tokenB), 403, V1Body.permissionDenied("111"))
        // Its own project's path works, and its token belongs to it there.
        assertV1(try v1Send(send, project: "demo-b", bearer: tokenB), 403, V1Body.senderMismatch)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"b1"}}"#, project: "demo-b", bearer: tokenB).status, 200)
        // An unknown project is 404 whoever asks; without a credential, 401 comes first.
        assertV1(try v1Send(send, project: "nope", bearer: tokenB), 404, V1Body.notFound)
        assertUnauthenticated(try v1Send(send, project: "nope", bearer: .none))
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=rejected")).prefix(2).map { $0["error"]?.stringValue },
                       ["UNAUTHENTICATED", "NOT_FOUND"])
    }

    func testSelfSignedJWTs() throws {
        XCTAssertEqual(try v1Send(send, bearer: try selfSignedJWT(accountA)).status, 200)
        XCTAssertEqual(try v1Send(send, bearer: try selfSignedJWT(accountA, aud: "https://fcm.googleapis.com")).status, 200)
        let jwt = try selfSignedJWT(accountA)
        XCTAssertEqual(try v1Send(send, bearer: jwt).status, 200, "the same JWT again (remembered as verified)")
        let other = try RSAPrivateKey()
        assertUnauthenticated(try v1Send(send, bearer: try selfSignedJWT(accountA, signer: other)))
        assertUnauthenticated(try v1Send(send, bearer: try selfSignedJWT(accountA, aud: "https://oauth2.googleapis.com/token")))
        assertUnauthenticated(try v1Send(send, bearer: try selfSignedJWT(accountA, lifetime: -10)))
        assertUnauthenticated(try v1Send(send, bearer: try selfSignedJWT(accountA, header: #"{"alg":"RS256","kid":"unknown"}"#)))
        // No `kid` (nothing names the key to verify with), and a JWT over 8 KiB: refused though
        // each is signed by the account's own key with good claims.
        assertUnauthenticated(try v1Send(send, bearer: try selfSignedJWT(accountA, header: #"{"alg":"RS256","typ":"JWT"}"#)))
        let now = Int64(Date().timeIntervalSince1970)
        func padded(_ n: Int) throws -> String {
            try self.jwt(accountA, claims: #"{"iss":"\#(accountA.email)","sub":"\#(accountA.email)","aud":"https://fcm.googleapis.com/","iat":\#(now),"exp":\#(now + 3600),"pad":"\#(String(repeating: "x", count: n))"}"#)
        }
        let under = try padded(5500), over = try padded(6000)
        XCTAssertLessThan(under.utf8.count, 8192)
        XCTAssertEqual(try v1Send(send, bearer: under).status, 200, "the same JWT a little shorter is taken")
        XCTAssertGreaterThan(over.utf8.count, 8192)
        assertUnauthenticated(try v1Send(send, bearer: over))
        // `alg: none` with no signature, and HS256 keyed with the public key (the classic
        // confusion attack): refused for their algorithm before any key is used.
        let claims = #"{"iss":"\#(accountA.email)","aud":"https://fcm.googleapis.com/","exp":\#(Int64(Date().timeIntervalSince1970) + 600)}"#
        let unsigned = base64URLEncode(Array(#"{"alg":"none","kid":"\#(accountA.keyID)"}"#.utf8)) + "." + base64URLEncode(Array(claims.utf8)) + "."
        assertUnauthenticated(try v1Send(send, bearer: unsigned))
        let hs = base64URLEncode(Array(#"{"alg":"HS256","kid":"\#(accountA.keyID)"}"#.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        let mac = try hmacSHA256(key: Array(accountA.key.publicKeyPEM.utf8), message: Array(hs.utf8))
        assertUnauthenticated(try v1Send(send, bearer: hs + "." + base64URLEncode(mac)))
        // Expiry on the mock's clock, even for one already verified; a deleted key ends it.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        assertUnauthenticated(try v1Send(send, bearer: jwt))
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).status, 200)
        XCTAssertEqual(try client.delete("/api/v1/projects/demo-a/service-accounts/\(accountA.keyID)").status, 204)
        assertUnauthenticated(try v1Send(send, bearer: jwt))
    }

    /// The legacy send path takes any Bearer token (fcm-legacy.md: "Bearer <anything>"), a valid
    /// credential for its own project and any other for the first; the Instance ID API takes only
    /// valid ones.
    func testLegacyAndInstanceIDBearers() throws {
        func legacy(_ bearer: String, _ body: String = #"{"to":"a1"}"#) throws -> WireResponse {
            try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer \(bearer)"), ("access_token_auth", "true"),
                                                              ("Content-Type", "application/json")], body: Array(body.utf8))
        }
        XCTAssertNil(singleError(try legacy("garbage")), "made up: the first project's")
        XCTAssertEqual(singleError(try legacy("garbage", #"{"to":"b1"}"#)), "MismatchSenderId")
        XCTAssertNil(singleError(try legacy(tokenA)))
        XCTAssertNil(singleError(try legacy(try selfSignedJWT(accountA))))
        // A token maps to its own project: demo-b's reaches b1 and not a1.
        let tokenB = try accessToken(try serviceAccount("demo-b"))
        XCTAssertEqual(singleError(try legacy(tokenB)), "MismatchSenderId")
        XCTAssertNil(singleError(try legacy(tokenB, #"{"to":"b1"}"#)))
        func iid(_ bearer: String) throws -> WireResponse {
            try client.request("POST", "/iid/v1:batchAdd", headers: [("Authorization", "Bearer \(bearer)"), ("access_token_auth", "true"),
                                                                     ("Content-Type", "application/json")],
                               body: Array(#"{"to":"/topics/news","registration_tokens":["a1"]}"#.utf8))
        }
        XCTAssertEqual(try iid("garbage").status, 401)
        XCTAssertEqual(try iid(tokenA).text, #"{"results":[{}]}"#)
        XCTAssertEqual(try iid(tokenB).text, #"{"results":[{"error":"NOT_FOUND"}]}"#, "a1 is not demo-b's")
    }
}

/// `--accept-any-key`: any non-empty Bearer token is the path's project's over v1, the first
/// project's on the legacy and Instance ID paths.
final class V1AcceptAnyKeyTests: V1TestCase {
    override var serverArguments: [String] { ["--accept-any-key"] }

    func testAnyBearerIsAccepted() throws {
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#, bearer: "anything").status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"b1"}}"#, project: "demo-b", bearer: "anything").status, 200)
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#, bearer: .none), 401, V1Body.unauthenticated)
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#, project: "nope", bearer: "anything"), 404, V1Body.notFound)
        let legacy = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer anything"), ("access_token_auth", "true"),
                                                                       ("Content-Type", "application/json")], body: Array(#"{"to":"a1"}"#.utf8))
        XCTAssertNil(singleError(legacy))
    }
}
