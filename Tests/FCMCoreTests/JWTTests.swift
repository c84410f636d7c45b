import FCMCore
import XCTest

/// JWTs taken apart: only RS256 with a `kid`, of a bounded size, three base64url parts.
final class JWTTests: XCTestCase {
    func part(_ json: String) -> String { base64URLEncode(Array(json.utf8)) }

    func token(header: String = #"{"alg":"RS256","typ":"JWT","kid":"k1"}"#, claims: String = #"{"iss":"a@b","iat":1,"exp":2}"#,
               signature: String = "c2ln") -> String {
        part(header) + "." + part(claims) + "." + signature
    }

    func testAWellFormedRS256TokenIsTakenApart() throws {
        let t = token()
        let jwt = try JWT.parse(t)
        XCTAssertEqual(jwt.keyID, "k1")
        XCTAssertEqual(jwt.claims["iss"]?.stringValue, "a@b")
        XCTAssertEqual(jwt.seconds("exp"), 2)
        XCTAssertNil(jwt.seconds("nbf"))
        // The 64-bit extremes are kept within ±2^40 s, so the checks' arithmetic cannot overflow.
        let far = try JWT.parse(token(claims: #"{"iat":-9223372036854775808,"exp":9223372036854775807}"#))
        XCTAssertEqual(far.seconds("iat"), -JWT.secondsBound)
        XCTAssertEqual(far.seconds("exp"), JWT.secondsBound)
        XCTAssertEqual(jwt.signature, Array("sig".utf8))
        XCTAssertEqual(String(decoding: jwt.signingInput, as: UTF8.self), String(t[..<t.lastIndex(of: ".")!]))
    }

    func testOnlyRS256WithAKeyIDOfBoundedSize() {
        let cases: [(String, JWT.Failure)] = [
            (token(header: #"{"alg":"none","kid":"k1"}"#), .unsupportedAlgorithm("none")),
            (token(header: #"{"alg":"HS256","kid":"k1"}"#), .unsupportedAlgorithm("HS256")),
            (token(header: #"{"alg":"RS512","kid":"k1"}"#), .unsupportedAlgorithm("RS512")),
            (token(header: #"{"alg":"rs256","kid":"k1"}"#), .unsupportedAlgorithm("rs256")),
            (token(header: #"{"kid":"k1"}"#), .unsupportedAlgorithm("missing")),
            (token(header: #"{"alg":"RS256"}"#), .missingKeyID),
            (token(header: #"{"alg":"RS256","kid":""}"#), .missingKeyID),
            (token(header: #"{"alg":"RS256","kid":7}"#), .missingKeyID),
            (token(claims: String(repeating: "x", count: 9000)), .tooLong),
        ]
        for (t, expected) in cases {
            XCTAssertThrowsError(try JWT.parse(t), t) { XCTAssertEqual($0 as? JWT.Failure, expected, t) }
        }
    }

    func testMalformedTokens() {
        let good = token()
        let parts = good.split(separator: ".").map(String.init)
        let cases = [
            "", "abc", parts[0] + "." + parts[1], good + ".x", parts[0] + ".." + parts[2],
            parts[0] + "." + parts[1] + ".", "!!." + parts[1] + "." + parts[2],
            part("[1]") + "." + parts[1] + "." + parts[2], parts[0] + "." + part("not json") + "." + parts[2],
            part(#"{"alg":"RS256","kid":"k"}"#) + "." + part("[]") + "." + parts[2],
        ]
        for t in cases {
            XCTAssertThrowsError(try JWT.parse(t), t) { error in
                guard case .malformed = error as? JWT.Failure else { return XCTFail("\(t): \(error)") }
            }
        }
    }

    func testBase64URLRoundTripsAndRefusesWhatIsNotBase64() {
        var rng = SystemRandomNumberGenerator()
        for n in 0..<70 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let text = base64URLEncode(bytes)
            XCTAssertFalse(text.contains("=") || text.contains("+") || text.contains("/"), text)
            XCTAssertEqual(base64URLDecode(Array(text.utf8)), bytes, text)
        }
        XCTAssertEqual(base64URLEncode(Array("f".utf8)), "Zg")
        XCTAssertEqual(base64URLEncode(Array("foobar".utf8)), "Zm9vYmFy")
        XCTAssertEqual(base64URLDecode(Array("Zg==".utf8)), Array("f".utf8), "padding is taken")
        XCTAssertEqual(base64URLDecode(Array("-_8".utf8)), [0xFB, 0xFF])
        XCTAssertEqual(base64URLDecode(Array("+/8".utf8)), [0xFB, 0xFF], "standard base64 too")
        for bad in ["Z", "Zg=g", "Zm9v YmFy", "Zg===", "é"] {
            XCTAssertNil(base64URLDecode(Array(bad.utf8)), bad)
        }
    }
}
