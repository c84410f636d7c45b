import XCTest
import FCMCore

extension JSONTests {

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
}
