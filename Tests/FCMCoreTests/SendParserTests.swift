import XCTest

@testable import FCMCore

/// Table-driven tests of the JSON send rules (seeds Table 1 and Table 9).
final class SendParserJSONTests: XCTestCase {
    enum Expect {
        case bad(String)  // 400 with exactly this text
        case invalidParameters
        case messageError(FCMErrorCode)
        case ok(SendTarget)
    }

    func check(_ body: String, _ expect: Expect, file: StaticString = #filePath, line: UInt = #line) {
        let outcome = SendParser.parseJSON(Array(body.utf8))
        switch (outcome, expect) {
        case (.badRequest(let got), .bad(let want)):
            XCTAssertEqual(got, want, body, file: file, line: line)
        case (.invalidParameters, .invalidParameters):
            break
        case (.request(let r), .messageError(let want)):
            XCTAssertEqual(r.messageError, want, body, file: file, line: line)
        case (.request(let r), .ok(let target)):
            XCTAssertNil(r.messageError, "\(body): \(r.messageErrorDetail ?? "")", file: file, line: line)
            XCTAssertEqual(r.target, target, body, file: file, line: line)
        default:
            XCTFail("\(body): got \(outcome), wanted \(expect)", file: file, line: line)
        }
    }

    func testTable() {
        let big = String(repeating: "x", count: 4096)
        let cases: [(String, Expect)] = [
            (#"{"to":"tok"}"#, .ok(.token("tok"))),
            (#"{"registration_ids":["a","b"]}"#, .ok(.multicast(["a", "b"]))),
            (#"{"to":"/topics/news"}"#, .ok(.topic("news"))),
            (#"{"condition":"'a' in topics"}"#, .ok(.condition("'a' in topics"))),
            (#"{"notification_key":"APA91bX"}"#, .ok(.token("APA91bX"))),
            // Targets
            (#"{}"#, .messageError(.missingRegistration)),
            (#"{"data":{"a":"b"}}"#, .messageError(.missingRegistration)),
            (#"{"registration_ids":[]}"#, .messageError(.missingRegistration)),
            (#"{"to":"a","registration_ids":["b"]}"#,
             .bad(#"Must use either "registration_ids" field or "to" field or "condition", not more than one"#)),
            (#"{"to":"a","condition":"'x' in topics"}"#,
             .bad(#"Must use either "registration_ids" field or "to" field or "condition", not more than one"#)),
            (#"{"registration_ids":"a"}"#, .bad(#""registration_ids" field is not a JSON array"#)),
            (#"{"registration_ids":null}"#, .bad(#""registration_ids" field is not a JSON array"#)),
            (#"{"registration_ids":["a",5]}"#, .bad(#"Field "registration_ids[1]" must be a JSON java.lang.String: 5"#)),
            (#"{"to":5}"#, .bad(#"Field "to" must be a JSON java.lang.String: 5"#)),
            (#"{"to":null}"#, .bad(#"Field "to" must be a JSON java.lang.String: null"#)),
            // Options by type
            (#"{"to":"a","time_to_live":"abc"}"#, .bad(#"Field "time_to_live" must be a JSON java.lang.Number: abc"#)),
            (#"{"to":"a","collapse_key":null}"#, .bad(#"Field "collapse_key" must be a JSON java.lang.String: null"#)),
            (#"{"to":"a","dry_run":"true"}"#, .bad(#"Field "dry_run" must be a JSON java.lang.Boolean: true"#)),
            (#"{"to":"a","content_available":1}"#, .bad(#"Field "content_available" must be a JSON java.lang.Boolean: 1"#)),
            (#"{"to":"a","priority":"urgent"}"#, .bad(#"Field "priority" must be "normal" or "high": urgent"#)),
            (#"{"to":"a","data":"x"}"#, .bad(#"Field "data" must be a JSON object: x"#)),
            (#"{"to":"a","data":[1]}"#, .bad(#"Field "data" must be a JSON object: [1]"#)),
            (#"{"to":"a","notification":{"title":5}}"#, .bad(#"Field "notification.title" must be a JSON java.lang.String: 5"#)),
            (#"{"to":"a","notification":{"badge":5,"body_loc_args":["x"],"title_loc_args":"[\"y\"]"}}"#, .ok(.token("a"))),
            (#"{"to":"a","time_to_leave":5}"#, .invalidParameters),
            // TTL range
            (#"{"to":"a","time_to_live":0}"#, .ok(.token("a"))),
            (#"{"to":"a","time_to_live":2419200}"#, .ok(.token("a"))),
            (#"{"to":"a","time_to_live":2419201}"#, .messageError(.invalidTtl)),
            (#"{"to":"a","time_to_live":-1}"#, .messageError(.invalidTtl)),
            (#"{"to":"a","time_to_live":1.5}"#, .messageError(.invalidTtl)),
            (#"{"to":"a","time_to_live":1e3}"#, .messageError(.invalidTtl)),
            (#"{"to":"a","time_to_live":99999999999999999999999}"#, .messageError(.invalidTtl)),
            // Data keys
            (#"{"to":"a","data":{"from":"x"}}"#, .messageError(.invalidDataKey)),
            (#"{"to":"a","data":{"message_type":"x"}}"#, .messageError(.invalidDataKey)),
            (#"{"to":"a","data":{"google.c.a":"x"}}"#, .messageError(.invalidDataKey)),
            (#"{"to":"a","data":{"gcm.n.e":"x"}}"#, .messageError(.invalidDataKey)),
            (#"{"to":"a","data":{"collapse_key":"x","fromage":"y"}}"#, .ok(.token("a"))),
            // Size: keys and values of data + notification, limit 4096 (2048 for topics)
            ("{\"to\":\"a\",\"data\":{\"k\":\"\(String(big.dropFirst(1)))\"}}", .ok(.token("a"))),
            ("{\"to\":\"a\",\"data\":{\"k\":\"\(big)\"}}", .messageError(.messageTooBig)),
            ("{\"to\":\"a\",\"data\":{\"k\":\"\(String(repeating: "x", count: 2000))\"},\"notification\":{\"title\":\"\(String(repeating: "y", count: 2100))\"}}",
             .messageError(.messageTooBig)),
            ("{\"to\":\"/topics/a\",\"data\":{\"k\":\"\(String(repeating: "x", count: 2048))\"}}", .messageError(.messageTooBig)),
            // Not JSON
            (#"{"to":"#, .bad("JSON_PARSING_ERROR: Unexpected token END OF FILE at position 6.")),
            (#"[1]"#, .bad("JSON_PARSING_ERROR: Expected a JSON object, got array.")),
            (#"{"to":"a","to":"b"}"#, .bad(#"JSON_PARSING_ERROR: Duplicate key "to" at position 10."#)),
        ]
        for (body, expect) in cases { check(body, expect) }
    }

    func testInvalidUTF8IsAParseError() {
        guard case .badRequest(let reason) = SendParser.parseJSON([0x7b, 0x22, 0x74, 0x6f, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]) else {
            return XCTFail("invalid UTF-8 must be a 400")
        }
        XCTAssertTrue(reason.hasPrefix("JSON_PARSING_ERROR: Invalid UTF-8 byte 0xFF"), reason)
    }

    func testOptionsAndDefaults() throws {
        guard case .request(let r) = SendParser.parseJSON(Array(#"{"to":"a","collapse_key":"c","priority":"high","time_to_live":60,"restricted_package_name":"p","content_available":true,"mutable_content":true,"dry_run":true,"delay_while_idle":false}"#.utf8)) else {
            return XCTFail()
        }
        XCTAssertEqual(r.options.collapseKey, "c")
        XCTAssertEqual(r.options.priority, .high)
        XCTAssertEqual(r.options.timeToLive, 60)
        XCTAssertEqual(r.options.restrictedPackageName, "p")
        XCTAssertTrue(r.options.contentAvailable)
        XCTAssertTrue(r.options.mutableContent)
        XCTAssertTrue(r.options.dryRun)
        XCTAssertEqual(r.options.delayWhileIdle, false)

        guard case .request(let d) = SendParser.parseJSON(Array(#"{"to":"a","data":{"x":"y"}}"#.utf8)),
            case .request(let n) = SendParser.parseJSON(Array(#"{"to":"a","notification":{"title":"t"}}"#.utf8))
        else { return XCTFail() }
        XCTAssertEqual(d.options.timeToLive, 2_419_200, "default TTL is four weeks")
        XCTAssertEqual(d.effectivePriority, .normal, "data messages default to normal")
        XCTAssertEqual(n.effectivePriority, .high, "notification messages default to high")
    }

    func testThousandAndOneRegistrationIDs() {
        let ids = (0..<1001).map { "\"t\($0)\"" }.joined(separator: ",")
        check("{\"registration_ids\":[\(ids)]}", .bad("Number of messages on bulk (1001) exceeds maximum allowed (1000)"))
        let ok = (0..<1000).map { "\"t\($0)\"" }.joined(separator: ",")
        guard case .request(let r) = SendParser.parseJSON(Array("{\"registration_ids\":[\(ok)]}".utf8)) else { return XCTFail() }
        XCTAssertEqual(r.target.tokens.count, 1000)
    }
}

/// Table-driven tests of the plain-text format (seeds Table 3).
final class SendParserPlainTests: XCTestCase {
    func parse(_ s: String) -> SendRequest? {
        guard case .request(let r) = SendParser.parsePlain(Array(s.utf8)) else { return nil }
        return r
    }

    func testSeedExample() throws {
        let r = try XCTUnwrap(parse("collapse_key=score_update&time_to_live=108&data.score=4x8&registration_id=42"))
        XCTAssertNil(r.messageError)
        XCTAssertEqual(r.target, .token("42"))
        XCTAssertEqual(r.options.collapseKey, "score_update")
        XCTAssertEqual(r.options.timeToLive, 108)
        XCTAssertEqual(r.data?["score"], .string("4x8"))
        XCTAssertEqual(r.format, .plain)
    }

    func testTable() {
        let cases: [(String, FCMErrorCode?)] = [
            ("registration_id=a", nil),
            ("registration_id=a&data.x=hello+world%21", nil),
            ("registration_id=a&dry_run=true&delay_while_idle=1", nil),
            ("", .missingRegistration),
            ("data.score=1", .missingRegistration),
            ("registration_id=a&time_to_live=abc", .invalidTtl),
            ("registration_id=a&time_to_live=-5", .invalidTtl),
            ("registration_id=a&time_to_live=2419201", .invalidTtl),
            ("registration_id=a&data.from=x", .invalidDataKey),
            ("registration_id=a&data.google.x=x", .invalidDataKey),
            ("registration_id=a&data.k=\(String(repeating: "x", count: 4096))", .messageTooBig),
            ("registration_id=a&registration_id=b", .invalidParameters),
            ("registration_id=a&priority=high", .invalidParameters),
            ("registration_id=a&dry_run=maybe", .invalidParameters),
            ("registration_id=a&data.x=%zz", .invalidParameters),
            ("registration_id=a&data.x=%ff", .invalidParameters),
        ]
        for (body, want) in cases {
            let r = parse(body)
            XCTAssertNotNil(r, body)
            XCTAssertEqual(r?.messageError, want, body)
        }
        XCTAssertEqual(parse("registration_id=a&data.x=hello+world%21")?.data?["x"], .string("hello world!"))
    }
}
