import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import Platform
import TLS
import XCTest
import XMPPServer

/// The CCS listener over a raw socket (issue 5, first part): handshake, downstream, acks, nacks.
final class XMPPTests: ServerTestCase {
    var xmppPort: Int { server.app.xmppPort }

    func connected(user: String = "111@fcm.googleapis.com", password: String = "key-111") throws -> XMPPTestClient {
        let c = try XMPPTestClient(port: xmppPort)
        try c.login(user: user, password: password)
        return c
    }

    func testHandshakeAndDownstreamAck() throws {
        // The connection's time is on the mock's clock (a day ahead here).
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":86400}"#).status, 200)
        let c = try XMPPTestClient(port: xmppPort)
        XCTAssertEqual(try c.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r1"), "111@gcm.googleapis.com/r1")
        // XEP-0199 ping.
        c.send(#"<iq type="get" id="ping-1"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try c.nextStanza()?.xml, #"<iq id="ping-1" type="result"/>"#)
        c.sendDownstream(#"{"to":"a1","message_id":"m-1","data":{"k":"v"}}"#)
        let ack = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(JSONValue.object(ack).serialized(), #"{"message_type":"ack","from":"a1","message_id":"m-1"}"#)
        let inbox = items(try client.get("/api/v1/devices/a1/messages"))
        XCTAssertEqual(inbox.last?["via"]?.objectValue?["transport"]?.stringValue, "xmpp")
        XCTAssertEqual(items(try client.get("/api/v1/messages?transport=xmpp")).count, 1)
        let conns = items(try client.get("/api/v1/xmpp/connections"))
        XCTAssertEqual(conns.first?["sender_id"]?.stringValue, "111")
        XCTAssertEqual(conns.first?["resource"]?.stringValue, "r1")
        let at = try XCTUnwrap(parseRFC3339(conns.first?["connected_at"]?.stringValue ?? ""))
        XCTAssertLessThan(abs(at - (wallClockMicros() / 1000 + 86_400_000)), 60_000)
    }

    func testSASLForms() throws {
        for (authzid, user) in [("", "111"), ("", "111@gcm.googleapis.com"), ("111@fcm.googleapis.com", "111")] {
            let c = try XMPPTestClient(port: xmppPort)
            XCTAssertNoThrow(try c.login(user: user, password: "key-111", authzid: authzid), "\(authzid) \(user)")
        }
        let bad = try XMPPTestClient(port: xmppPort)
        XCTAssertThrowsError(try bad.login(user: "111@fcm.googleapis.com", password: "wrong"))
        XCTAssertTrue(String(decoding: bad.received, as: UTF8.self)
            .contains(#"<failure xmlns="urn:ietf:params:xml:ns:xmpp-sasl"><not-authorized/></failure>"#))
        XCTAssertTrue(bad.waitForClose())
        // Another project's key for this sender id.
        XCTAssertThrowsError(try XMPPTestClient(port: xmppPort).login(user: "111", password: "key-222"))
    }

    func testNacksUseTheXMPPCodes() throws {
        let c = try connected()
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        let cases: [(String, String)] = [
            (#"{"to":"a2","message_id":"n1"}"#, "DEVICE_UNREGISTERED"),
            (#"{"to":"bad token","message_id":"n2"}"#, "BAD_REGISTRATION"),
            (#"{"to":"b1","message_id":"n3"}"#, "SENDER_ID_MISMATCH"),
            (#"{"to":"a1","message_id":"n4","time_to_live":-1}"#, "INVALID_JSON"),
            (#"{"to":"a1","message_id":"n5","data":{"from":"x"}}"#, "INVALID_JSON"),
            (#"{"registration_ids":["a1"],"message_id":"n6"}"#, "INVALID_JSON"),
            (#"{"to":"ios-nocred","message_id":"n7","notification":{"title":"t"}}"#, "INVALID_APNS_CREDENTIAL"),
            (#"{"message_id":"n8"}"#, "INVALID_JSON"),
            (#"{"to":"a1","message_id":"n9","time_to_live":"x"}"#, "INVALID_JSON"),
            (#"{"message_type":"ack","message_id":"never-sent"}"#, "BAD_ACK"),
        ]
        for (json, code) in cases {
            c.sendDownstream(json)
            let answer = try XCTUnwrap(try c.nextGCM(), json)
            XCTAssertEqual(answer["message_type"]?.stringValue, "nack", json)
            XCTAssertEqual(answer["error"]?.stringValue, code, json)
            XCTAssertNotNil(answer["error_description"]?.stringValue, json)
            // `from` is the message's `to` whenever it had one, however early it was refused.
            let to = (try? JSONParser.parse(json))?.objectValue?["to"]?.stringValue
            XCTAssertEqual(answer["from"]?.stringValue, to, json)
        }
        // A refreshed token: ack with the canonical one.
        let fresh = try XCTUnwrap(try client.post("/api/v1/devices/a1:refresh").object?["token"]?.stringValue)
        c.sendDownstream(#"{"to":"a1","message_id":"c1"}"#)
        XCTAssertEqual(try c.nextGCM()?["registration_id"]?.stringValue, fresh)
        // Topics work over XMPP too.
        XCTAssertEqual(try client.post("/api/v1/devices/\(fresh)/topics/news").status, 200)
        c.sendDownstream(#"{"to":"/topics/news","message_id":"t1"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(items(try client.get("/api/v1/devices/\(fresh)/messages")).count, 2)
    }

    func testStanzasWithoutMessageIDAreEchoedAsErrors() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1"}"#, id: "s1")
        let echo = try XCTUnwrap(try c.nextStanza())
        XCTAssertEqual(echo.attributes["type"], "error")
        XCTAssertEqual(echo.attributes["id"], "s1")
        XCTAssertEqual(echo.child("error")?.attributes["code"], "400")
        XCTAssertEqual(echo.child("error")?.child("text")?.text, "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id")
        for bad in ["not json", "[1,2]", #"{"to":"a1","message_id":"x","message_id":"y"}"#] {
            c.sendDownstream(bad)
            XCTAssertEqual(try c.nextStanza()?.attributes["type"], "error", bad)
        }
    }

    func testBadStreamsGetStreamErrorsAndOthersStayUp() throws {
        let healthy = try connected()
        let cases: [(String, String)] = [
            (XMPPTestClient.header + "<message><a></b></message>", "invalid-xml"),
            ("<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\">]>" + XMPPTestClient.header, "restricted-xml"),
            (XMPPTestClient.header + #"<message id="1"><gcm xmlns="google:mobile:data">{}</gcm></message>"#, "not-authorized"),
            (#"<auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">AGEAYg==</auth>"#, "invalid-xml"),
        ]
        for (bytes, condition) in cases {
            let c = try XMPPTestClient(port: xmppPort)
            c.send(bytes)
            XCTAssertTrue(c.waitForClose(), condition)
            XCTAssertTrue(String(decoding: c.received, as: UTF8.self).contains("<\(condition) xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"),
                          "\(condition): \(String(decoding: c.received, as: UTF8.self))")
        }
        // A stanza over the limit (1 MiB).
        let huge = try XMPPTestClient(port: xmppPort)
        try huge.login(user: "111", password: "key-111")
        huge.send("<message><gcm xmlns=\"google:mobile:data\">" + String(repeating: "x", count: 2 << 20))
        XCTAssertTrue(huge.waitForClose())
        XCTAssertTrue(String(decoding: huge.received, as: UTF8.self).contains("policy-violation"))
        // Invalid UTF-8 and a client that vanishes mid-stanza.
        let broken = try XMPPTestClient(port: xmppPort)
        try broken.login(user: "111", password: "key-111")
        broken.sendBytes(Array("<message><gcm xmlns=\"google:mobile:data\">".utf8) + [0xFF, 0xFE])
        XCTAssertTrue(broken.waitForClose())
        let vanished = try XMPPTestClient(port: xmppPort)
        try vanished.login(user: "111", password: "key-111")
        vanished.send("<message><gcm xmlns=\"google:mobile:data\">{\"to\":")
        vanished.drop()
        // The first connection still works.
        healthy.sendDownstream(#"{"to":"a1","message_id":"still-here"}"#)
        XCTAssertEqual(try healthy.nextGCM()?["message_type"]?.stringValue, "ack")
    }

    /// Stanzas that cost far more memory or stack than their bytes, and oversized logins, end
    /// their own stream only (a 50,000-deep stanza crashed the process).
    func testHostileStanzasEndOnlyTheirStream() throws {
        let healthy = try connected()
        let deep = try connected()
        deep.send("<message>" + String(repeating: "<a>", count: 50_000) + String(repeating: "</a>", count: 50_000) + "</message>")
        XCTAssertTrue(deep.waitForClose())
        XCTAssertTrue(String(decoding: deep.received, as: UTF8.self).contains("more than 32 deep"))
        let wide = try connected()
        wide.send("<message>" + String(repeating: "<a/>", count: 1001) + "</message>")
        XCTAssertTrue(wide.waitForClose())
        XCTAssertTrue(String(decoding: wide.received, as: UTF8.self).contains("more than 1000 elements"))
        // 1000 elements and 32 levels are still fine (the gcm element is not first here).
        let fine = try connected()
        fine.send("<message>" + String(repeating: "<a/>", count: 967) + String(repeating: "<b>", count: 31) + String(repeating: "</b>", count: 31)
                  + #"<gcm xmlns="google:mobile:data">{"to":"a1","message_id":"edge"}</gcm></message>"#)
        XCTAssertEqual(try fine.nextGCM()?["message_type"]?.stringValue, "ack")
        // Before authentication a stanza may have 64 KiB, not 1 MiB.
        let early = try XMPPTestClient(port: xmppPort)
        early.send(XMPPTestClient.header + #"<auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">"# + String(repeating: "A", count: 70_000))
        XCTAssertTrue(early.waitForClose())
        XCTAssertTrue(String(decoding: early.received, as: UTF8.self).contains("a stanza may not exceed 65536 bytes"))
        healthy.sendDownstream(#"{"to":"a1","message_id":"survivor"}"#)
        XCTAssertEqual(try healthy.nextGCM()?["message_id"]?.stringValue, "survivor")
    }

    /// U+FFFF and U+FFFE are valid JSON but not allowed in XML: answers escape them, so the
    /// client's parser (expat here) can read the ack and the nack.
    func testNoncharactersAreEscapedInStanzas() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1","message_id":"m\uffff"}"#)
        let ack = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(ack["message_id"]?.stringValue, "m\u{FFFF}")
        c.sendDownstream(#"{"to":"x\ufffe","message_id":"n1"}"#)
        let nack = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(nack["message_type"]?.stringValue, "nack")
        XCTAssertEqual(nack["from"]?.stringValue, "x\u{FFFE}")
        XCTAssertTrue(String(decoding: c.received, as: UTF8.self).contains(#""from":"x\uFFFE""#))
    }

    /// A connection binds once: a second bind is refused and the session it has goes on (it
    /// started the session over before, losing the upstream message it owed an ack).
    func testSecondBindIsRefused() throws {
        let c = try connected()
        c.send(#"<iq type="set" id="b2"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><resource>again</resource></bind></iq>"#)
        let answer = try XCTUnwrap(try c.nextStanza())
        XCTAssertEqual(answer.attributes["type"], "error")
        XCTAssertEqual(answer.attributes["id"], "b2")
        XCTAssertNotNil(answer.child("error")?.child("not-allowed"))
        let conns = items(try client.get("/api/v1/xmpp/connections"))
        XCTAssertEqual(conns.map { $0["resource"]?.stringValue }, ["test"])
        // An iq result or error from the client is not answered (RFC 6120 8.2.3).
        c.send(#"<iq type="result" id="r1"/><iq type="error" id="e1"/>"#)
        c.sendDownstream(#"{"to":"a1","message_id":"after-rebind"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
    }

    /// A client that stops reading holds up no one: acks are written without blocking the
    /// thread that commits every send (HTTP sends and other connections' acks waited for it).
    /// What its socket does not take waits for it, in order; past 16 MiB unread it is
    /// disconnected.
    func testAClientThatDoesNotReadBlocksNoOne() throws {
        let other = try connected()
        let slow = try connected()
        let big = String(repeating: "x", count: 400_000)
        for i in 0..<40 { slow.sendDownstream(#"{"to":"a1","message_id":"\#(big)-\#(i)"}"#) }
        // Everything the slow client sent is stored before anyone else's send is answered.
        var stored = 0
        let deadline = Date().addingTimeInterval(20)
        while stored < 40 && Date() < deadline {
            stored = items(try client.get("/api/v1/messages?transport=xmpp&limit=100")).count
            if stored < 40 { usleep(20_000) }
        }
        XCTAssertEqual(stored, 40)
        let http = try client.postJSON("/fcm/send", #"{"to":"a1"}"#, headers: [("Authorization", "key=key-111")])
        XCTAssertEqual(http.status, 200)
        other.sendDownstream(#"{"to":"a1","message_id":"other"}"#)
        XCTAssertEqual(try other.nextGCM()?["message_id"]?.stringValue, "other")
        // The slow client reads at last: every ack, in order.
        for i in 0..<40 {
            XCTAssertEqual(try slow.nextGCM()?["message_id"]?.stringValue, "\(big)-\(i)")
        }
        // One that leaves more than 16 MiB unread is disconnected; the others go on.
        let stuck = try connected()
        for i in 0..<100 { stuck.sendDownstream(#"{"to":"a1","message_id":"\#(big)-s\#(i)"}"#) }
        // It reads nothing until the server is done with it: reading as soon as it has sent would
        // drain what a slow server (a loaded machine) had not queued yet.
        let gone = Date().addingTimeInterval(30)
        while items(try client.get("/api/v1/xmpp/connections")).count > 2 && Date() < gone { usleep(50_000) }
        var acks = 0
        while (try? stuck.nextGCM(timeout: 10)) != nil { acks += 1 }
        XCTAssertLessThan(acks, 100)
        other.sendDownstream(#"{"to":"a1","message_id":"other-2"}"#)
        XCTAssertEqual(try other.nextGCM()?["message_id"]?.stringValue, "other-2")
    }

    /// A client that ends its stream right after its messages still gets their acks, then the
    /// server's own closing tag (RFC 6120 4.4); the acks were dropped before.
    func testMessagesBeforeTheStreamEndAreAnswered() throws {
        let c = try connected()
        var bytes = ""
        for i in 0..<20 {
            bytes += #"<message><gcm xmlns="google:mobile:data">{"to":"a1","message_id":"last-\#(i)"}</gcm></message>"#
        }
        c.send(bytes + "</stream:stream>")
        for i in 0..<20 {
            XCTAssertEqual(try c.nextGCM()?["message_id"]?.stringValue, "last-\(i)")
        }
        XCTAssertTrue(c.waitForClose())
        XCTAssertTrue(String(decoding: c.received, as: UTF8.self).hasSuffix("</stream:stream>"))
    }

    /// A client that sends the stream restart (and its bind) in the same write as `<auth>`,
    /// without waiting for `<success/>`, is served: the server parses what followed the auth
    /// with the restarted stream (it was dropped, and the connection stalled).
    func testLoginThatDoesNotWaitForSuccess() throws {
        let c = try XMPPTestClient(port: xmppPort)
        c.send(XMPPTestClient.header)
        guard case .streamOpen? = try c.next() else { return XCTFail("no stream header") }
        XCTAssertEqual(try c.nextStanza()?.localName, "features")
        let plain = Base64.encode(Array("\0111\0key-111".utf8))
        c.send(#"<auth mechanism="PLAIN" xmlns="urn:ietf:params:xml:ns:xmpp-sasl">"# + plain + "</auth>" + XMPPTestClient.header
               + #"<iq type="set" id="b1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"><resource>eager</resource></bind></iq>"#)
        // The client's own parser cannot take a restart inside one read: look at the bytes.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && !String(decoding: c.received, as: UTF8.self).contains("</jid>") { _ = try? c.next(timeout: 0.2) }
        let text = String(decoding: c.received, as: UTF8.self)
        XCTAssertTrue(text.contains("<success xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\"/><stream:stream "), text)
        XCTAssertTrue(text.contains("<jid>111@gcm.googleapis.com/eager</jid>"), text)
    }

    func testXMPPFaults() throws {
        let c = try connected()
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"error":"Unavailable"},"times":1}"#).status, 201)
        c.sendDownstream(#"{"to":"a1","message_id":"f1"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "SERVICE_UNAVAILABLE")
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"status":503},"times":1}"#).status, 201)
        c.sendDownstream(#"{"to":"a1","message_id":"f2"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "SERVICE_UNAVAILABLE")
        // HTTP faults leave XMPP alone.
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"http"},"then":{"status":503}}"#).status, 201)
        c.sendDownstream(#"{"to":"a1","message_id":"f3"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        // AUTHENTICATION_FAILED (XMPP only: HTTP has no such error) through a fault.
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"then":{"error":"AuthenticationFailed"}}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"http"},"then":{"error":"AuthenticationFailed"}}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"error":"AuthenticationFailed"},"times":1}"#).status, 201)
        c.sendDownstream(#"{"to":"a1","message_id":"f4"}"#)
        let nack = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(nack["error"]?.stringValue, "AUTHENTICATION_FAILED")
        XCTAssertEqual(nack["from"]?.stringValue, "a1")
    }
}
