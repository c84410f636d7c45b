import XCTest
import FCMCore

extension JSONTests {

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

    func testLiteralKeysWriteWhatEscapedKeysWrite() {
        var a = JSONWriter()
        var b = JSONWriter()
        a.beginObject(); a.key("multicast_id"); a.value(1); a.key("results"); a.beginArray(); a.beginObject()
        a.key("message_id"); a.value("0:1"); a.endObject(); a.endArray(); a.endObject()
        b.beginObject(); b.key(literal: "multicast_id"); b.value(1); b.key(literal: "results"); b.beginArray(); b.beginObject()
        b.key(literal: "message_id"); b.value("0:1"); b.endObject(); b.endArray(); b.endObject()
        XCTAssertEqual(b.string, a.string)
        XCTAssertEqual(b.string, #"{"multicast_id":1,"results":[{"message_id":"0:1"}]}"#)
    }
}

