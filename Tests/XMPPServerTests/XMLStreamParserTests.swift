import XCTest

@testable import XMPPServer

/// The stream parser on bytes split anywhere, and on hostile input.
final class XMLStreamParserTests: XCTestCase {
    let stream = """
        <stream:stream to="fcm.googleapis.com" version="1.0" xmlns="jabber:client" xmlns:stream="http://etherx.jabber.org/streams">
        <auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">AGEAYg==</auth> \n <message id="1"><gcm xmlns="google:mobile:data">{"to":"a&amp;b","message_id":"m&lt;1&gt;"}</gcm></message>
        <iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq></stream:stream>
        """

    func expected() -> [XMLStreamEvent] {
        [
            .streamOpen(["to": "fcm.googleapis.com", "version": "1.0", "xmlns": "jabber:client",
                         "xmlns:stream": "http://etherx.jabber.org/streams"]),
            .stanza(XMLElement(name: "auth", attributes: ["mechanism": "PLAIN", "xmlns": "urn:ietf:params:xml:ns:xmpp-sasl"], text: "AGEAYg==")),
            .stanza(XMLElement(name: "message", attributes: ["id": "1"], children: [
                XMLElement(name: "gcm", attributes: ["xmlns": "google:mobile:data"], text: #"{"to":"a&b","message_id":"m<1>"}"#)])),
            .stanza(XMLElement(name: "iq", attributes: ["type": "get", "id": "p"], children: [
                XMLElement(name: "ping", attributes: ["xmlns": "urn:xmpp:ping"])])),
            .streamClose,
        ]
    }

    func testSplitAtEveryByteBoundary() throws {
        let bytes = Array(stream.utf8)
        XCTAssertEqual(try XMLStreamParser().feed(bytes), expected(), "in one piece")
        for cut in 1..<bytes.count {
            let p = XMLStreamParser()
            let events = try p.feed(Array(bytes[..<cut])) + p.feed(Array(bytes[cut...]))
            XCTAssertEqual(events, expected(), "split at \(cut)")
        }
        // Byte by byte.
        let p = XMLStreamParser()
        var events: [XMLStreamEvent] = []
        for b in bytes { events += try p.feed([b]) }
        XCTAssertEqual(events, expected())
    }

    func testMalformedAndHostileInput() {
        let header = #"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#
        let cases: [(String, [UInt8]?, (XMLStreamError) -> Bool)] = [
            ("mismatched tags", nil, { if case .invalidXML = $0 { return true }; return false }),
            ("entity declaration", nil, { $0 == .restrictedXML }),
            ("doctype", nil, { $0 == .restrictedXML }),
            ("invalid UTF-8", nil, { if case .invalidXML = $0 { return true }; return false }),
        ]
        let inputs: [String: [UInt8]] = [
            "mismatched tags": Array((header + "<message><a></b></message>").utf8),
            "entity declaration": Array(("<!DOCTYPE x [<!ENTITY a \"aaaa\">]>" + header).utf8),
            "doctype": Array(("<!DOCTYPE stream>" + header).utf8),
            "invalid UTF-8": Array((header + "<message>").utf8) + [0xFF, 0xFE] + Array("</message>".utf8),
        ]
        for (name, _, check) in cases {
            let p = XMLStreamParser()
            XCTAssertThrowsError(try p.feed(inputs[name]!), name) { e in
                XCTAssertTrue(check(e as! XMLStreamError), "\(name): \(e)")
            }
            // Once broken, it stays broken.
            XCTAssertThrowsError(try p.feed(Array("<x/>".utf8)))
        }
        _ = cases.map { $0.1 }
    }

    func testAStreamHeaderInsideTheStreamIsRefused() throws {
        let p = XMLStreamParser()
        XCTAssertEqual(try p.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#.utf8)).count, 1)
        XCTAssertThrowsError(try p.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams"><message/>"#.utf8))) {
            XCTAssertEqual($0 as? XMLStreamError, .invalidXML("a stream header in the middle of a stream"))
        }
        // Deeper down, an element of that name is only an element.
        let q = XMLStreamParser()
        _ = try q.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#.utf8))
        XCTAssertEqual(try q.feed(Array("<message><x:stream/></message>".utf8)).count, 1)
    }

    func testPauseAfterAStanzaLeavesTheRestForTheRestartedStream() throws {
        let header = #"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#
        let all = Array((header + "<auth>AA==</auth>" + header + #"<iq id="b"/>"#).utf8)
        for cut in [all.count, 70, 75, 80] {  // the pause inside the first chunk, or after it
            let p = XMLStreamParser()
            p.pauseAfter = ["auth"]
            var events = try p.feed(Array(all[0..<min(cut, all.count)]))
            var rest = p.takeLeftover() + Array(all[min(cut, all.count)...])
            if !events.contains(where: { if case .stanza(let s) = $0 { return s.name == "auth" } else { return false } }) {
                events += try p.feed(rest)
                rest = p.takeLeftover()
            }
            XCTAssertEqual(events.count, 2, "cut \(cut)")
            XCTAssertEqual(events.last, .stanza(XMLElement(name: "auth", text: "AA==")), "cut \(cut)")
            p.reset()
            p.pauseAfter = []
            let after = try p.feed(rest)
            XCTAssertEqual(after.count, 2, "cut \(cut)")
            XCTAssertEqual(after.last, .stanza(XMLElement(name: "iq", attributes: ["id": "b"])), "cut \(cut)")
        }
        // Paused and not restarted: nothing more is taken.
        let p = XMLStreamParser()
        p.pauseAfter = ["auth"]
        _ = try p.feed(Array((header + "<auth/>").utf8))
        XCTAssertThrowsError(try p.feed(Array("<iq/>".utf8)))
    }

    func testStanzaSizeLimit() throws {
        let p = XMLStreamParser(maxStanzaBytes: 1000)
        _ = try p.feed(Array(#"<stream:stream xmlns:stream="s">"#.utf8))
        XCTAssertEqual(try p.feed(Array(("<m>" + String(repeating: "x", count: 500) + "</m>").utf8)).count, 1)
        XCTAssertThrowsError(try p.feed(Array(("<m>" + String(repeating: "x", count: 5000)).utf8))) { e in
            XCTAssertEqual(e as? XMLStreamError, .tooBig(1000))
        }
    }

    /// The limit counts a stanza's raw bytes once, however they arrive, attributes and unfinished
    /// tags included; keepalive whitespace between stanzas counts for no stanza.
    func testStanzaSizeIsCountedInRawBytesOnce() throws {
        let header = Array(#"<stream:stream xmlns:stream="s">"#.utf8)
        // 900 bytes in one stanza, fed a byte at a time, then in two halves: within 1000.
        let stanza = Array(("<m>" + String(repeating: "x", count: 893) + "</m>").utf8)
        XCTAssertEqual(stanza.count, 900)
        let p = XMLStreamParser(maxStanzaBytes: 1000)
        _ = try p.feed(header)
        var got = 0
        for b in stanza { got += try p.feed([b]).count }
        XCTAssertEqual(got, 1)
        XCTAssertEqual(try p.feed(Array(stanza[..<450])).count + p.feed(Array(stanza[450...])).count, 1)
        // Whitespace keepalives between stanzas, far more than the limit in all.
        for _ in 0..<50 { XCTAssertEqual(try p.feed(Array(String(repeating: " ", count: 100).utf8)), []) }
        XCTAssertEqual(try p.feed(stanza).count, 1)

        // A start tag that never ends, growing by attribute bytes only: refused once past the
        // limit, not buffered without end.
        let q = XMLStreamParser(maxStanzaBytes: 1000)
        _ = try q.feed(header)
        XCTAssertEqual(try q.feed(Array("<message id='".utf8)), [])
        var refused = false
        for _ in 0..<100 {
            do { _ = try q.feed(Array(String(repeating: "a", count: 100).utf8)) } catch {
                XCTAssertEqual(error, .tooBig(1000))
                refused = true
                break
            }
        }
        XCTAssertTrue(refused)
        // One chunk holding a whole oversized stanza is refused too.
        let r = XMLStreamParser(maxStanzaBytes: 1000)
        _ = try r.feed(header)
        XCTAssertThrowsError(try r.feed(Array(("<m a='" + String(repeating: "b", count: 2000) + "'/>").utf8))) { e in
            XCTAssertEqual(e as? XMLStreamError, .tooBig(1000))
        }
    }

    /// XMPP is UTF-8: a stream declaring another encoding does not make other bytes valid.
    func testOnlyUTF8() throws {
        let p = XMLStreamParser()
        XCTAssertThrowsError(try p.feed(Array("<?xml version='1.0' encoding='ISO-8859-1'?><stream:stream xmlns:stream='s'><m>".utf8) + [0xE9]
                                        + Array("</m>".utf8))) { e in
            guard case .invalidXML = e as? XMLStreamError else { return XCTFail("\(e)") }
        }
        let q = XMLStreamParser()
        let events = try q.feed(Array("<?xml version='1.0' encoding='UTF-8'?><stream:stream xmlns:stream='s'><m>é</m>".utf8))
        XCTAssertEqual(events.count, 2)
    }

    func testResetStartsANewStream() throws {
        let p = XMLStreamParser()
        _ = try p.feed(Array(#"<stream:stream xmlns:stream="s"><auth>x</auth>"#.utf8))
        p.reset()
        let events = try p.feed(Array(#"<stream:stream xmlns:stream="s" id="2"><iq id="b"/>"#.utf8))
        XCTAssertEqual(events, [.streamOpen(["xmlns:stream": "s", "id": "2"]), .stanza(XMLElement(name: "iq", attributes: ["id": "b"]))])
    }

    func testBase64AndEscaping() {
        XCTAssertEqual(Base64.decode("AGEAYg=="), [0, 97, 0, 98])
        XCTAssertEqual(Base64.encode([0, 97, 0, 98]), "AGEAYg==")
        for n in 0..<20 {
            let bytes = (0..<n).map { UInt8(($0 * 37 + 11) % 256) }
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes)
        }
        XCTAssertNil(Base64.decode("A*=="))
        XCTAssertNil(Base64.decode("AB=C"))
        XCTAssertEqual(xmlEscape(#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;")
        XCTAssertEqual(xmlEscapeText(#"{"a":"<&>"}"#), #"{"a":"&lt;&amp;&gt;"}"#)
        XCTAssertEqual(xmlEscapeText("plain"), "plain")
    }
}
