@testable import RoomKit
import XCTest

@testable import FCMEngine
@testable import FCMServer
@testable import HTTPServer

/// The access line's byte formatter (one per request) against the string form it replaces.
final class AccessLineFormatTests: XCTestCase {
    private func generic(_ a: HTTPAccess) -> String {
        var out = ""
        LogEntry(micros: 0, level: .info, json: false, body: .http(a)).forEachField { k, v in out += " \(k)=\(v)" }
        return out
    }

    private func fast(_ a: HTTPAccess) -> String {
        var out: [UInt8] = []
        LogEntry.appendAccessFields(a, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func testSameTextAsTheFieldList() {
        let cases: [(Int, Int, UInt64, String?)] = [
            (200, 112, 1_234_567, "key=AAAAfcmmock:demo-server-key"),
            (0, -1, 0, nil),
            (401, 0, 999, "Bearer eyJhbGciOi.x.y"),
            (503, 14, 12_345_678_901, ""),
            (413, 1_048_577, 1_000_000, "  KEY=short"),
        ]
        for (status, bytes, nanos, auth) in cases {
            let a = HTTPAccess(method: "POST", path: "/fcm/send", status: status, bytes: bytes, authorization: auth, nanos: nanos)
            XCTAssertEqual(fast(a), generic(a))
        }
        XCTAssertEqual(fast(HTTPAccess(method: "GET", path: "/api/v1/health", status: 200, bytes: 15, authorization: nil, nanos: 2_500_000)),
                       " method=GET path=/api/v1/health status=200 bytes=15 ms=2.500 auth=-")
    }

    func testMaskingMatchesTheStringRules() {
        let values: [String?] = [nil, "", " ", "key=", "key=0123456789abcdef", "key=0123456789abcde", "KEY=short",
                                 "   key=AAAAfcmmock:demo-server-key", "Bearer s3cret-token-value", "s3cret", "Basic  x",
                                 "key=ключ-сервера-очень-длинный", "key=0123456789abcdé", "Bearer\ttab", "key=a\r\nbcdefghijklmnopq",
                                 "Bearer \u{301}x", "Bearé x", " \u{301}Bearer x", "Bearer x\u{301}é", "nospace\u{301}é",
                                 "Bearer " + String(repeating: "e", count: 900), "   ", "key=AAAAfcmmock:demo-server-key, Bearer x"]
        for v in values {
            var out: [UInt8] = []
            LogEntry.appendMaskedCredential(v, into: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), Log.maskCredential(v), String(describing: v))
        }
    }
}
