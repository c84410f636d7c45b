import XCTest
import FCMCore

final class JSONTests: XCTestCase {

    // MARK: Valid inputs

    func testValidInputs() throws {
        let fcmToken = String(repeating: "aB3_-:", count: 25) + "xy"
        let table: [(input: [UInt8], expected: JSONValue)] = [
            (bytes("null"), .null),
            (bytes("true"), .bool(true)),
            (bytes("false"), .bool(false)),
            (bytes(" \t\r\n0 \t\r\n"), num("0")),
            (bytes("-0"), num("-0")),
            (bytes("1.50"), num("1.50")),
            (bytes("-1.5e10"), num("-1.5e10")),
            (bytes("1E+2"), num("1E+2")),
            (bytes("1e-2"), num("1e-2")),
            (bytes("0.0e0"), num("0.0e0")),
            (bytes("123456789012345678901234567890"), num("123456789012345678901234567890")),
            (bytes("1e400"), num("1e400")),
            (bytes("\"\""), str("")),
            (bytes("\"abc\""), str("abc")),
            (bytes(#""\"\\\/\b\f\n\r\t""#), str("\"\\/\u{8}\u{C}\n\r\t")),
            (bytes(#""\u0041\u00e9\u20AC\ud83d\ude00""#), str("Aé€😀")),
            (bytes(#""a\u0000b""#), str("a\u{0}b")),
            (bytes("\"é€😀 ünïcödé\""), str("é€😀 ünïcödé")),
            (bytes("\"\u{7F}\""), str("\u{7F}")),
            (bytes("\"\(fcmToken)\""), str(fcmToken)),
            (bytes(#""long string with an escape near the end, past the 8-byte fast path: \n!""#),
             str("long string with an escape near the end, past the 8-byte fast path: \n!")),
            (bytes("[]"), arr()),
            (bytes("[ ]"), arr()),
            (bytes("{}"), obj()),
            (bytes("{ }"), obj()),
            (bytes("[1,2]"), arr(num("1"), num("2"))),
            (bytes(#"{"a":1,"b":[true,null]}"#), obj(("a", num("1")), ("b", arr(.bool(true), .null)))),
            (bytes("\t\r\n {\"a\" : [ 1 , 2 ] ,\n\"b\":{} } \n"), obj(("a", arr(num("1"), num("2"))), ("b", obj()))),
            (bytes(#"{"a":{"a":{"a":[]}}}"#), obj(("a", obj(("a", obj(("a", arr()))))))),
            (bytes(#"[[[[["deep"]]]]]"#), arr(arr(arr(arr(arr(str("deep"))))))),
            // Precomposed and decomposed é are different keys in JSON, not duplicates.
            (bytes("{\"\u{E9}\":1,\"e\u{301}\":2}"), obj(("\u{E9}", num("1")), ("e\u{301}", num("2")))),
            (bytes(#"{"z":1,"a":2,"m":3}"#), obj(("z", num("1")), ("a", num("2")), ("m", num("3")))),
        ]
        for (input, expected) in table {
            let text = String(decoding: input, as: UTF8.self)
            do {
                let parsed = try JSONParser.parse(input)
                XCTAssertEqual(parsed, expected, "input: \(text)")
                // The three entry points must agree.
                XCTAssertEqual(try JSONParser.parse(text), expected, "String input: \(text)")
                let viaRaw = try input.withUnsafeBytes { raw throws(JSONParseError) in try JSONParser.parse(raw) }
                XCTAssertEqual(viaRaw, expected, "raw input: \(text)")
            } catch {
                XCTFail("unexpected \((error as? JSONParseError)?.message ?? "\(error)") for \(text)")
            }
        }
    }

    func testObjectKeepsOrderAndKeyBytes() throws {
        let value = try JSONParser.parse(#"{"z":1,"a":2,"m":3}"#)
        let object = try XCTUnwrap(value.objectValue)
        XCTAssertEqual(object.keys, ["z", "a", "m"])
        XCTAssertEqual(object.count, 3)
        XCTAssertEqual(object["a"], num("2"))
        XCTAssertNil(object["q"])

        let accents = try XCTUnwrap(JSONParser.parse("{\"\u{E9}\":1}").objectValue)
        XCTAssertNotNil(accents["\u{E9}"])
        XCTAssertNil(accents["e\u{301}"], "lookup must compare bytes, not canonical equivalence")
    }

    func testObjectSubscriptSet() {
        var object = JSONObject([("a", num("1")), ("b", num("2")), ("a", num("3"))])
        XCTAssertEqual(object.keys, ["a", "b"], "a repeated key in init replaces in place")
        XCTAssertEqual(object["a"], num("3"))
        object["b"] = str("x")
        object["c"] = .null
        XCTAssertEqual(object.keys, ["a", "b", "c"])
        XCTAssertEqual(object["b"], str("x"))
        XCTAssertEqual(object["c"], .null)
        object["a"] = nil
        XCTAssertEqual(object.keys, ["b", "c"])
        object["zzz"] = nil
        XCTAssertEqual(object.count, 2)
        XCTAssertEqual(JSONValue.object(object).serialized(), #"{"b":"x","c":null}"#)
        XCTAssertEqual(object.members.first, JSONObject.Member(key: "b", value: str("x")))
    }

    func testAccessorsAndTypeNames() throws {
        let value = try JSONParser.parse(#"{"s":"x","n":1,"b":false,"z":null,"a":[],"o":{}}"#)
        let object = try XCTUnwrap(value.objectValue)
        XCTAssertEqual(object["s"]?.stringValue, "x")
        XCTAssertEqual(object["n"]?.numberValue?.int64, 1)
        XCTAssertEqual(object["b"]?.boolValue, false)
        XCTAssertEqual(object["z"]?.isNull, true)
        XCTAssertEqual(object["a"]?.arrayValue, [])
        XCTAssertEqual(object["o"]?.objectValue, JSONObject())
        XCTAssertNil(object["s"]?.numberValue)
        XCTAssertNil(object["n"]?.stringValue)
        XCTAssertNil(object["z"]?.boolValue)
        XCTAssertEqual(object["b"]?.isNull, false)
        XCTAssertEqual(object.members.map(\.value.typeName), ["string", "number", "boolean", "null", "array", "object"])
    }

    // MARK: Numbers

    func testNumberClassification() throws {
        let table: [(text: String, isInteger: Bool, int64: Int64?, double: Double?)] = [
            ("1", true, 1, 1),
            ("1.0", false, nil, 1),
            ("-0", true, 0, -0.0),
            ("0", true, 0, 0),
            ("-12", true, -12, -12),
            ("1e2", false, nil, 100),
            ("1E2", false, nil, 100),
            ("1.50", false, nil, 1.5),
            ("9223372036854775807", true, Int64.max, 9223372036854775808),  // nearest Double is 2^63
            ("-9223372036854775808", true, Int64.min, -9223372036854775808),
            ("9223372036854775808", true, nil, 9223372036854775808),
            ("-9223372036854775809", true, nil, -9223372036854775808),
            ("123456789012345678901234567890", true, nil, 123456789012345677877719597056),
            ("1e30", false, nil, 1e30),
            ("1e400", false, nil, .infinity),
        ]
        for row in table {
            let parsed = try XCTUnwrap(JSONParser.parse(row.text).numberValue, row.text)
            XCTAssertEqual(parsed.text, row.text)
            XCTAssertEqual(parsed.isInteger, row.isInteger, row.text)
            XCTAssertEqual(parsed.int64, row.int64, row.text)
            XCTAssertEqual(parsed.double, row.double, row.text)
        }
        XCTAssertEqual(JSONNumber(Int64(-42)).text, "-42")
        XCTAssertEqual(JSONNumber(Int64.min).int64, Int64.min)
        XCTAssertEqual(JSONNumber(7).text, "7")
        XCTAssertEqual(JSONNumber(text: "1.0"), JSONNumber(text: "1.0"))
        XCTAssertNotEqual(JSONNumber(text: "1.0"), JSONNumber(text: "1"), "numbers compare as written")
        // Unchecked text must never trap, only yield nil.
        for junk in ["", "-", "--1", "+1", "1-", "abc", "1 "] {
            XCTAssertNil(JSONNumber(text: junk).int64, junk)
        }
        XCTAssertEqual(JSONNumber(validating: "-1.5e3")?.text, "-1.5e3")
        for bad in ["", " 1", "1 ", "01", "1.", "[1]", "\"1\"", "NaN", "-"] {
            XCTAssertNil(JSONNumber(validating: bad), bad)
        }
    }
}
