@testable import RoomKit
import HTTPServer
import XCTest

@testable import FCMEngine
@testable import FCMServer

/// The plain stored form of an exchange and the JSON the control API makes of it.
final class RecordedExchangeFormTests: XCTestCase {
    func testAnswersAndHeadersRoundTripToJSON() {
        let http = RecordedExchange.answer(status: 200, contentType: "application/json; charset=UTF-8",
                                           body: Array(#"{"a":"tab\there","nl":"x\ny"}"#.utf8))
        XCTAssertEqual(RecordedExchange.json(answer: http),
                       #"{"status":200,"content_type":"application/json; charset=UTF-8","body":"{\"a\":\"tab\\there\",\"nl\":\"x\\ny\"}"}"#)
        let xmpp = RecordedExchange.answer(status: nil, contentType: "xmpp", body: Array("<ack/>\nline".utf8))
        XCTAssertEqual(RecordedExchange.json(answer: xmpp), #"{"status":null,"content_type":"xmpp","body":"<ack/>\nline"}"#)
        let long = RecordedExchange.answer(status: 500, contentType: nil, body: Array(repeating: UInt8(ascii: "x"), count: 5000))
        XCTAssertEqual(RecordedExchange.json(answer: long),
                       #"{"status":500,"content_type":null,"body":""# + String(repeating: "x", count: 4096) + #"","body_truncated":true}"#)
        let r = HTTPRequest(method: "POST", path: "/fcm/send", headers: [
            (name: "Content-Type", value: "application/json"), (name: "AUTHORIZATION", value: "key=AIzaSyABCDEFGH"),
            (name: "User-Agent", value: "evil\tagent\nX: y"), (name: "X-Other", value: "ignored"),
        ])
        XCTAssertEqual(RecordedExchange.json(headers: RecordedExchange.headers(r)),
                       #"{"content-type":"application/json","authorization":"key=AIzaSy…","user-agent":"evil agent X: y"}"#)
        XCTAssertEqual(RecordedExchange.json(headers: RecordedExchange.headers(HTTPRequest(method: "GET", path: "/"))), "{}")
    }

    /// The stored form's rule in characters: tab, line breaks (CR LF is one character) as spaces.
    private func clean(_ value: String) -> String {
        String(value.map { $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : $0 })
    }

    /// The byte cleaning every send's headers go through gives the text of the character rule.
    func testByteCleaningMatchesTheCharacterRules() {
        for v in ["plain", "a\tb", "a\r\nb", "a\n\rb", "\r\r\n\n", "end\r", "\t\u{301}x", "é\r\n\u{301}", ""] {
            var out: [UInt8] = []
            RecordedExchange.appendClean(v, into: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), clean(v), v.debugDescription)
        }
    }

    func testMaskKeepsTheSchemeAndSixCharacters() {
        XCTAssertEqual(RecordedExchange.mask("Bearer eyJhbGciOiJSUzI1NiJ9." + String(repeating: "x", count: 900)), "Bearer eyJhbG…")
        XCTAssertEqual(RecordedExchange.mask("key=é漢字abcdefgh"), "key=é漢字abc…")
        XCTAssertEqual(RecordedExchange.mask("short"), "short")
        XCTAssertEqual(RecordedExchange.mask("key=abcdef"), "key=abcdef")
        XCTAssertEqual(RecordedExchange.mask(""), "")
    }
}

