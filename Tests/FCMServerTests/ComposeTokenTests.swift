import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// `POST /api/v1/projects/{project}/access-tokens` (docs/control-api.md): an access token of a
/// project minted through the control API, as the token endpoint would issue one to its first
/// service account, so the web page can send with HTTP v1.
final class ComposeTokenTests: V1TestCase {
    /// The answer's shape, and the token works on a v1 send of its project (not another's).
    func testMintedTokenSends() throws {
        let r = try client.post("/api/v1/projects/demo-a/access-tokens")
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        let o = try XCTUnwrap(r.object)
        XCTAssertEqual(o.keys, ["access_token", "expires_in", "token_type", "id", "client_email", "project_id"])
        let token = try XCTUnwrap(o["access_token"]?.stringValue)
        XCTAssertTrue(token.hasPrefix("ya29."), token)
        XCTAssertEqual(o["expires_in"]?.numberValue?.int64, 3599)
        XCTAssertEqual(o["token_type"]?.stringValue, "Bearer")
        XCTAssertEqual(o["project_id"]?.stringValue, "demo-a")
        // demo-a already has an account (setUp made one): the token is that account's.
        XCTAssertEqual(o["client_email"]?.stringValue, accountA.email)
        let id = try XCTUnwrap(o["id"]?.stringValue)
        XCTAssertEqual(id.count, 12)

        let sent = try v1Send(#"{"message":{"token":"a1","data":{"k":"v"}}}"#, bearer: token)
        let messageID = messageID(sent)
        XCTAssertEqual(try client.get("/api/v1/messages/\(pathEncode(messageID))").object?["transport"]?.stringValue, "http_v1")
        assertV1(try v1Send(#"{"message":{"token":"b1"}}"#, project: "demo-b", bearer: token), 403, V1Body.permissionDenied("demo-b"))

        // Listed with the others, and revoked like them.
        let listed = items(try client.get("/api/v1/access-tokens")).first { $0["id"]?.stringValue == id }
        XCTAssertEqual(listed?["token_prefix"]?.stringValue, String(token.prefix(12)))
        XCTAssertEqual(listed?["project_id"]?.stringValue, "demo-a")
        XCTAssertEqual(listed?["scope"]?.stringValue, "https://www.googleapis.com/auth/firebase.messaging")
        XCTAssertEqual(try client.delete("/api/v1/access-tokens/\(id)").status, 204)
        assertV1(try v1Send(#"{"message":{"token":"a1"}}"#, bearer: token), 401, V1Body.unauthenticated)
    }

    /// A project without a service account gets one (listed from then on), by id or sender id.
    func testProjectWithoutAccountGetsOne() throws {
        XCTAssertEqual(items(try client.get("/api/v1/projects/demo-b/service-accounts")).count, 0)
        let r = try client.post("/api/v1/projects/222/access-tokens")
        XCTAssertEqual(r.status, 201, r.text)
        let accounts = items(try client.get("/api/v1/projects/demo-b/service-accounts"))
        XCTAssertEqual(accounts.count, 1)
        XCTAssertEqual(r.object?["client_email"]?.stringValue, accounts[0]["client_email"]?.stringValue)
        XCTAssertEqual(r.object?["project_id"]?.stringValue, "demo-b")
        let token = try XCTUnwrap(r.object?["access_token"]?.stringValue)
        XCTAssertEqual(messageID(try v1Send(#"{"message":{"token":"b1"}}"#, project: "demo-b", bearer: token), project: "demo-b").isEmpty, false)
        // A second token reuses that account.
        let again = try client.post("/api/v1/projects/demo-b/access-tokens")
        XCTAssertEqual(again.object?["client_email"]?.stringValue, accounts[0]["client_email"]?.stringValue)
        XCTAssertEqual(items(try client.get("/api/v1/projects/demo-b/service-accounts")).count, 1)
    }

    func testUnknownProjectIs404() throws {
        let r = try client.post("/api/v1/projects/nope/access-tokens")
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(r.text, #"{"error":{"code":"not_found","message":"project 'nope' does not exist"}}"#)
        XCTAssertEqual(try client.get("/api/v1/projects/demo-a/access-tokens").status, 404, "POST only")
    }
}

/// With `--control-token`, minting a token needs it like every control call.
final class ComposeTokenAuthTests: V1TestCase {
    override var serverArguments: [String] { ["--control-token", "s3cret"] }

    override func setUpWithError() throws {
        server = try TestServer(fixtures: [v1Fixture], extraArguments: serverArguments)
        client = server.client()
    }

    func testControlTokenRequired() throws {
        let refused = try client.post("/api/v1/projects/demo-a/access-tokens")
        XCTAssertEqual(refused.status, 401, refused.text)
        XCTAssertNil(refused.object?["access_token"])
        let wrong = try client.request("POST", "/api/v1/projects/demo-a/access-tokens", headers: [("Authorization", "Bearer nope")], body: [])
        XCTAssertEqual(wrong.status, 401)
        let r = try client.request("POST", "/api/v1/projects/demo-a/access-tokens", headers: [("Authorization", "Bearer s3cret")], body: [])
        XCTAssertEqual(r.status, 201, r.text)
        let token = try XCTUnwrap(r.object?["access_token"]?.stringValue)
        XCTAssertFalse(messageID(try v1Send(#"{"message":{"topic":"news"}}"#, bearer: token)).isEmpty)
    }
}
