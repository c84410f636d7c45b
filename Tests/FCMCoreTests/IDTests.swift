import Foundation
import XCTest

@testable import FCMCore

final class IDTests: XCTestCase {
    func testMessageIDShape() throws {
        let id = MessageID(micros: 1_484_103_730_761_325, suffix: 0x9b9e_6c13)
        XCTAssertEqual(id.description, "0:1484103730761325%9b9e6c139b9e6c13")
        XCTAssertEqual(MessageID(id.description), id)
        let regex = try NSRegularExpression(pattern: "^0:[0-9]{16}%[0-9a-f]{16}$")
        let s = MessageID(micros: 42, suffix: 1).description
        XCTAssertEqual(regex.numberOfMatches(in: s, range: NSRange(s.startIndex..., in: s)), 1, s)
    }

    func testMessageIDDigitsArePaddedToSixteenAndNeverCut() {
        XCTAssertEqual(MessageID(micros: 0, suffix: 0).description, "0:0000000000000000%0000000000000000")
        XCTAssertEqual(MessageID(micros: 42, suffix: 0xabc).description, "0:0000000000000042%00000abc00000abc")
        XCTAssertEqual(MessageID(micros: 9_999_999_999_999_999, suffix: 1).description,
                       "0:9999999999999999%0000000100000001")
        XCTAssertEqual(MessageID(micros: 10_000_000_000_000_000, suffix: 1).description,
                       "0:10000000000000000%0000000100000001")
        XCTAssertEqual(MessageID(micros: Int64.max, suffix: 0xffff_ffff).description,
                       "0:9223372036854775807%ffffffffffffffff")
        XCTAssertEqual(MessageID(micros: -5, suffix: 2).description, "0:0000000000000000%0000000200000002")
    }

    func testMessageIDParsingRejects() {
        for bad in ["", "fake_message_id", "0:123%abc", "1:1484103730761325%9b9e6c139b9e6c13",
                    "0:1484103730761325%9b9e6c139b9e6c14", "0:1484103730761325%9B9E6C139B9E6C13",
                    "0:99999999999999999999999%9b9e6c139b9e6c13", "0:148410373076132x%9b9e6c139b9e6c13"] {
            XCTAssertNil(MessageID(bad), bad)
        }
    }

    func testSuffixIsPerSender() {
        XCTAssertEqual(messageIDSuffix(senderID: "123"), messageIDSuffix(senderID: "123"))
        XCTAssertNotEqual(messageIDSuffix(senderID: "123"), messageIDSuffix(senderID: "124"))
    }

    func testAllocatorIsStrictlyIncreasingAndRunsAheadWhenNeeded() {
        var a = MessageIDAllocator(floor: 1000)
        XCTAssertEqual(a.reserve(1, nowMicros: 10), 1001, "never at or below the floor")
        XCTAssertEqual(a.reserve(1000, nowMicros: 10), 1002)
        XCTAssertEqual(a.reserve(1, nowMicros: 10), 2002, "a block of 1000 is consumed whole")
        XCTAssertEqual(a.reserve(1, nowMicros: 5000), 5000, "falls back in step with the clock")
    }

    func testMulticastIDIs19DigitPositive() {
        for state in [0, 1, UInt64.max] + (0..<100).map({ _ in UInt64.random(in: 0...UInt64.max) }) {
            let m = multicastID(mixing: state)
            XCTAssertGreaterThan(m, 0)
            XCTAssertEqual(String(m).count, 19)
        }
    }

    func testTokens() {
        var rng = SystemRandomNumberGenerator()
        let t = newRegistrationToken(using: &rng)
        XCTAssertEqual(t.count, 152)
        XCTAssertTrue(t.contains(":APA91b"))
        XCTAssertTrue(isWellFormedToken(t))
        XCTAssertEqual(deterministicRegistrationToken(seed: "x"), deterministicRegistrationToken(seed: "x"))
        XCTAssertNotEqual(deterministicRegistrationToken(seed: "x"), deterministicRegistrationToken(seed: "y"))
        XCTAssertTrue(isWellFormedToken(deterministicRegistrationToken(seed: "x")))
        let cases: [(String, Bool)] = [
            ("42", true), ("demo-android-1", true), ("a:b.c_d-e", true), ("", false), ("a b", false),
            ("a/b", false), ("a%b", false), ("ä", false), ("<script>", false),
            (String(repeating: "a", count: 4096), true), (String(repeating: "a", count: 4097), false),
        ]
        for (token, ok) in cases { XCTAssertEqual(isWellFormedToken(token), ok, token) }
        // Every byte value, alone and at the end of a vector-length run: exactly the alphabet passes.
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_:.".utf8)
        for b in 0...255 {
            let byte = UInt8(b)
            for prefix in [0, 31, 40] {
                let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: prefix) + [byte]
                let token = String(decoding: bytes, as: UTF8.self)
                // A lone byte over 0x7F is not UTF-8: it decodes to U+FFFD, also refused.
                XCTAssertEqual(isWellFormedToken(token), alphabet.contains(byte), "byte \(b) after \(prefix)")
            }
        }
    }

    func testRFC3339() {
        XCTAssertEqual(rfc3339(millis: 0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(rfc3339(millis: 1_700_000_000_123), "2023-11-14T22:13:20.123Z")
        XCTAssertEqual(rfc3339(millis: 951_782_400_000), "2000-02-29T00:00:00.000Z")
        // Every 64-bit number is written (the extremes as the ±2^60 ms they are kept within).
        XCTAssertEqual(rfc3339(millis: .min), rfc3339(millis: -(1 << 60)))
        XCTAssertEqual(rfc3339(millis: .max), rfc3339(millis: 1 << 60))
        XCTAssertEqual(rfc3339(millis: .max), "36536598-01-28T21:54:06.976Z")
        // Against Foundation's formatter, over four centuries.
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let ms = Int64.random(in: -2_208_988_800_000...253_402_300_799_999, using: &rng)
            XCTAssertEqual(rfc3339(millis: ms), f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000 + 0.0000001)), "\(ms)")
        }
        // The array form of base64url agrees with the generic one at every length.
        for n in 0..<70 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            XCTAssertEqual(base64URLEncode(bytes), base64URLEncode(bytes[...]), "\(n) bytes")
            XCTAssertEqual(base64URLDecode(Array(base64URLEncode(bytes).utf8)), bytes)
        }
        for ms: Int64 in [0, 1, 999, 1_700_000_000_123, 951_782_400_000, 4_102_444_800_000] {
            XCTAssertEqual(parseRFC3339(rfc3339(millis: ms)), ms)
        }
        XCTAssertEqual(parseRFC3339("2023-11-14T23:13:20+01:00"), 1_700_000_000_000)
        XCTAssertEqual(parseRFC3339("2023-11-14T22:13:20Z"), 1_700_000_000_000)
        XCTAssertNil(parseRFC3339("2023-11-14"))
        XCTAssertNil(parseRFC3339("2023-13-14T22:13:20Z"))
        XCTAssertNil(parseRFC3339("yesterday"))
    }
}
