import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import TLS
import XCTest

/// OAuth 2.0 service accounts of projects (docs/spec/control-api.md, "Additions for HTTP v1"):
/// made by the mock with a fresh RSA key, shown in full once, listed without private keys,
/// revoked, kept across resets and restarts, and declared by fixtures.
final class ServiceAccountTests: XCTestCase {
    func testMadeListedRevoked() throws {
        let dir = try temporaryDirectory("sa")
        let s = try TestServer(fixtures: [#"{"projects":[{"sender_id":"4242","project_id":"shop","server_keys":["k"]}]}"#], db: dir + "/s.sqlite")
        let c = s.client()
        let made = try c.post("/api/v1/projects/shop/service-accounts")
        XCTAssertEqual(made.status, 201, made.text)
        let sa = try XCTUnwrap(made.object)
        XCTAssertEqual(sa.keys, ["type", "project_id", "private_key_id", "private_key", "client_email", "client_id", "auth_uri", "token_uri",
                                 "auth_provider_x509_cert_url", "client_x509_cert_url", "universe_domain"])
        XCTAssertEqual(sa["type"]?.stringValue, "service_account")
        XCTAssertEqual(sa["project_id"]?.stringValue, "shop")
        XCTAssertEqual(sa["token_uri"]?.stringValue, "http://127.0.0.1:\(s.port)/token", "the address the caller used")
        let keyID = try XCTUnwrap(sa["private_key_id"]?.stringValue)
        XCTAssertEqual(keyID.count, 40)
        XCTAssertTrue(keyID.allSatisfy(\.isHexDigit))
        let email = try XCTUnwrap(sa["client_email"]?.stringValue)
        XCTAssertTrue(email.hasPrefix("firebase-adminsdk-") && email.hasSuffix("@shop.iam.gserviceaccount.com"), email)
        XCTAssertEqual(sa["client_id"]?.stringValue?.count, 21)
        // The private key shown is the one whose public half the mock keeps.
        let key = try RSAPrivateKey(pem: try XCTUnwrap(sa["private_key"]?.stringValue))
        let listed = items(try c.get("/api/v1/projects/4242/service-accounts"))
        XCTAssertEqual(listed.count, 1)
        XCTAssertEqual(listed[0].keys, ["client_email", "private_key_id", "client_id", "public_key", "created_at"], "never the private key")
        XCTAssertEqual(listed[0]["public_key"]?.stringValue, key.publicKeyPEM)
        XCTAssertEqual(try c.get("/api/v1/projects/shop").object?["service_accounts"]?.arrayValue?.count, 1)
        XCTAssertEqual(try c.post("/api/v1/projects/nope/service-accounts").status, 404)

        // Projects (and so their accounts) survive a reset and a restart.
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(items(try c.get("/api/v1/projects/shop/service-accounts")).count, 1)
        c.disconnect()
        s.stop()
        let again = try TestServer(fixtures: [#"{"projects":[{"sender_id":"4242","project_id":"shop","server_keys":["k"]}]}"#], db: dir + "/s.sqlite")
        defer { again.stop() }
        let c2 = again.client()
        XCTAssertEqual(items(try c2.get("/api/v1/projects/shop/service-accounts")).first?["public_key"]?.stringValue, key.publicKeyPEM)
        XCTAssertEqual(try c2.delete("/api/v1/projects/shop/service-accounts/\(keyID)").status, 204)
        XCTAssertEqual(try c2.delete("/api/v1/projects/shop/service-accounts/\(keyID)").status, 404)
        XCTAssertEqual(items(try c2.get("/api/v1/projects/shop/service-accounts")).count, 0)
    }

    /// A fixture may ship a whole service-account JSON (private key included, so a test can keep
    /// one fixed file) or only the public half.
    func testFixturesDeclareAccounts() throws {
        let key = try RSAPrivateKey()
        let other = try RSAPrivateKey()
        func quoted(_ s: String) -> String { JSONValue.string(s).serialized() }
        let fixture = """
            {"projects":[{"sender_id":"5151","project_id":"fx","service_accounts":[
              {"type":"service_account","project_id":"fx","private_key_id":"k-full","private_key":\(quoted(key.pem)),
               "client_email":"a@fx.iam.gserviceaccount.com","client_id":"1","token_uri":"http://x/token"},
              {"private_key_id":"k-pub","client_email":"b@fx.iam.gserviceaccount.com","public_key":\(quoted(other.publicKeyPEM))}]}]}
            """
        let s = try TestServer(fixtures: [fixture])
        defer { s.stop() }
        let listed = items(try s.client().get("/api/v1/projects/fx/service-accounts"))
        XCTAssertEqual(listed.compactMap { $0["private_key_id"]?.stringValue }, ["k-full", "k-pub"])
        XCTAssertEqual(listed.map { $0["public_key"]?.stringValue }, [key.publicKeyPEM, other.publicKeyPEM])
    }

    func testABadKeyInAFixtureStopsStartUp() throws {
        let dir = try temporaryDirectory("sa-bad")
        try #"{"projects":[{"sender_id":"1","service_accounts":[{"private_key_id":"x","client_email":"e","public_key":"nope"}]}]}"#
            .write(toFile: dir + "/f.json", atomically: true, encoding: .utf8)
        let r = try runBinary(["serve", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0", "--fixtures", dir + "/f.json"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("$.projects[0]") && r.stderr.contains("public_key is not an RSA public key"), r.stderr)
    }
}
