import FCMCore
import TLS
import XCTest

/// RS256 with GnuTLS: keys made, exported and imported; signatures that verify and those that
/// must not; a JWT signed as a service account signs its assertion.
final class RSAKeyTests: XCTestCase {
    func testSignAndVerifyRS256() throws {
        let key = try RSAPrivateKey()
        XCTAssertTrue(key.pem.hasPrefix("-----BEGIN PRIVATE KEY-----"), key.pem)
        XCTAssertTrue(key.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"), key.publicKeyPEM)
        let data = Array("header.claims".utf8)
        let signature = try key.signRS256(data)
        XCTAssertEqual(signature.count, 256, "RSA 2048")
        let pub = try RSAPublicKey(pem: key.publicKeyPEM)
        XCTAssertTrue(pub.verifiesRS256(data, signature: signature))
        XCTAssertFalse(pub.verifiesRS256(Array("header.claimz".utf8), signature: signature), "other data")
        var flipped = signature
        flipped[17] ^= 1
        XCTAssertFalse(pub.verifiesRS256(data, signature: flipped), "a changed signature")
        XCTAssertFalse(pub.verifiesRS256(data, signature: []), "no signature")
        let other = try RSAPublicKey(pem: try RSAPrivateKey().publicKeyPEM)
        XCTAssertFalse(other.verifiesRS256(data, signature: signature), "another key")
        // The PEM read back is the same key.
        let again = try RSAPrivateKey(pem: key.pem)
        XCTAssertEqual(again.publicKeyPEM, key.publicKeyPEM)
        XCTAssertTrue(pub.verifiesRS256(data, signature: try again.signRS256(data)))
    }

    func testNotKeys() {
        XCTAssertThrowsError(try RSAPublicKey(pem: "not a key"))
        XCTAssertThrowsError(try RSAPrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
    }

    /// A whole assertion: signed as a service account would, taken apart and verified. An HMAC
    /// "signed" with the public key as its secret is refused before any key is used.
    func testAJWTSignedWithTheKeyVerifies() throws {
        let key = try RSAPrivateKey()
        let pub = try RSAPublicKey(pem: key.publicKeyPEM)
        let header = base64URLEncode(Array(#"{"alg":"RS256","typ":"JWT","kid":"abc"}"#.utf8))
        let claims = base64URLEncode(Array(#"{"iss":"sa@p.iam.gserviceaccount.com","iat":1700000000}"#.utf8))
        let input = header + "." + claims
        let token = input + "." + base64URLEncode(try key.signRS256(Array(input.utf8)))
        let jwt = try JWT.parse(token)
        XCTAssertEqual(jwt.keyID, "abc")
        XCTAssertTrue(pub.verifiesRS256(jwt.signingInput, signature: jwt.signature))
        let forged = try JWT.parse(input + "." + base64URLEncode(try RSAPrivateKey().signRS256(Array(input.utf8))))
        XCTAssertFalse(pub.verifiesRS256(forged.signingInput, signature: forged.signature))
        let hs = base64URLEncode(Array(#"{"alg":"HS256","kid":"abc"}"#.utf8)) + "." + claims + ".c2ln"
        XCTAssertThrowsError(try JWT.parse(hs)) { XCTAssertEqual($0 as? JWT.Failure, .unsupportedAlgorithm("HS256")) }
    }
}
