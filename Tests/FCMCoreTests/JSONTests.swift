import XCTest
import FCMCore

// Short builders keep the expectation tables readable.
private func num(_ text: String) -> JSONValue { .number(JSONNumber(text: text)) }
private func str(_ s: String) -> JSONValue { .string(s) }
private func arr(_ elements: JSONValue...) -> JSONValue { .array(elements) }
private func obj(_ members: (String, JSONValue)...) -> JSONValue { .object(JSONObject(members)) }

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// SplitMix64: deterministic, so a fuzz failure can be replayed from its iteration number.
private struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

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

    // MARK: Invalid inputs

    func testInvalidInputs() {
        let E = "Unexpected token END OF FILE at position"
        func ch(_ c: String, _ n: Int) -> String { "Unexpected character (\(c)) at position \(n)." }
        typealias K = JSONParseError.Kind
        let table: [(input: [UInt8], kind: K, offset: Int, message: String)] = [
            // Ending early.
            ([], .unexpectedEnd, 0, "\(E) 0."),
            (bytes("   "), .unexpectedEnd, 3, "\(E) 3."),
            (bytes("["), .unexpectedEnd, 1, "\(E) 1."),
            (bytes("[1,"), .unexpectedEnd, 3, "\(E) 3."),
            (bytes("[1"), .unexpectedEnd, 2, "\(E) 2."),
            (bytes("{"), .unexpectedEnd, 1, "\(E) 1."),
            (bytes(#"{"a""#), .unexpectedEnd, 4, "\(E) 4."),
            (bytes(#"{"a":"#), .unexpectedEnd, 5, "\(E) 5."),
            (bytes(#"{"a":1"#), .unexpectedEnd, 6, "\(E) 6."),
            (bytes(#""abc"#), .unexpectedEnd, 4, "\(E) 4."),
            (bytes(#""abc\"#), .unexpectedEnd, 5, "\(E) 5."),
            (bytes(#""\u12"#), .unexpectedEnd, 5, "\(E) 5."),
            (bytes(#""\ud800"#), .unexpectedEnd, 7, "\(E) 7."),
            (bytes("tru"), .unexpectedEnd, 3, "\(E) 3."),
            (bytes("-"), .unexpectedEnd, 1, "\(E) 1."),
            (bytes("1."), .unexpectedEnd, 2, "\(E) 2."),
            (bytes("1e"), .unexpectedEnd, 2, "\(E) 2."),
            (bytes("1e+"), .unexpectedEnd, 3, "\(E) 3."),
            // Not JSON at all, or JSON5-isms.
            (bytes("[1,]"), .unexpectedCharacter, 3, ch("]", 3)),
            (bytes(#"{"a":1,}"#), .unexpectedCharacter, 7, ch("}", 7)),
            (bytes("{'a':1}"), .unexpectedCharacter, 1, ch("'", 1)),
            (bytes("'a'"), .unexpectedCharacter, 0, ch("'", 0)),
            (bytes("// c\n1"), .unexpectedCharacter, 0, ch("/", 0)),
            (bytes("[1 2]"), .unexpectedCharacter, 3, ch("2", 3)),
            (bytes(#"{"a" 1}"#), .unexpectedCharacter, 5, ch("1", 5)),
            (bytes(#"{a:1}"#), .unexpectedCharacter, 1, ch("a", 1)),
            (bytes(#"{"a":1 "b":2}"#), .unexpectedCharacter, 7, ch("\"", 7)),
            (bytes("[1}"), .unexpectedCharacter, 2, ch("}", 2)),
            (bytes(#"{"a":1]"#), .unexpectedCharacter, 6, ch("]", 6)),
            (bytes("NaN"), .unexpectedCharacter, 0, ch("N", 0)),
            (bytes("Infinity"), .unexpectedCharacter, 0, ch("I", 0)),
            (bytes("+1"), .unexpectedCharacter, 0, ch("+", 0)),
            (bytes(".5"), .unexpectedCharacter, 0, ch(".", 0)),
            (bytes("trux"), .unexpectedCharacter, 3, ch("x", 3)),
            (bytes("True"), .unexpectedCharacter, 0, ch("T", 0)),
            (bytes("nulL"), .unexpectedCharacter, 3, ch("L", 3)),
            (bytes("\u{0}"), .unexpectedCharacter, 0, ch("\\u0000", 0)),
            (bytes("\u{7F}"), .unexpectedCharacter, 0, ch("\\u007F", 0)),
            (bytes("é"), .unexpectedCharacter, 0, ch("é", 0)),
            (bytes("[\u{A0}1]"), .unexpectedCharacter, 1, ch("\\u00A0", 1)),
            (bytes("😀"), .unexpectedCharacter, 0, ch("😀", 0)),
            (bytes("[\u{E000}]"), .unexpectedCharacter, 1, ch("\\uE000", 1)),
            (bytes("\u{E0001}"), .unexpectedCharacter, 0, ch("\\uDB40\\uDC01", 0)),
            (bytes("\u{301}"), .unexpectedCharacter, 0, ch("\\u0301", 0)),
            (bytes("\u{FEFF}1"), .unexpectedCharacter, 0, ch("\\uFEFF", 0)),  // BOM
            ([0xEF, 0xBB, 0xBF, 0x7B, 0x7D], .unexpectedCharacter, 0, ch("\\uFEFF", 0)),  // BOM before {}
            // Numbers.
            (bytes("01"), .invalidNumber, 1, ch("1", 1)),
            (bytes("-01"), .invalidNumber, 2, ch("1", 2)),
            (bytes("[00]"), .invalidNumber, 2, ch("0", 2)),
            (bytes("-Infinity"), .invalidNumber, 1, ch("I", 1)),
            (bytes("- 1"), .invalidNumber, 1, ch(" ", 1)),
            (bytes("[1.]"), .invalidNumber, 3, ch("]", 3)),
            (bytes("1.e5"), .invalidNumber, 2, ch("e", 2)),
            (bytes("1ex"), .invalidNumber, 2, ch("x", 2)),
            (bytes("1e+-1"), .invalidNumber, 3, ch("-", 3)),
            // Strings.
            (bytes(#""\x""#), .invalidEscape, 2, ch("x", 2)),
            (bytes(#""\'""#), .invalidEscape, 2, ch("'", 2)),
            (bytes(#""\U0041""#), .invalidEscape, 2, ch("U", 2)),
            (bytes(#""\u12G4""#), .invalidEscape, 5, ch("G", 5)),
            (bytes(#""\ud800\uZZZZ""#), .invalidEscape, 9, ch("Z", 9)),
            (bytes("\"a\nb\""), .controlCharacterInString, 2, ch("\\u000A", 2)),
            (bytes("\"\t\""), .controlCharacterInString, 1, ch("\\u0009", 1)),
            (bytes("\"0123456789abcdef\u{1F}\""), .controlCharacterInString, 17, ch("\\u001F", 17)),
            (bytes("\"\u{0}\""), .controlCharacterInString, 1, ch("\\u0000", 1)),
            (bytes(#""\ud800""#), .loneSurrogate, 1, "Unpaired surrogate at position 1."),
            (bytes(#""\udc00""#), .loneSurrogate, 1, "Unpaired surrogate at position 1."),
            (bytes(#""\ud800\u0041""#), .loneSurrogate, 1, "Unpaired surrogate at position 1."),
            (bytes(#""\ud800\ud800""#), .loneSurrogate, 1, "Unpaired surrogate at position 1."),
            (bytes(#""\ud800\n""#), .loneSurrogate, 1, "Unpaired surrogate at position 1."),
            (bytes(#""x\udfffx""#), .loneSurrogate, 2, "Unpaired surrogate at position 2."),
            // Duplicate keys, compared after decoding escapes.
            (bytes(#"{"a":1,"a":2}"#), .duplicateKey("a"), 7, #"Duplicate key "a" at position 7."#),
            (bytes(#"{"a":1,"b":{"a":1,"a":2}}"#), .duplicateKey("a"), 18, #"Duplicate key "a" at position 18."#),
            (bytes(#"{"a\"b":1,"a\u0022b":2}"#), .duplicateKey("a\"b"), 10, #"Duplicate key "a\"b" at position 10."#),
            (bytes(#"{"\n":1,"\u000a":2}"#), .duplicateKey("\n"), 8, #"Duplicate key "\n" at position 8."#),
            // Trailing data.
            (bytes("1 2"), .trailingData, 2, ch("2", 2)),
            (bytes("{} x"), .trailingData, 3, ch("x", 3)),
            (bytes("[]]"), .trailingData, 2, ch("]", 2)),
            (bytes(#""a""b""#), .trailingData, 3, ch("\"", 3)),
            (bytes("1.5.3"), .trailingData, 3, ch(".", 3)),
            (bytes("nulll"), .trailingData, 4, ch("l", 4)),
            (bytes("123abc"), .trailingData, 3, ch("a", 3)),
            (bytes("0\u{0}"), .trailingData, 1, ch("\\u0000", 1)),
            (bytes("{}\u{FEFF}"), .trailingData, 2, ch("\\uFEFF", 2)),
            (bytes("1 ü"), .trailingData, 2, ch("ü", 2)),
            // Invalid UTF-8, reported at the first byte of the ill-formed sequence.
            ([0x22, 0xC0, 0x80, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xC0 at position 1."),
            ([0x22, 0xC1, 0xBF, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xC1 at position 1."),
            ([0x22, 0xE0, 0x80, 0xAF, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xE0 at position 1."),
            ([0x22, 0xF0, 0x8F, 0xBF, 0xBF, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xF0 at position 1."),
            ([0x22, 0x61, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, 2, "Invalid UTF-8 byte 0xED at position 2."),
            ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xF4 at position 1."),
            ([0x22, 0xF5, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xF5 at position 1."),
            ([0x22, 0xFF, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xFF at position 1."),
            ([0x22, 0x80, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0x80 at position 1."),
            ([0x22, 0xE2, 0x82], .invalidUTF8, 1, "Invalid UTF-8 byte 0xE2 at position 1."),
            ([0x22, 0xE2, 0x82, 0x22], .invalidUTF8, 1, "Invalid UTF-8 byte 0xE2 at position 1."),
            ([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], .invalidUTF8, 3, "Invalid UTF-8 byte 0xC3 at position 3."),
            ([0xF5], .invalidUTF8, 0, "Invalid UTF-8 byte 0xF5 at position 0."),
            ([0x5B, 0x31, 0x2C, 0xFF, 0x5D], .invalidUTF8, 3, "Invalid UTF-8 byte 0xFF at position 3."),
            ([0x31, 0x20, 0xC0, 0x80], .invalidUTF8, 2, "Invalid UTF-8 byte 0xC0 at position 2."),
            ([0x22, 0x5C, 0xE2, 0x82], .invalidUTF8, 2, "Invalid UTF-8 byte 0xE2 at position 2."),
            // Depth.
            (bytes(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)), .tooDeep, 64,
             "Nesting deeper than 64 at position 64."),
            (bytes(String(repeating: #"{"a":"#, count: 65)), .tooDeep, 320,
             "Nesting deeper than 64 at position 320."),
        ]
        for (input, kind, offset, message) in table {
            let text = String(decoding: input, as: UTF8.self).debugDescription
            do {
                let value = try JSONParser.parse(input)
                XCTFail("\(text) parsed as \(value.serialized())")
            } catch {
                XCTAssertEqual(error.kind, kind, "kind for \(text)")
                XCTAssertEqual(error.offset, offset, "offset for \(text)")
                XCTAssertEqual(error.message, message, "message for \(text)")
            }
        }
    }

    func testDepthLimit() throws {
        func nested(_ depth: Int) -> String {
            String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        }
        XCTAssertNoThrow(try JSONParser.parse(nested(64)))
        XCTAssertNoThrow(try JSONParser.parse(nested(3), maxDepth: 3))
        XCTAssertThrowsError(try JSONParser.parse(nested(4), maxDepth: 3)) { error in
            XCTAssertEqual((error as? JSONParseError)?.kind, .tooDeep)
            XCTAssertEqual((error as? JSONParseError)?.offset, 3)
            XCTAssertEqual((error as? JSONParseError)?.message, "Nesting deeper than 3 at position 3.")
        }
        XCTAssertThrowsError(try JSONParser.parse(#"{"a":{"b":1}}"#, maxDepth: 1)) { error in
            XCTAssertEqual((error as? JSONParseError)?.kind, .tooDeep)
            XCTAssertEqual((error as? JSONParseError)?.offset, 5)
        }
        // maxDepth 0 still allows scalars but no containers, even empty ones.
        XCTAssertEqual(try JSONParser.parse("7", maxDepth: 0), num("7"))
        XCTAssertThrowsError(try JSONParser.parse("[]", maxDepth: 0))
        XCTAssertThrowsError(try JSONParser.parse("{}", maxDepth: -5))
        // The parser is iterative, so a generous limit does not risk the stack while parsing.
        let deep = try JSONParser.parse(nested(2_000), maxDepth: 2_000)
        var level = 0
        var cursor = deep
        while case .array(let inner) = cursor, let first = inner.first {
            cursor = first
            level += 1
        }
        XCTAssertEqual(level, 1_999)
    }

    func testLargeObjectDuplicateDetection() {
        // Past the linear-scan limit the parser switches to a hash set; both paths must agree.
        var members = (0..<100).map { "\"k\($0)\":\($0)" }
        XCTAssertEqual(try JSONParser.parse("{" + members.joined(separator: ",") + "}").objectValue?.count, 100)
        members.append("\"k\\u00357\":0")  // decodes to "k57"
        let text = "{" + members.joined(separator: ",") + "}"
        XCTAssertThrowsError(try JSONParser.parse(text)) { error in
            XCTAssertEqual((error as? JSONParseError)?.kind, .duplicateKey("k57"))
        }
        // Distinct-but-canonically-equivalent keys stay distinct in the hashed path too.
        var accented = (0..<20).map { "\"k\($0)\":0" }
        accented.append("\"\u{E9}\":1")
        accented.append("\"e\u{301}\":2")
        XCTAssertEqual(try JSONParser.parse("{" + accented.joined(separator: ",") + "}").objectValue?.count, 22)
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

    // MARK: Serialization

    func testRoundTrips() throws {
        let documents = [
            "null", "true", "false", "0", "-0", "1.50", "1E+2", "1e400", "123456789012345678901234567890",
            #""""#, #""plain""#, #""\"\\\/\b\f\n\r\t\u0001\u001f é 😀""#, #""\u0000""#,
            "[]", "{}", "[[],{},[{}]]",
            #"{"to":"tok","priority":"high","time_to_live":3600,"data":{"score":"3x1","id":"42"}}"#,
            " { \"z\" : [ 1 , -2.5e-3 , true , false , null , \"s\" ] , \"a\" : { } } ",
        ]
        for document in documents {
            let first = try JSONParser.parse(document)
            let text = first.serialized()
            let second = try JSONParser.parse(text)
            XCTAssertEqual(first, second, document)
            XCTAssertEqual(second.serialized(), text, "serialization is stable for \(document)")
        }
        let compact = try JSONParser.parse(" { \"b\" : [ 1 , 2 ] , \"a\" : \"x/y\" } ").serialized()
        XCTAssertEqual(compact, #"{"b":[1,2],"a":"x/y"}"#)
        XCTAssertEqual(try JSONParser.parse(#""\/\u00e9\u0001""#).serialized(), "\"/é\\u0001\"")
    }

    func testStringEscaping() {
        var out: [UInt8] = []
        appendJSONString("q\"b\\n\nr\rt\tb\u{8}f\u{C}c\u{1}\u{1F}d\u{7F}/😀é", to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self),
                       "\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\fc\\u0001\\u001Fd\u{7F}/😀é\"")
        out.removeAll()
        appendJSONString("", to: &out)
        XCTAssertEqual(out, Array("\"\"".utf8))
        out.removeAll()
        appendJSONString("\u{0}", to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), #""\u0000""#)
        // Long non-small strings take the same path as short ones.
        let long = String(repeating: "ab\"", count: 40)
        out.removeAll()
        appendJSONString(long, to: &out)
        XCTAssertEqual(try JSONParser.parse(out), .string(long))
        // U+FFFE and U+FFFF are escaped (XML forbids them raw; this JSON goes into stanzas);
        // other characters led by 0xEF stay raw, also at the very end of the string.
        out.removeAll()
        appendJSONString("a\u{FFFE}b\u{FFFF}\u{FFFD}\u{F8FF}\u{FFFF}", to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "\"a\\uFFFEb\\uFFFF\u{FFFD}\u{F8FF}\\uFFFF\"")
        XCTAssertEqual(try JSONParser.parse(out), .string("a\u{FFFE}b\u{FFFF}\u{FFFD}\u{F8FF}\u{FFFF}"))
    }

    // MARK: Writer

    func testWriterCommas() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("a"); writer.value(1)
        writer.key("b"); writer.beginArray(); writer.value("x"); writer.value("y"); writer.endArray()
        writer.endObject()
        XCTAssertEqual(writer.string, #"{"a":1,"b":["x","y"]}"#)

        var nested = JSONWriter(capacity: 16)
        nested.beginArray()
        nested.beginObject(); nested.endObject()
        nested.beginArray(); nested.endArray()
        nested.beginObject()
        nested.key("n"); nested.null()
        nested.key("s"); nested.value(nil as String?)
        nested.key("t"); nested.value(true)
        nested.key("f"); nested.value(false)
        nested.key("i"); nested.value(Int64.min)
        nested.key("j"); nested.value(Int.max)
        nested.key("z"); nested.value(0)
        nested.key("r"); nested.raw(#"{"pre":[1]}"#)
        nested.key("v"); nested.value(obj(("k", arr(num("1.5"), .null))))
        nested.key("o"); nested.beginObject(); nested.key("p"); nested.beginArray(); nested.endArray(); nested.endObject()
        nested.endObject()
        nested.value(-7)
        nested.raw("2")
        nested.endArray()
        let expected = "[{},[],{\"n\":null,\"s\":null,\"t\":true,\"f\":false,\"i\":-9223372036854775808,"
            + "\"j\":9223372036854775807,\"z\":0,\"r\":{\"pre\":[1]},\"v\":{\"k\":[1.5,null]},\"o\":{\"p\":[]}},-7,2]"
        XCTAssertEqual(nested.string, expected)
        XCTAssertEqual(nested.bytes, Array(expected.utf8))
        XCTAssertNoThrow(try JSONParser.parse(nested.bytes))
    }

    func testWriterEscaping() throws {
        let tricky = "say \"hi\" \\ back\nslash\u{1} 😀"
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("k\"\n")
        writer.value(tricky)
        writer.endObject()
        XCTAssertEqual(writer.string, "{\"k\\\"\\n\":\"say \\\"hi\\\" \\\\ back\\nslash\\u0001 😀\"}")
        let parsed = try JSONParser.parse(writer.bytes)
        XCTAssertEqual(parsed.objectValue?["k\"\n"], .string(tricky))
    }

    // MARK: Never crash

    func testRandomInputsNeverCrash() {
        var rng = SplitMix64(state: 0x5EED)
        let seeds: [[UInt8]] = [
            #"{"to":"abc:DEF-123_xyz","priority":"high","time_to_live":3600,"data":{"a":"1"},"notification":{"title":"Hello","body":"World"}}"#,
            #"[1,-2.5e+3,true,false,null,"s\u00e9\ud83d\ude00\n",{},[],{"k":[{"x":0}]}]"#,
            "\"é€😀 long string that crosses several eight byte words\"",
            "-0.0e-0",
        ].map { Array($0.utf8) }
        // Bytes that matter to the grammar show up more often than pure noise would give them.
        let interesting: [UInt8] = Array(#"{}[]:,"\/ubfnrt0123456789-+.eEaAlsx "#.utf8)
            + [0x00, 0x09, 0x0A, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]
        func randomByte() -> UInt8 {
            rng.below(3) == 0 ? UInt8(truncatingIfNeeded: rng.next()) : interesting[rng.below(interesting.count)]
        }
        var accepted = 0
        var rejected = 0
        func check(_ input: [UInt8]) {
            do {
                let value = try JSONParser.parse(input, maxDepth: 8)
                accepted += 1
                // Whatever is accepted must survive a round trip unchanged.
                XCTAssertEqual(try JSONParser.parse(value.serialized(), maxDepth: 8), value)
            } catch {
                rejected += 1
                XCTAssertTrue((0...input.count).contains(error.offset), "offset \(error.offset) out of range")
                XCTAssertFalse(error.message.isEmpty)
            }
        }
        for _ in 0..<10_000 {
            check((0..<rng.below(40)).map { _ in randomByte() })
        }
        for _ in 0..<20_000 {
            var input = seeds[rng.below(seeds.count)]
            for _ in 0..<(1 + rng.below(3)) {
                let position = rng.below(input.count + 1)
                switch rng.below(4) {
                case 0: input.insert(randomByte(), at: position)
                case 1 where position < input.count: input.remove(at: position)
                case 2 where position < input.count: input[position] = randomByte()
                default: input = Array(input[..<position])
                }
            }
            check(input)
        }
        XCTAssertGreaterThan(accepted, 0)
        XCTAssertGreaterThan(rejected, 0)
    }
}
