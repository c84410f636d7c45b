import FCMCore
import XCTest

/// `JSONParser.compactObject` against the parser and the writer: whatever the one pass takes,
/// the parser accepts as an object, and the pass's text is byte for byte the writer's for it;
/// the probe agrees with a lookup in the tree. Shapes the pass leaves to the parser are nil.
final class JSONParserCompactTests: XCTestCase {
    /// Checks the invariant on `text`; returns whether the pass took it.
    @discardableResult
    private func agree(_ text: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> Bool {
        guard let fast = JSONParser.compactObject(text, probe: ("aps", "alert")) else { return false }
        let shown = String(decoding: text, as: UTF8.self)
        guard let parsed = try? JSONParser.parse(text), let object = parsed.objectValue else {
            XCTFail("taken by the pass but not an object to the parser: \(shown)", file: file, line: line)
            return true
        }
        var written: [UInt8] = []
        appendJSONValue(.object(object), to: &written)
        XCTAssertEqual(String(decoding: fast.text, as: UTF8.self), String(decoding: written, as: UTF8.self), shown, file: file, line: line)
        XCTAssertEqual(fast.text, written, shown, file: file, line: line)
        XCTAssertEqual(fast.hasProbe, object["aps"]?.objectValue?["alert"] != nil, shown, file: file, line: line)
        return true
    }

    private func agree(_ text: String, taken: Bool, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(agree(Array(text.utf8), file: file, line: line), taken, text, file: file, line: line)
    }

    func testCommonShapesAreTakenAndWrittenAsTheWriterWould() {
        for text in [
            #"{"aps":{"alert":{"title":"Score","body":"5x1"}},"time":"15:10"}"#,
            #"{}"#, #" { } "#, "{\"a\":{},\"b\":[],\"c\":[{}],\"d\":[[]]}",
            "{\n  \"aps\" : {\n\t\"alert\" : \"hi\",\r\n \"badge\": 3 },\n \"x\" : [ 1 , -0.5e+10, 0, 2E3, true, false, null ] }\n",
            #"{"aps":{"alert":null}}"#, #"{"aps":{"badge":1,"alert":"late"}}"#, #"{"aps":"not an object","alert":1}"#,
            #"{"aps":{"x":{"alert":"deeper"}}}"#, #"{"x":{"aps":{"alert":"not at the top"}}}"#, #"{"aps":[{"alert":1}]}"#,
            #"{"s":"quote \" backslash \\ nl \n cr \r tab \t bs \b ff \f"}"#,
            #"{"é":"ünïcödé ✓ 😀","k":"中文"}"#,
            #"{"a":{"k":1},"b":{"k":2},"k":3}"#,
            #"{"n":[-0,0.0,1.25,1e5,1E-5,-12.5e+3,123456789012345678901234567890]}"#,
            "{\"d\":" + String(repeating: "[", count: 31) + String(repeating: "]", count: 31) + "}",
            "{" + (0..<64).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}",
        ] {
            agree(text, taken: true)
        }
        // The probe: aps.alert, at those two levels only.
        let probe = { (t: String) in JSONParser.compactObject(Array(t.utf8), probe: ("aps", "alert"))?.hasProbe }
        XCTAssertEqual(probe(#"{"aps":{"alert":null}}"#), true)
        XCTAssertEqual(probe(#"{"aps":{"badge":1,"alert":"late"}}"#), true)
        XCTAssertEqual(probe(#"{"aps":{"x":{"alert":1}}}"#), false)
        XCTAssertEqual(probe(#"{"x":{"aps":{"alert":1}}}"#), false)
        XCTAssertEqual(probe(#"{"aps":"s","alert":1}"#), false)
        XCTAssertEqual(probe(#"{"apss":{"alert":1},"ap":{"alert":1}}"#), false)
        XCTAssertEqual(probe(#"{"b":{"alert":1},"aps":{"alerts":1}}"#), false)
        // Nothing to drop: the body's own bytes.
        let compact = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        XCTAssertEqual(JSONParser.compactObject(compact, probe: ("aps", "alert"))?.text, compact)
    }

    func testShapesLeftToTheParser() {
        for text in [
            // Not objects.
            "[1]", #""s""#, "1", "true", "null", "", "   ",
            // Escapes the writer does not write back as they came, keys with escapes, noncharacters.
            #"{"s":"a\/b"}"#, #"{"s":"\u00e9"}"#, #"{"s":"\uD83D\uDE00"}"#, #"{"k\"":1}"#, #"{"k\n":1}"#,
            "{\"s\":\"\u{FFFE}\"}", "{\"s\":\"\u{FFFF}\"}", "{\"\u{FFFF}\":1}",
            // Deeper than the pass goes, more keys open than it keeps.
            "{\"d\":" + String(repeating: "[", count: 32) + String(repeating: "]", count: 32) + "}",
            "{" + (0..<65).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}",
            // Malformed: the parser says why.
            "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1 \"b\":2}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "{\"a\":1e}",
            "{\"a\":tru}", "{\"a\":nul}", "{\"a\":\"x}", "{\"a\":\"\u{01}\"}", "{\"a\":1}}", "{\"a\":1} x", "{\"a\":[1,]}",
            "{\"a\":1,\"a\":2}", "{\"o\":{\"k\":1,\"k\":2}}", "{\"a\":\"\\x\"}", "{'a':1}", "{\"a\":[}", "{\"a\":{]}",
        ] {
            agree(text, taken: false)
        }
        // Malformed UTF-8: an overlong, a surrogate, a lone continuation byte, a cut sequence.
        for bad: [UInt8] in [[0xC0, 0xAF], [0xED, 0xA0, 0x80], [0x80], [0xE2, 0x9C]] {
            XCTAssertFalse(agree(Array(#"{"a":""#.utf8) + bad + Array(#""}"#.utf8)))
        }
    }

    /// Random documents, with random whitespace and strings drawn from the bytes that matter,
    /// and random one-byte damage to each: the invariant holds on all; the clean ones without
    /// the parser-only shapes are taken.
    func testRandomDocumentsAndTheirDamage() {
        var rng = SplitMix64(state: 0x5EED_0F_C0DE)
        var taken = 0, simples = 0
        for _ in 0..<3000 {
            var doc: [UInt8] = []
            var simple = true
            writeObject(&doc, depth: 0, rng: &rng, simple: &simple)
            let took = agree(doc)
            if took { taken += 1 }
            if simple {
                simples += 1
                XCTAssertTrue(took, String(decoding: doc, as: UTF8.self))
            }
            var damaged = doc
            let at = Int(rng.next() % UInt64(damaged.count))
            switch rng.next() % 3 {
            case 0: damaged.remove(at: at)
            case 1:
                let significant = Array(#"{}[],:"\ 0e-.tfn"#.utf8)
                damaged.insert(significant[Int(rng.next() % UInt64(significant.count))], at: at)
            default: damaged[at] = UInt8(truncatingIfNeeded: rng.next())
            }
            agree(damaged)
        }
        XCTAssertGreaterThan(simples, 600, "enough documents of the common shape")
        XCTAssertEqual(taken, simples, "taken: exactly the documents without a parser-only shape")
    }

    private func space(_ out: inout [UInt8], _ rng: inout SplitMix64) {
        let ws: [UInt8] = [0x20, 0x0A, 0x0D, 0x09]
        for _ in 0..<(rng.next() % 4 == 0 ? Int(rng.next() % 3) : 0) { out.append(ws[Int(rng.next() % 4)]) }
    }

    private func writeString(_ out: inout [UInt8], key: Bool, rng: inout SplitMix64, simple: inout Bool) {
        let pieces: [[UInt8]] = [
            Array("a".utf8), Array("aps".utf8), Array("alert".utf8), Array("é".utf8), Array("😀".utf8), Array(" ".utf8),
            Array(#"\""#.utf8), Array(#"\\"#.utf8), Array(#"\n"#.utf8), Array(#"\/"#.utf8), Array(#"\u0041"#.utf8),
            Array("\u{FFFE}".utf8), Array("x".utf8), Array("1".utf8),
        ]
        out.append(UInt8(ascii: "\""))
        for _ in 0..<Int(rng.next() % 4) {
            let p = pieces[Int(rng.next() % UInt64(pieces.count))]
            if p.first == UInt8(ascii: "\\") && (key || p[1] == UInt8(ascii: "/") || p[1] == UInt8(ascii: "u")) { simple = false }
            if p.first == 0xEF { simple = false }
            out += p
        }
        out.append(UInt8(ascii: "\""))
    }

    private func writeValue(_ out: inout [UInt8], depth: Int, rng: inout SplitMix64, simple: inout Bool) {
        space(&out, &rng)
        switch rng.next() % (depth > 4 ? 5 : 7) {
        case 0: writeString(&out, key: false, rng: &rng, simple: &simple)
        case 1: out += Array(["0", "-1", "2.5", "1e3", "-0.0E-2", "12"][Int(rng.next() % 6)].utf8)
        case 2: out += Array(["true", "false", "null"][Int(rng.next() % 3)].utf8)
        case 3, 4: writeString(&out, key: false, rng: &rng, simple: &simple)
        case 5: writeObject(&out, depth: depth + 1, rng: &rng, simple: &simple)
        default:
            out.append(UInt8(ascii: "["))
            let n = Int(rng.next() % 4)
            for i in 0..<n {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeValue(&out, depth: depth + 1, rng: &rng, simple: &simple)
            }
            space(&out, &rng)
            out.append(UInt8(ascii: "]"))
        }
        space(&out, &rng)
    }

    private func writeObject(_ out: inout [UInt8], depth: Int, rng: inout SplitMix64, simple: inout Bool) {
        out.append(UInt8(ascii: "{"))
        var keys = Set<[UInt8]>()
        for i in 0..<Int(rng.next() % 5) {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            space(&out, &rng)
            var key: [UInt8] = []
            writeString(&key, key: true, rng: &rng, simple: &simple)
            // A duplicate makes the document one the parser refuses: allowed, but not "simple".
            if !keys.insert(key).inserted { simple = false }
            out += key
            space(&out, &rng)
            out.append(UInt8(ascii: ":"))
            writeValue(&out, depth: depth, rng: &rng, simple: &simple)
        }
        space(&out, &rng)
        out.append(UInt8(ascii: "}"))
    }
}
