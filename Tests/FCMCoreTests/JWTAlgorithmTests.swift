import FCMCore
import XCTest

/// The caller names the algorithm it expects: RS256 (the default, Google's service accounts) or
/// ES256 (APNs provider tokens, VAPID); nothing else, and never `none` or an HMAC.
final class JWTAlgorithmTests: XCTestCase {
    func part(_ json: String) -> String { base64URLEncode(Array(json.utf8)) }
    let sig64 = base64URLEncode([UInt8](repeating: 9, count: 64))

    func token(_ header: String, claims: String = #"{"iss":"ABCDE12345","iat":1}"#, signature: String? = nil) -> String {
        part(header) + "." + part(claims) + "." + (signature ?? sig64)
    }

    func testES256TokensAreTakenApart() throws {
        let apns = try JWT.parse(token(#"{"alg":"ES256","kid":"KEY1234567"}"#), algorithm: .es256)
        XCTAssertEqual(apns.algorithm, .es256)
        XCTAssertEqual(apns.keyID, "KEY1234567")
        XCTAssertEqual(apns.signature, [UInt8](repeating: 9, count: 64))
        XCTAssertEqual(apns.claims["iss"]?.stringValue, "ABCDE12345")
        // VAPID tokens carry no kid: taken when the caller does not require one.
        let vapid = try JWT.parse(token(#"{"typ":"JWT","alg":"ES256"}"#), algorithm: .es256, requiringKeyID: false)
        XCTAssertEqual(vapid.keyID, "")
        XCTAssertThrowsError(try JWT.parse(token(#"{"typ":"JWT","alg":"ES256"}"#), algorithm: .es256)) {
            XCTAssertEqual($0 as? JWT.Failure, .missingKeyID)
        }
        XCTAssertEqual(try JWT.parse(token(#"{"alg":"RS256","kid":"k"}"#)).algorithm, .rs256, "RS256 stays the default")
    }

    func testOnlyTheExpectedAlgorithm() {
        let cases: [(String, JWT.Algorithm, JWT.Failure)] = [
            (token(#"{"alg":"RS256","kid":"k"}"#), .es256, .unsupportedAlgorithm("RS256")),
            (token(#"{"alg":"ES256","kid":"k"}"#), .rs256, .unsupportedAlgorithm("ES256")),
            (token(#"{"alg":"none","kid":"k"}"#), .es256, .unsupportedAlgorithm("none")),
            (token(#"{"alg":"none"}"#, signature: "c2ln"), .es256, .unsupportedAlgorithm("none")),
            (token(#"{"alg":"HS256","kid":"k"}"#), .es256, .unsupportedAlgorithm("HS256")),
            (token(#"{"alg":"HS512","kid":"k"}"#), .rs256, .unsupportedAlgorithm("HS512")),
            (token(#"{"alg":"ES384","kid":"k"}"#), .es256, .unsupportedAlgorithm("ES384")),
            (token(#"{"alg":"es256","kid":"k"}"#), .es256, .unsupportedAlgorithm("es256")),
            (token(#"{"alg":["ES256"],"kid":"k"}"#), .es256, .unsupportedAlgorithm("missing")),
            (token(#"{"kid":"k"}"#), .es256, .unsupportedAlgorithm("missing")),
        ]
        for (t, alg, expected) in cases {
            XCTAssertThrowsError(try JWT.parse(t, algorithm: alg, requiringKeyID: false), t) {
                XCTAssertEqual($0 as? JWT.Failure, expected, t)
            }
        }
    }

    /// An ES256 signature is r and s, 64 bytes: DER signatures (70-72 bytes), truncated or padded
    /// ones are refused with their length; a kid that is not a string never passes as "none".
    func testES256ShapeRules() {
        for n in [1, 32, 63, 65, 70, 72, 96] {
            let t = token(#"{"alg":"ES256","kid":"k"}"#, signature: base64URLEncode([UInt8](repeating: 1, count: n)))
            XCTAssertThrowsError(try JWT.parse(t, algorithm: .es256), "\(n) bytes") {
                XCTAssertEqual($0 as? JWT.Failure, .signatureLength(expected: 64, got: n))
            }
        }
        let malformed = [
            token(#"{"alg":"ES256","kid":"k"}"#, signature: ""),
            token(#"{"alg":"ES256","kid":"k"}"#, signature: "!!!"),
            token(#"{"alg":"ES256","kid":"k"}"#, signature: String(sig64.dropLast())),  // 85 characters: no whole byte
            token(#"{"alg":"ES256","kid":"k","crit":["exp"]}"#),
            part(#"{"alg":"ES256","kid":"k"}"#) + ".e30",
            part(#"{"alg":"ES256","kid":"k"}"#) + "." + part("[]") + "." + sig64,
        ]
        for t in malformed {
            XCTAssertThrowsError(try JWT.parse(t, algorithm: .es256), t) { error in
                guard case .malformed = error as? JWT.Failure else { return XCTFail("\(t): \(error)") }
            }
        }
        XCTAssertThrowsError(try JWT.parse(token(#"{"alg":"ES256","kid":7}"#), algorithm: .es256, requiringKeyID: false)) {
            XCTAssertEqual($0 as? JWT.Failure, .missingKeyID)
        }
        XCTAssertThrowsError(try JWT.parse(token(#"{"alg":"ES256"}"#, claims: String(repeating: "x", count: 9000)),
                                           algorithm: .es256)) {
            XCTAssertEqual($0 as? JWT.Failure, .tooLong)
        }
    }

    /// Random bytes and mutated tokens: every one a token or a failure, none a crash.
    func testHostileTokensNeverCrash() {
        var rng = SystemRandomNumberGenerator()
        let good = Array(token(#"{"alg":"ES256","kid":"k"}"#).utf8)
        let alphabet = Array("AZaz09-_.=+/{}\"".utf8)
        for _ in 0..<3000 {
            var t = good
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let i = Int.random(in: 0..<t.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: t[i] = alphabet.randomElement(using: &rng)!
                case 1: t.remove(at: i)
                default: t.insert(alphabet.randomElement(using: &rng)!, at: i)
                }
                if t.isEmpty { break }
            }
            _ = try? JWT.parse(String(decoding: t, as: UTF8.self), algorithm: .es256, requiringKeyID: Bool.random(using: &rng))
        }
    }
}
