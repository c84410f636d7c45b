@testable import APNs
import FCMCore
@testable import FCMServer
import FCMEngine
import FCMModel
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// Keys the sender brings: APNs teams and public keys declared in a fixture file
/// (`apns.teams`), and public keys imported through `POST /api/v1/apns/keys`, through the real
/// server: tokens signed with them pass, others do not, a reset and a restart keep them, and a
/// bad declaration is refused with its JSON path.
extension APNsTests {
    static let fixtureTeam = "FIXTEAM001"
    static let fixtureKeyID = "FIXKEY0001"

    /// The built-in demo fixture with an `apns` member declaring `teams`.
    static func fixture(apns teams: String) -> String {
        let demo = defaultFixtureJSON.trimmingCharacters(in: .whitespacesAndNewlines)
        return "{\"apns\":{\"teams\":\(teams)}," + demo.dropFirst()
    }

    /// A team of the demo iOS app with one key (`publicKeyPEM`), as a fixture declares it.
    static func team(_ publicKeyPEM: String, keyID: String = fixtureKeyID) -> String {
        let pem = JSONValue.string(publicKeyPEM).serialized()
        return #"[{"team_id":"\#(fixtureTeam)","bundle_ids":["\#(DemoProject.iosApp)"],"keys":[{"key_id":"\#(keyID)","public_key_pem":\#(pem)}]}]"#
    }

    /// A provider token of the fixture's key, signed by `signer`.
    func fixtureToken(_ signer: P256PrivateKey) throws -> String?? {
        .some("bearer " + (try token(kid: Self.fixtureKeyID, iss: Self.fixtureTeam, signer: signer)))
    }

    func testAFixturesKeysSignTokensAndAResetAndARestartKeepThem() throws {
        let db = NSTemporaryDirectory() + "apns-fixture-keys-\(UUID().uuidString).sqlite"
        defer { for s in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + s) } }
        let own = try P256PrivateKey()
        let document = Self.fixture(apns: Self.team(own.publicKey.pem))
        server.stop()
        server = try TestServer(fixtures: [document], db: db, unknownTokens: "reject")
        let path = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        let c = server.client()
        let keys = items(try c.get("/api/v1/apns/keys"))
        XCTAssertEqual(keys.map { $0["key_id"]?.stringValue }, [Self.fixtureKeyID])
        XCTAssertEqual(keys.first?["team_id"]?.stringValue, Self.fixtureTeam)
        XCTAssertEqual(try c.get("/api/v1/apns/teams").object?["items"]?.arrayValue?.first?.objectValue?["bundle_ids"],
                       .array([.string(DemoProject.iosApp)]))
        XCTAssertEqual(try send(path: path, authorization: try fixtureToken(own)).status, 200)
        let record = try XCTUnwrap(items(try c.get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(record["apns"]?.objectValue?["key_id"]?.stringValue, Self.fixtureKeyID)
        // Signed with another key under the fixture key's id: refused.
        assertReason(try send(path: path, authorization: try fixtureToken(try P256PrivateKey())), 403, "InvalidProviderToken")

        // Revoked, then a reset: the fixture's key is back, and its tokens pass again.
        XCTAssertEqual(try c.delete("/api/v1/apns/keys/\(Self.fixtureKeyID)").status, 204)
        assertReason(try send(path: path, authorization: try fixtureToken(own)), 403, "InvalidProviderToken")
        XCTAssertEqual(try c.post("/api/v1/reset", "").status, 204)
        XCTAssertEqual(try send(path: path, authorization: try fixtureToken(own)).status, 200)
        XCTAssertEqual(try c.post("/api/v1/reset?fixtures=false", "").status, 204)
        XCTAssertEqual(items(try c.get("/api/v1/apns/keys")).count, 1, "a reset keeps keys")

        // A restart on the same store, with the file and without it: the key is kept.
        server.stop()
        server = try TestServer(fixtures: [document], db: db, unknownTokens: "reject")
        XCTAssertEqual(items(try server.client().get("/api/v1/apns/keys")).count, 1, "loaded again, not twice")
        XCTAssertEqual(try send(path: "/3/device/\(try apnsToken(of: "demo-ios-1"))", authorization: try fixtureToken(own)).status, 200)
        server.stop()
        server = try TestServer(db: db, unknownTokens: "reject")
        XCTAssertEqual(try send(path: "/3/device/\(try apnsToken(of: "demo-ios-1"))", authorization: try fixtureToken(own)).status, 200)
    }

    func testAFixtureDeclaringAKeyAgainReplacesTheStoredOneAndItsTokens() throws {
        let db = NSTemporaryDirectory() + "apns-fixture-keys-\(UUID().uuidString).sqlite"
        defer { for s in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + s) } }
        let (first, second) = (try P256PrivateKey(), try P256PrivateKey())
        server.stop()
        server = try TestServer(fixtures: [Self.fixture(apns: Self.team(first.publicKey.pem))], db: db, unknownTokens: "reject")
        let path = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        XCTAssertEqual(try send(path: path, authorization: try fixtureToken(first)).status, 200)
        server.stop()
        server = try TestServer(fixtures: [Self.fixture(apns: Self.team(second.publicKey.pem))], db: db, unknownTokens: "reject")
        XCTAssertEqual(try send(path: path, authorization: try fixtureToken(second)).status, 200)
        assertReason(try send(path: path, authorization: try fixtureToken(first)), 403, "InvalidProviderToken")
    }

    /// A key imported again under its id with another public key: a token the mock remembered
    /// from the old key is refused as a token it never saw is, with the same detail on its record.
    func testARememberedTokenOfAReplacedKeyIsRefusedAsAFreshOneIs() throws {
        let (old, new) = (try P256PrivateKey(), try P256PrivateKey())
        let c = server.client()
        func importKey(_ k: P256PrivateKey) throws -> Int {
            let pem = JSONValue.string(k.publicKey.pem).serialized()
            return try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","bundle_ids":["\#(topic)"],"key_id":"IMPKEY0001","public_key_pem":\#(pem)}"#).status
        }
        XCTAssertEqual(try importKey(old), 201)
        let path = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        let now = Int64(Date().timeIntervalSince1970)
        let remembered: String?? = .some("bearer " + (try token(kid: "IMPKEY0001", iss: "IMPTEAM001", iat: now, signer: old)))
        XCTAssertEqual(try send(path: path, authorization: remembered).status, 200)
        XCTAssertEqual(try c.delete("/api/v1/apns/keys/IMPKEY0001").status, 204)
        XCTAssertEqual(try importKey(new), 201)
        func lastDetail() throws -> String? {
            items(try c.get("/api/v1/messages?transport=apns&limit=1")).first?["error_detail"]?.stringValue
        }
        assertReason(try send(path: path, authorization: remembered), 403, "InvalidProviderToken")
        let cached = try lastDetail()
        let fresh: String?? = .some("bearer " + (try token(kid: "IMPKEY0001", iss: "IMPTEAM001", iat: now - 1, signer: old)))
        assertReason(try send(path: path, authorization: fresh), 403, "InvalidProviderToken")
        XCTAssertEqual(cached, "the signature does not verify with key IMPKEY0001")
        XCTAssertEqual(try lastDetail(), cached, "the same refusal, remembered or not")
    }

    func testBadFixtureEntriesAreRefusedWithTheirPath() throws {
        let pem = try P256PrivateKey().publicKey.pem
        let quoted = JSONValue.string(pem).serialized()
        let rsa = JSONValue.string(try RSAPrivateKey().publicKeyPEM).serialized()
        let p8 = JSONValue.string(try P256PrivateKey().pem).serialized()
        let cases: [(String, String)] = [
            (#"{"apns":[]}"#, "$.apns: must be an object"),
            (#"{"apns":{"keys":[]}}"#, "$.apns.keys: unknown key; allowed: teams"),
            (#"{"apns":{"teams":{}}}"#, "$.apns.teams: must be an array"),
            (#"{"apns":{"teams":[{"bundle_ids":[]}]}}"#, "$.apns.teams[0].team_id: is required"),
            (#"{"apns":{"teams":[{"team_id":"short"}]}}"#, "$.apns.teams[0].team_id: team_id must be 10 uppercase letters or digits"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","bundle_ids":["a b"]}]}}"#, "$.apns.teams[0].bundle_ids[0]: a bundle id is"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","apps":[]}]}}"#, "$.apns.teams[0].apps: unknown key"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"key1","public_key_pem":\#(quoted)}]}]}}"#,
             "$.apns.teams[0].keys[0].key_id: key_id must be 10 uppercase letters or digits"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567"}]}]}}"#,
             "$.apns.teams[0].keys[0].public_key_pem: is required"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(quoted)},{"key_id":"KEY7654321","public_key_pem":"hello"}]}]}}"#,
             "$.apns.teams[0].keys[1].public_key_pem: not a P-256 public key PEM"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(rsa)}]}]}}"#,
             "$.apns.teams[0].keys[0].public_key_pem: not a P-256 public key PEM"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(p8)}]}]}}"#,
             "$.apns.teams[0].keys[0].public_key_pem: a private key; give its public half"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(quoted)}]},{"team_id":"TEAM654321","keys":[{"key_id":"KEY1234567","public_key_pem":\#(quoted)}]}]}}"#,
             "$.apns.teams[1].keys[0].key_id: key 'KEY1234567' is declared twice (also at $.apns.teams[0].keys[0])"),
            (#"{"apns":{"teams":[{"team_id":"TEAM123456"},{"team_id":"TEAM123456"}]}}"#,
             "$.apns.teams[1].team_id: team 'TEAM123456' is declared twice"),
        ]
        for (document, said) in cases {
            XCTAssertThrowsError(try Fixtures.parse(Array(document.utf8), name: "f.json", now: 0), document) { error in
                let text = (error as? ConfigurationError)?.description ?? "\(error)"
                XCTAssertTrue(text.hasPrefix("fixtures: f.json: " + said), "\(text)\nexpected: \(said)")
            }
        }
        let good = try Fixtures.parse(Array(#"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(quoted)}]}]}}"#.utf8),
                                      name: "f.json", now: 0)
        XCTAssertEqual(good.apnsTeams.first?.keys.first?.publicKeyPEM, pem)

        // The server refuses to start with one, and a key id declared by two files.
        XCTAssertThrowsError(try TestServer(fixtures: [cases[9].0])) { error in
            XCTAssertTrue("\(error)".contains("$.apns.teams[0].keys[1].public_key_pem: not a P-256 public key PEM"), "\(error)")
        }
        let one = #"{"apns":{"teams":[{"team_id":"TEAM123456","keys":[{"key_id":"KEY1234567","public_key_pem":\#(quoted)}]}]}}"#
        XCTAssertThrowsError(try TestServer(fixtures: [one, one])) { error in
            XCTAssertTrue("\(error)".contains("$.apns.teams[0].keys[0].key_id: key 'KEY1234567' is declared in"), "\(error)")
        }
    }

    func testAnImportedPublicKeySignsTokensAndNoPrivateKeyIsAnswered() throws {
        let own = try P256PrivateKey()
        let c = server.client()
        let pem = JSONValue.string(own.publicKey.pem).serialized()
        let made = try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","bundle_ids":["\#(topic)"],"key_id":"IMPKEY0001","public_key_pem":\#(pem)}"#)
        XCTAssertEqual(made.status, 201, made.text)
        let o = try XCTUnwrap(made.object)
        XCTAssertEqual(o["key_id"]?.stringValue, "IMPKEY0001")
        XCTAssertEqual(o["team_id"]?.stringValue, "IMPTEAM001")
        XCTAssertEqual(o["public_key_pem"]?.stringValue, own.publicKey.pem)
        XCTAssertNil(o["private_key_pem"], made.text)
        XCTAssertFalse(made.text.contains("PRIVATE"), made.text)
        let path = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        let signed: String?? = .some("bearer " + (try token(kid: "IMPKEY0001", iss: "IMPTEAM001", signer: own)))
        XCTAssertEqual(try send(path: path, authorization: signed).status, 200)
        let other: String?? = .some("bearer " + (try token(kid: "IMPKEY0001", iss: "IMPTEAM001", signer: try P256PrivateKey())))
        assertReason(try send(path: path, authorization: other), 403, "InvalidProviderToken")
        // Without a key id, one is made and answered.
        let unnamed = try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","public_key_pem":\#(JSONValue.string(try P256PrivateKey().publicKey.pem).serialized())}"#)
        XCTAssertEqual(unnamed.status, 201, unnamed.text)
        XCTAssertEqual(unnamed.object?["key_id"]?.stringValue?.utf8.count, 10)

        let again = try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","key_id":"IMPKEY0001","public_key_pem":\#(pem)}"#)
        XCTAssertEqual(again.status, 409, again.text)
        let madeAgain = try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","key_id":"IMPKEY0001"}"#)
        XCTAssertEqual(madeAgain.status, 409, madeAgain.text)
        for bad in [#""hello""#, JSONValue.string(try P256PrivateKey().pem).serialized(), JSONValue.string(try RSAPrivateKey().publicKeyPEM).serialized(), "42"] {
            let r = try c.post("/api/v1/apns/keys", #"{"team_id":"IMPTEAM001","key_id":"IMPKEY0002","public_key_pem":\#(bad)}"#)
            XCTAssertEqual(r.status, 400, "\(bad): \(r.text)")
            XCTAssertTrue(r.text.contains("public_key_pem"), r.text)
        }
        XCTAssertEqual(items(try c.get("/api/v1/apns/keys")).count, 3, "the demo key, the imported one, the unnamed one")
    }
}
