import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import TLS
import XCTest

/// Why a v1 request was refused: the answer stays Google's one text, the rejected record's
/// `error_detail` says which check failed (control-api.md, contract v1.2).
final class V1RefusalReasonTests: V1TestCase {
    let send = #"{"message":{"token":"a1"}}"#

    /// The newest rejected record's `error_detail`.
    func lastDetail(file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try client.get("/api/v1/messages?status=rejected&limit=1")
        return try XCTUnwrap(items(r).first?["error_detail"]?.stringValue, r.text, file: file, line: line)
    }

    /// Sends `send` with these headers, checks Google's 401 byte for byte, returns the detail.
    func refused(_ headers: [(String, String)], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try client.request("POST", "/v1/projects/demo-a/messages:send",
                                   headers: [("Content-Type", "application/json")] + headers, body: Array(send.utf8))
        assertV1(r, 401, V1Body.unauthenticated, file: file, line: line)
        return try lastDetail(file: file, line: line)
    }

    func testEachMissingOrWrongCredentialSaysWhy() throws {
        XCTAssertEqual(try refused([]), "no Authorization header")
        XCTAssertEqual(try refused([("Authorization", "key=key-111")]),
                       "a legacy server key (key=…): HTTP v1 takes an OAuth 2.0 access token or a self-signed JWT (Authorization: Bearer …)")
        XCTAssertEqual(try refused([("Authorization", "Basic dXNlcjpwYXNz")]), "the Authorization header is not 'Bearer TOKEN'")
        XCTAssertEqual(try refused([("Authorization", "Bearer ya29.made-up")]),
                       "the Bearer token is neither an access token this server issued (since its start or last reset) nor a JWT "
                       + "(a JWT has three parts separated by dots)")
    }

    func testExpiredRevokedAndDeletedTokensSayWhich() throws {
        let id = try XCTUnwrap(items(try client.get("/api/v1/access-tokens")).first?["id"]?.stringValue)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3600}"#).status, 200)
        let expired = try refused([("Authorization", "Bearer \(tokenA)")])
        XCTAssertTrue(expired.hasPrefix("access token \(id) expired at "), expired)
        XCTAssertTrue(expired.contains(" on the mock's clock (now "), expired)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).status, 200)

        XCTAssertEqual(try client.delete("/api/v1/access-tokens/\(id)").status, 204)
        XCTAssertEqual(try refused([("Authorization", "Bearer \(tokenA)")]),
                       "access token \(id) was revoked (DELETE /api/v1/access-tokens/\(id))")

        let fresh = try accessToken(accountA)
        XCTAssertEqual(try client.delete("/api/v1/projects/demo-a/service-accounts/\(accountA.keyID)").status, 204)
        let deleted = try refused([("Authorization", "Bearer \(fresh)")])
        XCTAssertTrue(deleted.hasSuffix(": its service account key \(accountA.keyID) (\(accountA.email)) was deleted"), deleted)
    }

    func testSelfSignedJWTsSayWhichClaimFailed() throws {
        let badAud = try selfSignedJWT(accountA, aud: "https://example.com/")
        XCTAssertEqual(try refused([("Authorization", "Bearer \(badAud)")]),
                       "self-signed JWT: aud 'https://example.com/' is not https://fcm.googleapis.com/")
        let stale = try selfSignedJWT(accountA, lifetime: -10)
        XCTAssertTrue(try refused([("Authorization", "Bearer \(stale)")]).hasPrefix("self-signed JWT expired at "))
        let other = try RSAPrivateKey()
        let forged = try selfSignedJWT(accountA, signer: other)
        XCTAssertEqual(try refused([("Authorization", "Bearer \(forged)")]),
                       "self-signed JWT: the signature does not verify with key \(accountA.keyID) (\(accountA.email))")
        let none = try selfSignedJWT(accountA, header: #"{"alg":"none","kid":"\#(accountA.keyID)"}"#)
        XCTAssertTrue(try refused([("Authorization", "Bearer \(none)")]).hasSuffix("(alg none, not RS256)"))
    }

    /// Times at the 64-bit limits in a self-signed JWT and in a token request's assertion are
    /// refused for what they are (they once stopped the server on an overflow).
    func testTimesAtTheLimitsAreRefusedNotFatal() throws {
        let claims = #"{"iss":"\#(accountA.email)","sub":"\#(accountA.email)","aud":"https://fcm.googleapis.com/","#
        let ancient = try jwt(accountA, claims: claims + #""iat":-9223372036854775808,"exp":-9223372036854775808}"#)
        XCTAssertTrue(try refused([("Authorization", "Bearer \(ancient)")]).hasPrefix("self-signed JWT expired at -"))
        let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="
        let scope = #"{"iss":"\#(accountA.email)","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"https://oauth2.googleapis.com/token","#
        for times in [#""iat":-9223372036854775808,"exp":9223372036854775807}"#, #""iat":-9223372036854775808,"exp":-9223372036854775807}"#] {
            let assertion = try jwt(accountA, claims: scope + times)
            let r = try client.request("POST", "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                       body: Array((grant + assertion).utf8))
            XCTAssertEqual(r.status, 400, r.text)
            XCTAssertEqual(r.object?["error"]?.stringValue, "invalid_grant", r.text)
        }
        _ = messageID(try v1Send(send))
    }

    /// 403 and 404 keep Google's texts too; the record names both projects, or the missing one.
    func testAnotherProjectsCredentialNamesBothProjects() throws {
        let tokenB = try accessToken(try serviceAccount("demo-b"))
        assertV1(try v1Send(send, bearer: tokenB), 403, V1Body.permissionDenied("demo-a"))
        XCTAssertEqual(try lastDetail(), "the credential is for project demo-b (sender id 222); the path names demo-a (sender id 111)")
        assertV1(try v1Send(send, project: "nope", bearer: tokenB), 404, V1Body.notFound)
        let records = items(try client.get("/api/v1/messages?status=rejected&limit=1"))
        XCTAssertEqual(records.first?["error_detail"]?.stringValue, "no project 'nope' (by project id or sender id)")
    }
}
