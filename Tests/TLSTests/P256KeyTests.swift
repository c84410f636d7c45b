import FCMCore
import XCTest

@testable import TLS

/// P-256 keys: generation, PKCS #8 and raw forms, ES256 both ways (with a token signed by an
/// outside tool), ECDH, and every malformed key refused.
final class P256KeyTests: XCTestCase {
    // Fixtures made outside this project, once, on 2026-12-03:
    //   openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.p8   (OpenSSL 3)
    //   openssl pkey -in key.p8 -pubout
    // then Python's `cryptography` 48 signed the two tokens with that key
    // (key.sign(header.claims, ec.ECDSA(hashes.SHA256())), the DER signature turned into r||s
    // with decode_dss_signature) and wrote the public point (X962, UncompressedPoint). A
    // throwaway key, in no use anywhere.
    static let outsideKeyP8 = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYugZnNqTJkx4r4JB
        J9olX6stFichmFK7OvkxAn+R8u+hRANCAAQpuSmo5xnVEDl05M7effdrz6nejSEV
        YJWbtROi0VCZ6yOIt3+WjKNDOvvze6A1r9+P8JtZDbfT53V7aX534QvN
        -----END PRIVATE KEY-----

        """
    static let outsidePublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKbkpqOcZ1RA5dOTO3n33a8+p3o0h
        FWCVm7UTotFQmesjiLd/loyjQzr783ugNa/fj/CbWQ230+d1e2l+d+ELzQ==
        -----END PUBLIC KEY-----

        """
    static let outsidePoint = "BCm5KajnGdUQOXTkzt5992vPqd6NIRVglZu1E6LRUJnrI4i3f5aMo0M6-_N7oDWv34_wm1kNt9PndXtpfnfhC80"
    /// An APNs provider token: `{"alg":"ES256","kid":"ABC123DEFG"}`, `{"iss":"DEF123GHIJ","iat":1700000000}`.
    static let apnsToken = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ.eyJpc3MiOiJERUYxMjNHSElKIiwiaWF0IjoxNzAwMDAwMDAwfQ."
        + "EHJ4FPd7x6Q8uY3wCED6xIqY08toKETPRAgf8WqIZko8kVVG4R1sCexaFR1GawLEWYD-X28ABk72hlBLm77bNw"
    /// A VAPID token (no `kid`): `{"typ":"JWT","alg":"ES256"}`,
    /// `{"aud":"https://fcm.googleapis.com","exp":1700086400,"sub":"mailto:ops@example.com"}`.
    static let vapidToken = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9."
        + "eyJhdWQiOiJodHRwczovL2ZjbS5nb29nbGVhcGlzLmNvbSIsImV4cCI6MTcwMDA4NjQwMCwic3ViIjoibWFpbHRvOm9wc0BleGFtcGxlLmNvbSJ9."
        + "ylBgyWBkK9pyGIY9Zucw5b-1J-_4ni8kB2YaXj94BaRK5xrlrCIxtAP6lIGktPN5v9bVoxpI7cJc87mQhsojiQ"

    func testTokensSignedByAnOutsideToolVerify() throws {
        let key = try P256PublicKey(pem: Self.outsidePublicPEM)
        XCTAssertEqual(key.base64URL, Self.outsidePoint)
        XCTAssertEqual(try P256PublicKey(base64URL: Self.outsidePoint), key)

        let apns = try JWT.parse(Self.apnsToken, algorithm: .es256)
        XCTAssertEqual(apns.keyID, "ABC123DEFG")
        XCTAssertEqual(apns.claims["iss"]?.stringValue, "DEF123GHIJ")
        XCTAssertTrue(key.verifiesES256(apns.signingInput, signature: apns.signature))

        let vapid = try JWT.parse(Self.vapidToken, algorithm: .es256, requiringKeyID: false)
        XCTAssertEqual(vapid.keyID, "")
        XCTAssertEqual(vapid.claims["sub"]?.stringValue, "mailto:ops@example.com")
        XCTAssertTrue(key.verifiesES256(vapid.signingInput, signature: vapid.signature))

        // Another message, another key, a changed byte of the signature: all refused.
        XCTAssertFalse(key.verifiesES256(vapid.signingInput, signature: apns.signature))
        XCTAssertFalse(try P256PrivateKey().publicKey.verifiesES256(apns.signingInput, signature: apns.signature))
        for i in [0, 31, 32, 63] {
            var sig = apns.signature
            sig[i] ^= 0x01
            XCTAssertFalse(key.verifiesES256(apns.signingInput, signature: sig), "byte \(i)")
        }
        // r or s of zero, or at the group order and above, are no signature.
        let order: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                              0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51]
        let r = Array(apns.signature[0..<32]), s = Array(apns.signature[32...])
        for bad in [[UInt8](repeating: 0, count: 32) + s, r + [UInt8](repeating: 0, count: 32), order + s, r + order,
                    [UInt8](repeating: 0xFF, count: 64)] {
            XCTAssertFalse(key.verifiesES256(apns.signingInput, signature: bad))
        }
        for n in [0, 1, 63, 65, 72, 128] {
            XCTAssertFalse(key.verifiesES256(apns.signingInput, signature: [UInt8](repeating: 1, count: n)), "\(n) bytes")
        }
    }

    func testAnOutsideP8KeyImportsAndSigns() throws {
        let key = try P256PrivateKey(pem: Self.outsideKeyP8)
        XCTAssertEqual(key.publicKey.base64URL, Self.outsidePoint)
        XCTAssertEqual(key.pem, Self.outsideKeyP8, "written back byte for byte as OpenSSL (and Apple) write it")
        let data = Array("header.claims".utf8)
        let sig = try key.signES256(data)
        XCTAssertEqual(sig.count, 64)
        XCTAssertTrue(try P256PublicKey(pem: Self.outsidePublicPEM).verifiesES256(data, signature: sig))
        XCTAssertFalse(String(describing: key).contains(key.pem), "the description names the public key only")
    }

    /// A new key writes itself as Apple's `.p8` does (PKCS #8 PEM) and reads back the same; its
    /// raw forms round-trip too.
    func testGeneratedKeysRoundTripThroughEveryForm() throws {
        let key = try P256PrivateKey()
        XCTAssertTrue(key.pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), key.pem)
        XCTAssertTrue(key.pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        XCTAssertEqual(key.pem.utf8.count, 241, "always the same size: the private key is 32 bytes, never 31 or 33")
        let again = try P256PrivateKey(pem: key.pem)
        XCTAssertEqual(again.publicKey, key.publicKey)
        XCTAssertEqual(again.rawScalar, key.rawScalar)
        XCTAssertEqual(try P256PrivateKey(rawScalar: key.rawScalar).publicKey, key.publicKey)

        let point = key.publicKey.rawPoint
        XCTAssertEqual(point.count, 65)
        XCTAssertEqual(point[0], 0x04)
        XCTAssertEqual(key.publicKey.base64URL.count, 87)
        XCTAssertEqual(base64URLDecode(Array(key.publicKey.base64URL.utf8)), point, "FCMCore's decoder agrees")
        XCTAssertEqual(try P256PublicKey(base64URL: key.publicKey.base64URL + "="), key.publicKey, "padding is taken")
        XCTAssertEqual(try P256PublicKey(pem: key.publicKey.pem), key.publicKey)
        XCTAssertTrue(key.publicKey.pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
        XCTAssertNotEqual(try P256PrivateKey().publicKey, key.publicKey)
        // Half of all keys have the high bit set and 1 in 256 a leading zero byte: every one
        // writes the same layout and reads back.
        for _ in 0..<300 {
            let k = try P256PrivateKey()
            XCTAssertEqual(k.pem.utf8.count, 241)
            XCTAssertEqual(try P256PrivateKey(pem: k.pem).rawScalar, k.rawScalar)
        }
    }

    /// Many signatures, so r and s with leading zero bytes (1 in 128 each) come up and still
    /// verify.
    func testES256RoundTrips() throws {
        let key = try P256PrivateKey()
        var leadingZero = 0
        // At least 400, and on until one with a leading zero byte has come (1 in 64 do; 5,000
        // without one would mean the encoding drops them).
        var i = 0
        while i < 400 || (leadingZero == 0 && i < 5000) {
            let data = Array("message \(i)".utf8)
            let sig = try key.signES256(data)
            XCTAssertEqual(sig.count, 64)
            if sig[0] == 0 || sig[32] == 0 { leadingZero += 1 }
            XCTAssertTrue(key.publicKey.verifiesES256(data, signature: sig), "signature \(i)")
            XCTAssertFalse(key.publicKey.verifiesES256(data + [0], signature: sig))
            i += 1
        }
        XCTAssertGreaterThan(leadingZero, 0, "\(i) signatures include some with a leading zero byte")
    }

    func testECDHAgreesBothWays() throws {
        let a = try P256PrivateKey(), b = try P256PrivateKey()
        let ab = a.sharedSecret(with: b.publicKey)
        XCTAssertEqual(ab.count, 32)
        XCTAssertEqual(ab, b.sharedSecret(with: a.publicKey))
        XCTAssertNotEqual(ab, a.sharedSecret(with: try P256PrivateKey().publicKey))
    }

    func testMalformedKeysAreRefused() throws {
        let good = try P256PrivateKey().publicKey.rawPoint
        var offCurve = good
        offCurve[64] ^= 0x01
        var compressed = Array(good[0..<33])
        compressed[0] = 0x02
        var badPrefix = good
        badPrefix[0] = 0x05
        let p: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01] + [UInt8](repeating: 0, count: 12)
            + [0x00, 0x00, 0x00, 0x00] + [UInt8](repeating: 0xFF, count: 12)
        let outOfRange = [0x04] + p + Array(good[33...])  // x = the field prime
        for bad in [[], [0x04], Array(good.dropLast()), good + [0], offCurve, compressed, badPrefix,
                    [0x04] + [UInt8](repeating: 0, count: 64), outOfRange] {
            XCTAssertThrowsError(try P256PublicKey(rawPoint: bad), "\(bad.count) bytes")
        }
        for bad in ["", "!", "BCm5 KajnGdUQ", String(Self.outsidePoint.dropLast()), Self.outsidePoint + "A",
                    Self.outsidePoint + "===", Self.outsidePoint.replacingOccurrences(of: "-", with: "+")] {
            XCTAssertThrowsError(try P256PublicKey(base64URL: bad), bad)
        }
        let order: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                              0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51]
        for bad in [[UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 0xFF, count: 32), [1], [UInt8](repeating: 1, count: 33)] {
            XCTAssertThrowsError(try P256PrivateKey(rawScalar: bad))
        }
        XCTAssertNoThrow(try P256PrivateKey(rawScalar: [UInt8](repeating: 0, count: 31) + [1]), "1 is a key (its point is G)")
        let rsa = try RSAPrivateKey()
        XCTAssertThrowsError(try P256PrivateKey(pem: rsa.pem))
        XCTAssertThrowsError(try P256PublicKey(pem: rsa.publicKeyPEM))
        for bad in ["", "not a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                    // The scalar changed: the public key the file carries is no longer its own.
                    Self.outsideKeyP8.replacingOccurrences(of: "YugZ", with: "YugY")] {
            XCTAssertThrowsError(try P256PrivateKey(pem: bad), bad)
            XCTAssertThrowsError(try P256PublicKey(pem: bad), bad)
        }
    }

    /// nettle's base64url against FCMCore's, on every length that matters.
    func testBase64URLMatchesFCMCore() {
        var rng = SystemRandomNumberGenerator()
        for n in 0..<80 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let text = Base64URL.encode(bytes)
            XCTAssertEqual(text, base64URLEncode(bytes))
            XCTAssertEqual(Base64URL.decode(text), bytes)
        }
        for bad in ["A", "AAAAA", "A=A", "A B", "A\n", "é", "AA===", "+/"] {
            XCTAssertNil(Base64URL.decode(bad), bad)
        }
    }
}
