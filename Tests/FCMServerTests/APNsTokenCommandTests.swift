import FCMCore
import FCMTesting
import HTTPServer
import Foundation
import TLS
import XCTest

/// `fcm-mock apns-token`: the built binary signs a provider token with a `.p8`, and curl sends
/// with it to the server over h2c, as docs/apns.md's recipe does.
extension APNsTests {
    func testTheAPNsTokenCommandSignsATokenTheServerTakes() throws {
        let dir = NSTemporaryDirectory() + "apns-token-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let p8 = dir + "/AuthKey.p8"
        try key.pem.write(toFile: p8, atomically: true, encoding: .utf8)
        let made = try runBinary(["apns-token", "--key", p8, "--key-id", keyID, "--team", team])
        XCTAssertEqual(made.status, 0, made.stderr)
        let jwt = made.stdout.trimmingCharacters(in: .newlines)
        XCTAssertEqual(made.stdout, jwt + "\n", "one line")
        let parts = jwt.split(separator: ".").map { base64URLDecode(Array($0.utf8)) ?? [] }
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(String(decoding: parts[0], as: UTF8.self), #"{"alg":"ES256","kid":"\#(keyID)"}"#)
        let claims = try XCTUnwrap(JSONParser.parse(parts[1]).objectValue)
        XCTAssertEqual(claims["iss"]?.stringValue, team)
        let iat = try XCTUnwrap(claims["iat"]?.numberValue?.int64)
        XCTAssertLessThanOrEqual(abs(iat - Int64(Date().timeIntervalSince1970)), 5)
        XCTAssertEqual(parts[2].count, 64, "r and s")

        let path = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        XCTAssertEqual(try send(path: path, authorization: .some("bearer " + jwt)).status, 200)

        // --iat: an hour and a bit ahead, for a clock moved as far; past it, the token is old.
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":3700}"#).status, 200)
        assertReason(try send(path: path, authorization: .some("bearer " + jwt)), 403, "ExpiredProviderToken")
        let later = try runBinary(["apns-token", "--key", p8, "--key-id", keyID, "--team", team, "--iat", "+3700"])
        XCTAssertEqual(later.status, 0, later.stderr)
        XCTAssertEqual(try send(path: path, authorization: .some("bearer " + later.stdout.trimmingCharacters(in: .newlines))).status, 200)
        let fixed = try runBinary(["apns-token", "--key", p8, "--key-id", keyID, "--team", team, "--iat", "1700000000"])
        XCTAssertTrue(fixed.stdout.hasPrefix(base64URLEncode(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
            + base64URLEncode(Array(#"{"iss":"\#(team)","iat":1700000000}"#.utf8)) + "."), fixed.stdout)

        // Usage errors: 2; a key file that cannot be read or is not a P-256 private key: 1.
        let rsa = dir + "/garbage.pem"
        try "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".write(toFile: rsa, atomically: true, encoding: .utf8)
        let public8 = dir + "/public.pem"
        try key.publicKey.pem.write(toFile: public8, atomically: true, encoding: .utf8)
        for (args, status, said) in [
            (["--key-id", keyID, "--team", team], Int32(2), "apns-token needs --key FILE"),
            (["--key", p8, "--team", team], 2, "apns-token needs --key-id KEY_ID"),
            (["--key", p8, "--key-id", keyID], 2, "apns-token needs --team TEAM_ID"),
            (["--key", p8, "--key-id", "short", "--team", team], 2, "--key-id must be 10 uppercase letters or digits"),
            (["--key", p8, "--key-id", keyID, "--team", team, "--iat", "soon"], 2, "--iat takes whole UNIX seconds"),
            (["--key", p8, "--key-id", keyID, "--team", team, "--server", "http://x"], 2, "unknown option '--server'"),
            (["--key", p8, "--key-id", keyID, "--team"], 2, "--team needs a value"),
            (["--key", dir + "/missing.p8", "--key-id", keyID, "--team", team], 1, "cannot read the key file"),
            (["--key", rsa, "--key-id", keyID, "--team", team], 1, "is not a P-256 private key PEM"),
            (["--key", public8, "--key-id", keyID, "--team", team], 1, "is not a P-256 private key PEM"),
        ] {
            let r = try runBinary(["apns-token"] + args)
            XCTAssertEqual(r.status, status, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(said), "\(args): \(r.stderr)")
            XCTAssertEqual(r.stdout, "", "\(args)")
        }
        let help = try runBinary(["apns-token", "--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.hasPrefix("usage: fcm-mock apns-token --key FILE --key-id KEY_ID --team TEAM_ID [--iat SECONDS]"), help.stdout)
        XCTAssertTrue(try runBinary(["--help"]).stdout.contains("  apns-token prints an APNs provider token"))
    }
}
