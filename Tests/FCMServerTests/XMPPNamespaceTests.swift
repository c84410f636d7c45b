import FCMServer
import FCMCore
import FCMTesting
import Foundation
import XCTest
import XMPPServer

/// XML namespaces on the XMPP port, through a real socket (RFC 6120 4.8, 11.3): input that is not
/// namespace-well-formed, a stream header outside the stream namespace, first-level elements in
/// a namespace the server does not understand. Each ends its own stream with the stream error
/// RFC 6120 4.9.3 names for it; other connections go on.
final class XMPPNamespaceTests: ServerTestCase {
    var xmppPort: Int { server.app.xmppPort }

    /// The stream error and stream end the server sends for `condition`.
    func streamError(_ condition: String, _ text: String) -> String {
        let ns = "urn:ietf:params:xml:ns:xmpp-streams"
        return #"<stream:error><\#(condition) xmlns="\#(ns)"/><text xmlns="\#(ns)">\#(xmlEscape(text))</text></stream:error></stream:stream>"#
    }

    /// Waits for the end of `c`'s stream, then for the socket to close; what it received then.
    func closedStream(_ c: XMPPTestClient, file: StaticString = #filePath, line: UInt = #line) -> String {
        XCTAssertTrue(c.waitForClose(), file: file, line: line)
        // The connection itself is gone too, not just the stream.
        XCTAssertThrowsError(try c.next(timeout: 5), file: file, line: line)
        return String(decoding: c.received, as: UTF8.self)
    }

    func testAStreamHeaderOutsideTheStreamNamespaceIsRefused() throws {
        let healthy = try XMPPTestClient(port: xmppPort)
        try healthy.login(user: "111", password: "key-111")
        let rule = "the stream header must be in the namespace http://etherx.jabber.org/streams"
        let cases = [
            ("<stream:stream to='fcm.googleapis.com' version='1.0' xmlns='jabber:client'>", rule + ", its prefix is not declared"),
            ("<stream:stream to='fcm.googleapis.com' version='1.0' xmlns='jabber:client' xmlns:stream='urn:wrong'>", rule + ", not urn:wrong"),
            ("<stream:stream to='fcm.googleapis.com' version='1.0' xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams'>",
             "the content namespace must be jabber:client, not jabber:server"),
        ]
        for (header, text) in cases {
            let c = try XMPPTestClient(port: xmppPort)
            c.send(header)
            // RFC 6120 4.9.1.1: a header of the server's own first, then the error.
            let got = closedStream(c).replacingOccurrences(of: #"id="[0-9a-f]{16}""#, with: #"id="-""#, options: .regularExpression)
            XCTAssertEqual(got, #"<stream:stream from="gcm.googleapis.com" id="-" version="1.0" xmlns="jabber:client" "#
                + #"xmlns:stream="http://etherx.jabber.org/streams">"# + streamError("invalid-namespace", text), header)
        }
        healthy.sendDownstream(#"{"to":"a1","message_id":"still-here"}"#)
        XCTAssertEqual(try healthy.nextGCM()?["message_type"]?.stringValue, "ack")
    }

    func testNamespaceErrorsEndOnlyTheirStream() throws {
        let healthy = try XMPPTestClient(port: xmppPort)
        try healthy.login(user: "111", password: "key-111")
        let unbound = streamError("invalid-xml", "not namespace-well-formed: unbound prefix")
        let gcm = #"<gcm xmlns="google:mobile:data">{"to":"a1","message_id":"refused"}</gcm>"#
        // Before authentication, after a valid header.
        let early: [(String, String)] = [
            ("<x:message/>", unbound),
            ("<message x:a='1'/>", unbound),
            ("<message xmlns:x=''/>", streamError("invalid-xml", "not namespace-well-formed: must not undeclare prefix")),
            ("<auth xmlns='urn:other' mechanism='PLAIN'>AGEAYg==</auth>",
             streamError("unsupported-stanza-type", "<auth> in the namespace urn:other is not understood here")),
            // In the content namespace, an <auth> is not SASL's.
            ("<auth mechanism='PLAIN'>ADExMQBrZXktMTEx</auth>", streamError("not-authorized", "authenticate first (SASL PLAIN)")),
        ]
        for (bytes, expected) in early {
            let c = try XMPPTestClient(port: xmppPort)
            c.send(XMPPTestClient.header + bytes)
            let got = closedStream(c)
            XCTAssertTrue(got.hasPrefix("<stream:stream ") && got.hasSuffix(">" + expected), "\(bytes): \(got)")
        }
        // Logged in: nothing of these is taken as a message.
        let late: [(String, String)] = [
            ("<message xmlns='foo'>\(gcm)</message>", streamError("unsupported-stanza-type", "<message> in the namespace foo is not understood here")),
            ("<x:message xmlns:x='urn:other'>\(gcm)</x:message>",
             streamError("unsupported-stanza-type", "<message> in the namespace urn:other is not understood here")),
            ("<x:message>\(gcm)</x:message>", unbound),
            (#"<message><x:gcm>{"to":"a1","message_id":"refused"}</x:gcm></message>"#, unbound),
            ("<message xmlns:xml='urn:wrong'>\(gcm)</message>",
             streamError("invalid-xml", "not namespace-well-formed: reserved prefix (xml) must not be undeclared or bound to another namespace name")),
        ]
        for (bytes, expected) in late {
            let c = try XMPPTestClient(port: xmppPort)
            try c.login(user: "111", password: "key-111")
            c.send(bytes)
            let got = closedStream(c)
            XCTAssertTrue(got.hasSuffix(#"<iq type="result" id="sess-1"/>"# + expected), "\(bytes): \(got)")
        }
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        // Prefixes used as Namespaces in XML allows: the message is taken.
        healthy.send(#"<message xml:lang="en"><data:gcm xmlns:data="google:mobile:data">{"to":"a1","message_id":"prefixed"}</data:gcm></message>"#)
        XCTAssertEqual(try healthy.nextGCM()?["message_id"]?.stringValue, "prefixed")
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 1)
    }
}
