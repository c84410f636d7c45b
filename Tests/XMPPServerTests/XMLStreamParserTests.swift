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
            .stanza(XMLElement(name: "auth", namespace: XMPPNamespace.sasl, attributes: ["mechanism": "PLAIN", "xmlns": XMPPNamespace.sasl],
                               text: "AGEAYg==")),
            .stanza(XMLElement(name: "message", namespace: "jabber:client", attributes: ["id": "1"], children: [
                XMLElement(name: "gcm", namespace: "google:mobile:data", attributes: ["xmlns": "google:mobile:data"],
                           text: #"{"to":"a&b","message_id":"m<1>"}"#)])),
            .stanza(XMLElement(name: "iq", namespace: "jabber:client", attributes: ["type": "get", "id": "p"], children: [
                XMLElement(name: "ping", namespace: "urn:xmpp:ping", attributes: ["xmlns": "urn:xmpp:ping"])])),
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
            ("mismatched tags", nil, { $0 == .notWellFormed("mismatched tag") }),
            ("entity declaration", nil, { $0 == .restrictedXML }),
            ("doctype", nil, { $0 == .restrictedXML }),
            ("comment between stanzas", nil, { $0 == .restrictedXML }),
            ("processing instruction in a stanza", nil, { $0 == .restrictedXML }),
            ("invalid UTF-8", nil, { $0 == .notWellFormed("not well-formed (invalid token)") }),
        ]
        let inputs: [String: [UInt8]] = [
            "mismatched tags": Array((header + "<message><a></b></message>").utf8),
            "entity declaration": Array(("<!DOCTYPE x [<!ENTITY a \"aaaa\">]>" + header).utf8),
            "doctype": Array(("<!DOCTYPE stream>" + header).utf8),
            "comment between stanzas": Array((header + "<message/><!-- hi --><message/>").utf8),
            "processing instruction in a stanza": Array((header + "<message><?foo bar?></message>").utf8),
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
        // The XML declaration before the stream is no processing instruction: clients send it.
        let declared = XMLStreamParser()
        XCTAssertNoThrow(try declared.feed(Array(("<?xml version='1.0'?>" + header + "<message/>").utf8)))
    }

    /// Feeds `input` split at every byte boundary (and byte by byte); the events of every way
    /// of feeding it, which must all be the same, or the error every way ended with.
    func feedSplitEverywhere(_ input: String, file: StaticString = #filePath, line: UInt = #line) -> Result<[XMLStreamEvent], XMLStreamError> {
        let bytes = Array(input.utf8)
        func run(_ chunks: [ArraySlice<UInt8>]) -> Result<[XMLStreamEvent], XMLStreamError> {
            let p = XMLStreamParser()
            var events: [XMLStreamEvent] = []
            do {
                for c in chunks { events += try p.feed(Array(c)) }
                return .success(events)
            } catch {
                // Once broken, it stays broken.
                XCTAssertThrowsError(try p.feed(Array("<iq/>".utf8)), file: file, line: line)
                return .failure(error)
            }
        }
        let whole = run([bytes[...]])
        for cut in 1..<bytes.count {
            XCTAssertEqual(run([bytes[..<cut], bytes[cut...]]), whole, "split at \(cut)", file: file, line: line)
        }
        XCTAssertEqual(run(bytes.indices.map { bytes[$0...$0] }), whole, "byte by byte", file: file, line: line)
        return whole
    }

    let clientHeader = "<stream:stream to='fcm.googleapis.com' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"

    /// Well-formed XML that is not namespace-well-formed (Namespaces in XML 1.0) ends the stream,
    /// and nothing of it comes out as a stanza (`<x:message/>` was taken as a message).
    func testNotNamespaceWellFormedInputIsRefused() {
        let unbound = XMLStreamError.notWellFormed("not namespace-well-formed: unbound prefix")
        let cases: [(String, XMLStreamError)] = [
            ("<x:message/>", unbound),
            ("<message x:a='1'/>", unbound),
            ("<message><body/><x:gcm>{}</x:gcm></message>", unbound),
            // Declared on a sibling, not in scope here.
            ("<message><a xmlns:x='urn:x'/><x:b/></message>", unbound),
            ("<xmlns:message/>", unbound),
            ("<message xmlns:x=''/>", .notWellFormed("not namespace-well-formed: must not undeclare prefix")),
            ("<message xmlns:xml='urn:other'/>",
             .notWellFormed("not namespace-well-formed: reserved prefix (xml) must not be undeclared or bound to another namespace name")),
            ("<message xmlns:xmlns='urn:other'/>", .notWellFormed("not namespace-well-formed: reserved prefix (xmlns) must not be declared or undeclared")),
            ("<message xmlns:p='http://www.w3.org/XML/1998/namespace'/>",
             .notWellFormed("not namespace-well-formed: prefix must not be bound to one of the reserved namespace names")),
            ("<message xmlns='http://www.w3.org/2000/xmlns/'/>",
             .notWellFormed("not namespace-well-formed: prefix must not be bound to one of the reserved namespace names")),
        ]
        for (stanza, error) in cases {
            XCTAssertEqual(feedSplitEverywhere(clientHeader + stanza), .failure(error), stanza)
        }
        // Two colons in a name, or attributes that are the same once their prefixes are resolved:
        // expat reports these as plain syntax errors, answered with the same condition.
        XCTAssertEqual(feedSplitEverywhere(clientHeader + "<a:b:c xmlns:a='urn:a'/>"), .failure(.notWellFormed("not well-formed (invalid token)")))
        XCTAssertEqual(feedSplitEverywhere(clientHeader + "<m xmlns:a='urn:u' xmlns:b='urn:u' a:x='1' b:x='2'/>"),
                       .failure(.notWellFormed("duplicate attribute")))
    }

    /// RFC 6120 4.8.1: the stream header must be in the stream namespace; 4.9.3.10: a content
    /// namespace other than jabber:client is not supported.
    func testStreamHeaderNamespaces() throws {
        let rule = "the stream header must be in the namespace http://etherx.jabber.org/streams"
        let cases: [(String, XMLStreamError)] = [
            ("<stream:stream to='fcm.googleapis.com' xmlns='jabber:client' version='1.0'>", .invalidNamespace(rule + ", its prefix is not declared")),
            ("<stream:stream xmlns:stream='http://etherx.jabber.org/streams/'>", .invalidNamespace(rule + ", not http://etherx.jabber.org/streams/")),
            ("<stream xmlns='jabber:client'>", .invalidNamespace(rule + ", not jabber:client")),
            ("<stream>", .invalidNamespace(rule + ", not none")),
            ("<stream:stream xmlns='foo' xmlns:stream='http://etherx.jabber.org/streams'>",
             .invalidNamespace("the content namespace must be jabber:client, not foo")),
            ("<stream:stream xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams'>",
             .invalidNamespace("the content namespace must be jabber:client, not jabber:server")),
            // Unprefixed, the stream namespace would be the content namespace too (4.8.2: it must not).
            ("<stream xmlns='http://etherx.jabber.org/streams'>",
             .invalidNamespace("the content namespace must be jabber:client, not http://etherx.jabber.org/streams")),
        ]
        for (header, error) in cases {
            XCTAssertEqual(feedSplitEverywhere(header), .failure(error), header)
        }
        // Any prefix for the stream namespace, and no content namespace at all, are taken.
        for header in ["<s:stream xmlns:s='http://etherx.jabber.org/streams'>", "<stream:stream xmlns='' xmlns:stream='http://etherx.jabber.org/streams'>"] {
            XCTAssertEqual(try feedSplitEverywhere(header).get().count, 1, header)
        }
        // The header of a restarted stream is held to the same rules.
        let p = XMLStreamParser()
        _ = try p.feed(Array((clientHeader + "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>").utf8))
        p.reset()
        XCTAssertThrowsError(try p.feed(Array("<stream:stream xmlns='jabber:client'>".utf8))) {
            XCTAssertEqual($0 as? XMLStreamError, .invalidNamespace(rule + ", its prefix is not declared"))
        }
        XCTAssertEqual(XMLStreamError.invalidNamespace("x").streamError.condition, "invalid-namespace")
        XCTAssertEqual(XMLStreamError.notWellFormed("x").streamError.condition, "invalid-xml")
    }

    /// What real clients send keeps working, prefixes and all: names and attributes as written,
    /// each element's namespace resolved.
    func testNamespacedInputThatMustKeepWorking() throws {
        let input = "<?xml version='1.0'?>" + clientHeader.replacingOccurrences(of: "version='1.0'>", with: "version='1.0' xml:lang='en'>")
            + "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AGEAYg==</auth>"
            + #"<message id="1"><data:gcm xmlns:data="google:mobile:data">{"a":1}</data:gcm></message>"#
            + "<message xml:lang='en' xmlns='jabber:client'><gcm xmlns=\"google:mobile:data\">x</gcm></message>"
            + "<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>r</resource></bind></iq>"
            + "<c:presence xmlns:c='jabber:client' xmlns:xml='http://www.w3.org/XML/1998/namespace' xml:lang='de'/>"
            + "</stream:stream>"
        let bind = "urn:ietf:params:xml:ns:xmpp-bind"
        XCTAssertEqual(try feedSplitEverywhere(input).get(), [
            .streamOpen(["to": "fcm.googleapis.com", "xmlns": "jabber:client", "xmlns:stream": XMPPNamespace.streams, "version": "1.0",
                         "xml:lang": "en"]),
            .stanza(XMLElement(name: "auth", namespace: XMPPNamespace.sasl, attributes: ["xmlns": XMPPNamespace.sasl, "mechanism": "PLAIN"],
                               text: "AGEAYg==")),
            .stanza(XMLElement(name: "message", namespace: "jabber:client", attributes: ["id": "1"], children: [
                XMLElement(name: "data:gcm", namespace: "google:mobile:data", attributes: ["xmlns:data": "google:mobile:data"], text: #"{"a":1}"#)])),
            .stanza(XMLElement(name: "message", namespace: "jabber:client", attributes: ["xml:lang": "en", "xmlns": "jabber:client"], children: [
                XMLElement(name: "gcm", namespace: "google:mobile:data", attributes: ["xmlns": "google:mobile:data"], text: "x")])),
            .stanza(XMLElement(name: "iq", namespace: "jabber:client", attributes: ["type": "set", "id": "b"], children: [
                XMLElement(name: "bind", namespace: bind, attributes: ["xmlns": bind], children: [
                    XMLElement(name: "resource", namespace: bind, text: "r")])])),
            .stanza(XMLElement(name: "c:presence", namespace: "jabber:client", attributes: [
                "xmlns:c": "jabber:client", "xmlns:xml": "http://www.w3.org/XML/1998/namespace", "xml:lang": "de"])),
            .streamClose,
        ])
        // A stanza keeps the text it was written as (echoed back in error answers).
        let gcm = XMLElement(name: "data:gcm", namespace: "google:mobile:data", attributes: ["xmlns:data": "google:mobile:data"], text: "{}")
        XCTAssertEqual(gcm.xml, #"<data:gcm xmlns:data="google:mobile:data">{}</data:gcm>"#)
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
        XCTAssertEqual(try q.feed(Array("<message><x:stream xmlns:x='http://etherx.jabber.org/streams'/></message>".utf8)).count, 1)
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
        _ = try p.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#.utf8))
        XCTAssertEqual(try p.feed(Array(("<m>" + String(repeating: "x", count: 500) + "</m>").utf8)).count, 1)
        XCTAssertThrowsError(try p.feed(Array(("<m>" + String(repeating: "x", count: 5000)).utf8))) { e in
            XCTAssertEqual(e as? XMLStreamError, .tooBig(1000))
        }
    }

    /// The limit counts a stanza's raw bytes once, however they arrive, attributes and unfinished
    /// tags included; keepalive whitespace between stanzas counts for no stanza.
    func testStanzaSizeIsCountedInRawBytesOnce() throws {
        let header = Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams">"#.utf8)
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
        XCTAssertThrowsError(try p.feed(Array("<?xml version='1.0' encoding='ISO-8859-1'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams'><m>".utf8) + [0xE9]
                                        + Array("</m>".utf8))) { e in
            guard case .notWellFormed = e as? XMLStreamError else { return XCTFail("\(e)") }
        }
        let q = XMLStreamParser()
        let events = try q.feed(Array("<?xml version='1.0' encoding='UTF-8'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams'><m>é</m>".utf8))
        XCTAssertEqual(events.count, 2)
    }

    func testResetStartsANewStream() throws {
        let p = XMLStreamParser()
        _ = try p.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams"><auth>x</auth>"#.utf8))
        p.reset()
        let events = try p.feed(Array(#"<stream:stream xmlns:stream="http://etherx.jabber.org/streams" id="2"><iq id="b"/>"#.utf8))
        XCTAssertEqual(events, [.streamOpen(["xmlns:stream": "http://etherx.jabber.org/streams", "id": "2"]), .stanza(XMLElement(name: "iq", attributes: ["id": "b"]))])
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
