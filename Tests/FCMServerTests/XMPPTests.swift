import FCMCore
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
            (XMPPTestClient.header + "<message><a></b></message>", "not-well-formed"),
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

/// SIGTERM ends XMPP streams cleanly.
/// CCS allowed a sender id 1000 connections at once; one more is refused (the limit lowered to 2
/// here, as no flag sets it).
final class XMPPConnectionLimitTests: XCTestCase {
    func testOneConnectionOverTheLimitIsRefused() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppConnectionsPerSender = 2 }
        defer { s.stop() }
        let port = s.app.xmppPort
        let first = try XMPPTestClient(port: port)
        _ = try first.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r1")
        let second = try XMPPTestClient(port: port)
        _ = try second.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r2")
        let third = try XMPPTestClient(port: port)
        // It sends a message with its bind, before it could learn it is refused: not taken.
        let early = #"<message><gcm xmlns="google:mobile:data">{"to":"a1","message_id":"over-limit"}</gcm></message>"#
        _ = try? third.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r3", withBind: early)
        var sawError = false
        while let st = try? third.nextStanza(timeout: 2) {
            if st.localName == "error", st.children.contains(where: { $0.localName == "policy-violation" }) { sawError = true }
        }
        XCTAssertTrue(sawError, "the third connection gets a policy-violation stream error")
        XCTAssertEqual(items(try s.client().get("/api/v1/messages?xmpp_message_id=over-limit")).count, 0)
        // The refused socket leaves the list when its thread has finished with it.
        var open = -1
        let deadline = Date().addingTimeInterval(5)
        repeat {
            open = items(try s.client().get("/api/v1/xmpp/connections")).count
            if open != 2 { usleep(10_000) }
        } while open != 2 && Date() < deadline
        XCTAssertEqual(open, 2)
        // Another sender is not affected; a freed place can be taken again.
        let other = try XMPPTestClient(port: port)
        _ = try other.login(user: "222@fcm.googleapis.com", password: "key-222", resource: "o1")
        first.sendDownstream(#"{"to":"a1","message_id":"still-works"}"#)
        XCTAssertEqual(try first.nextGCM()?["message_type"]?.stringValue, "ack")
        second.drop()
        var reopened: XMPPTestClient?
        for _ in 0..<50 where reopened == nil {
            let c = try XMPPTestClient(port: port)
            if (try? c.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r4")) != nil,
                (try? c.nextStanza(timeout: 0.2)) == nil
            {
                reopened = c
            } else {
                usleep(20_000)
            }
        }
        XCTAssertNotNil(reopened, "a place freed by a closed connection is taken again")
    }
}

final class XMPPShutdownTests: XCTestCase {
    func testSIGTERMClosesStreams() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let c = try XMPPTestClient(port: s.xmppPort)
        try c.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        XCTAssertTrue(c.waitForClose(timeout: 5))
        XCTAssertTrue(String(decoding: c.received, as: UTF8.self).hasSuffix("</stream:stream>"))
    }
}

/// Receipts, upstream, flow control and draining (issue 5).
final class XMPPSessionTests: ServerTestCase {
    var xmppPort: Int { server.app.xmppPort }

    func connected() throws -> XMPPTestClient {
        let c = try XMPPTestClient(port: xmppPort)
        try c.login(user: "111@fcm.googleapis.com", password: "key-111")
        return c
    }

    func testReceiptForAnOnlineDeviceMustBeAcked() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1","message_id":"m-1","delivery_receipt_requested":true}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        let receipt = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(receipt["message_type"]?.stringValue, "receipt")
        XCTAssertEqual(receipt["message_id"]?.stringValue, "dr2:m-1")
        XCTAssertEqual(receipt["from"]?.stringValue, "gcm.googleapis.com")
        XCTAssertEqual(receipt["category"]?.stringValue, "com.a")
        let data = try XCTUnwrap(receipt["data"]?.objectValue)
        XCTAssertEqual(data["message_status"]?.stringValue, "MESSAGE_SENT_TO_DEVICE")
        XCTAssertEqual(data["original_message_id"]?.stringValue, "m-1")
        XCTAssertEqual(data["device_registration_id"]?.stringValue, "a1")
        XCTAssertNotNil(Int64(data["message_sent_timestamp"]?.stringValue ?? ""))
        XCTAssertEqual(items(try client.get("/api/v1/xmpp/connections")).first?["unacked"]?.numberValue?.int64, 1)
        c.sendDownstream(#"{"to":"gcm.googleapis.com","message_id":"dr2:m-1","message_type":"ack"}"#)
        // The ack is taken silently; a ping proves it was processed.
        c.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try c.nextStanza()?.attributes["type"], "result")
        XCTAssertEqual(items(try client.get("/api/v1/xmpp/connections")).first?["unacked"]?.numberValue?.int64, 0)
    }

    func testReceiptArrivesWhenAnOfflineDeviceComesBackAndIsResentOnANewConnection() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a-offline","message_id":"m-2","delivery_receipt_requested":true}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertNil(try c.nextGCM(timeout: 0.3), "no receipt while the device is offline")
        // An hour later on the mock's clock the device comes back: the receipt says when it got it.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3600}"#).status, 200)
        let back = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000 - 1000  // the mock's now, less a second
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let receipt = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(receipt["message_id"]?.stringValue, "dr2:m-2")
        let sentAt = try XCTUnwrap(Int64(receipt["data"]?.objectValue?["message_sent_timestamp"]?.stringValue ?? ""))
        XCTAssertGreaterThanOrEqual(sentAt, back, "stamped at delivery, not at acceptance an hour before")
        // Never acked: the next connection gets it again.
        c.drop()
        let again = try connected()
        XCTAssertEqual(try again.nextGCM()?["message_id"]?.stringValue, "dr2:m-2")
    }

    /// A reset forgets the receipts a connection still owes or waits to send, so the next test
    /// does not get the last one's.
    func testResetForgetsReceipts() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1","message_id":"r-1","delivery_receipt_requested":true}"#)
        c.sendDownstream(#"{"to":"a-offline","message_id":"r-2","delivery_receipt_requested":true}"#)
        var receipts = 0
        for _ in 0..<3 {
            if let m = try c.nextGCM(), m["message_type"]?.stringValue == "receipt" { receipts += 1 }
        }
        XCTAssertEqual(receipts, 1, "a1's receipt, unacked; a-offline's waits for the device")
        c.drop()
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try client.get("/api/v1/devices/a1").status, 200, "the fixture's a1 is back")
        let again = try connected()
        XCTAssertNil(try again.nextGCM(timeout: 0.5), "no receipt from before the reset")
    }

    func testUpstreamIsQueuedSentAckedAndRedelivered() throws {
        // Queued while no connection of the sender exists.
        let created = try client.post("/api/v1/devices/a1/upstream", #"{"data":{"hello":"world"},"message_id":"up-1"}"#)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual(created.object?["status"]?.stringValue, "queued")
        let first = try connected()
        let up = try XCTUnwrap(try first.nextGCM())
        XCTAssertEqual(JSONValue.object(up).serialized(), #"{"data":{"hello":"world"},"time_to_live":86400,"from":"a1","message_id":"up-1","category":"com.a"}"#)
        XCTAssertEqual(items(try client.get("/api/v1/upstream?status=sent")).count, 1)
        // Not acked before the connection goes: redelivered on the next one.
        first.drop()
        let second = try connected()
        XCTAssertEqual(try second.nextGCM()?["message_id"]?.stringValue, "up-1")
        // The ack must name the device that sent it (seeds Table 6): else BAD_ACK, still waiting.
        second.sendDownstream(#"{"to":"a2","message_id":"up-1","message_type":"ack"}"#)
        let wrong = try XCTUnwrap(try second.nextGCM())
        XCTAssertEqual(wrong["error"]?.stringValue, "BAD_ACK")
        XCTAssertEqual(wrong["from"]?.stringValue, "a2", "a nack names the to it answers")
        second.sendDownstream(#"{"message_id":"up-1","message_type":"ack"}"#)
        XCTAssertEqual(try second.nextGCM()?["error"]?.stringValue, "BAD_ACK")
        XCTAssertEqual(items(try client.get("/api/v1/upstream?status=sent")).count, 1)
        second.sendDownstream(#"{"to":"a1","message_id":"up-1","message_type":"ack"}"#)
        second.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try second.nextStanza()?.attributes["type"], "result")
        let list = items(try client.get("/api/v1/upstream?token=a1"))
        XCTAssertEqual(list.first?["status"]?.stringValue, "acked")
        XCTAssertNotNil(list.first?["acked_at"]?.stringValue)
        // While connected, a new upstream message goes out at once; an ack twice is a BAD_ACK.
        XCTAssertEqual(try client.post("/api/v1/devices/a2/upstream", #"{"data":{"n":"2"}}"#).status, 201)
        let live = try XCTUnwrap(try second.nextGCM())
        XCTAssertEqual(live["from"]?.stringValue, "a2")
        second.sendDownstream(#"{"to":"a1","message_id":"up-1","message_type":"ack"}"#)
        XCTAssertEqual(try second.nextGCM()?["error"]?.stringValue, "BAD_ACK")
        // Bad input.
        XCTAssertEqual(try client.post("/api/v1/devices/nobody/upstream", "{}").status, 404)
        XCTAssertEqual(try client.post("/api/v1/devices/a1/upstream", #"{"data":"x"}"#).status, 400)
        XCTAssertEqual(try client.post("/api/v1/devices/a1/upstream", #"{"message_id":"up-1"}"#).status, 409)
    }

    /// A draining connection that waited only for what a reset forgot closes then.
    func testResetFinishesADrainThatWaitedForForgottenReceipts() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1","message_id":"r-1","delivery_receipt_requested":true}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "receipt")
        XCTAssertEqual(items(try client.post("/api/v1/xmpp:drain")).count, 1)
        XCTAssertEqual(try c.nextGCM()?["control_type"]?.stringValue, "CONNECTION_DRAINING")
        XCTAssertFalse(c.waitForClose(timeout: 0.3), "the receipt is still owed its ack")
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertTrue(c.waitForClose())
    }

    /// What arrives in the same read as a message that a fault closes the connection for is not
    /// taken.
    func testNothingIsTakenAfterAFaultClosedTheConnection() throws {
        let c = try connected()
        XCTAssertEqual(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"close_connection":true},"times":1}"#).status, 201)
        c.send(#"<message><gcm xmlns="google:mobile:data">{"to":"a1","message_id":"p1"}</gcm></message>"#
            + #"<message><gcm xmlns="google:mobile:data">{"to":"a1","message_id":"p2"}</gcm></message>"#)
        XCTAssertTrue(c.waitForClose())
        XCTAssertEqual(items(try client.get("/api/v1/messages?xmpp_message_id=p2")).count, 0)
    }

    func testDrainingRefusesNewMessagesThenCloses() throws {
        let c = try connected()
        c.sendDownstream(#"{"to":"a1","message_id":"r-1","delivery_receipt_requested":true}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "receipt")
        let id = try XCTUnwrap(items(try client.get("/api/v1/xmpp/connections")).first?["id"]?.stringValue)
        let drained = try client.post("/api/v1/xmpp/connections/\(id):drain")
        XCTAssertEqual(drained.status, 200)
        XCTAssertEqual(drained.object?["draining"]?.boolValue, true)
        let control = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(JSONValue.object(control).serialized(), #"{"message_type":"control","control_type":"CONNECTION_DRAINING"}"#)
        c.sendDownstream(#"{"to":"a1","message_id":"late"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "CONNECTION_DRAINING")
        // Acks are still taken; once nothing is pending the server closes the stream.
        c.sendDownstream(#"{"to":"gcm.googleapis.com","message_id":"dr2:r-1","message_type":"ack"}"#)
        XCTAssertTrue(c.waitForClose())
        XCTAssertEqual(try client.post("/api/v1/xmpp/connections/c999:drain").status, 404)
        // Drain all.
        let a = try connected(), b = try connected()
        XCTAssertEqual(items(try client.post("/api/v1/xmpp:drain")).count, 2)
        XCTAssertTrue(a.waitForClose())
        XCTAssertTrue(b.waitForClose())
    }

    func testFlowControlWindow() throws {
        // 120 messages written at once, before any ack is read: none is lost; every one is acked
        // or nacked SERVICE_UNAVAILABLE (the window is 100 in flight).
        let c = try connected()
        var burst = ""
        for i in 0..<120 {
            burst += "<message id=\"\"><gcm xmlns=\"google:mobile:data\">{\"to\":\"a1\",\"message_id\":\"w\(i)\"}</gcm></message>"
        }
        c.send(burst)
        var answered = Set<String>()
        var refused = 0
        while answered.count < 120, let m = try c.nextGCM() {
            answered.insert(m["message_id"]?.stringValue ?? "")
            if m["error"]?.stringValue == "SERVICE_UNAVAILABLE" { refused += 1 }
        }
        XCTAssertEqual(answered.count, 120)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages?limit=1000")).count, 120 - refused)
    }
}

/// The XMPP client's own message_id on the record.
final class XMPPRecordTests: ServerTestCase {
    func testTheClientsMessageIDIsRecorded() throws {
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"my-id-7"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        let found = items(try client.get("/api/v1/messages?xmpp_message_id=my-id-7"))
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?["xmpp_message_id"]?.stringValue, "my-id-7")
        XCTAssertEqual(found.first?["transport"]?.stringValue, "xmpp")
        XCTAssertNil(found.first?["http_status"], "no HTTP status on an XMPP message")
    }

    /// A message refused before the send path (bad JSON fields, a fault) is kept as a rejected
    /// record, with the fault that refused it, as over HTTP.
    func testRefusedMessagesAreRecordedWithTheirFault() throws {
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"bad-ttl","time_to_live":"x"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "INVALID_JSON")
        let bad = try XCTUnwrap(items(try client.get("/api/v1/messages?xmpp_message_id=bad-ttl")).first)
        XCTAssertEqual(bad["status"]?.stringValue, "rejected")
        XCTAssertEqual(bad["error"]?.stringValue, "INVALID_JSON")
        XCTAssertEqual(bad["transport"]?.stringValue, "xmpp")
        XCTAssertEqual(bad["raw_body"]?.stringValue, #"{"to":"a1","message_id":"bad-ttl","time_to_live":"x"}"#)

        let fault = try XCTUnwrap(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"status":503},"times":1}"#)
            .object?["id"]?.stringValue)
        c.sendDownstream(#"{"to":"a1","message_id":"faulted"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "SERVICE_UNAVAILABLE")
        let faulted = try XCTUnwrap(items(try client.get("/api/v1/messages?xmpp_message_id=faulted")).first)
        XCTAssertEqual(faulted["fault"]?.stringValue, fault)
        XCTAssertEqual(faulted["status"]?.stringValue, "rejected")

        let closer = try XCTUnwrap(try client.post("/api/v1/faults", #"{"when":{"transport":"xmpp"},"then":{"close_connection":true},"times":1}"#)
            .object?["id"]?.stringValue)
        c.sendDownstream(#"{"to":"a1","message_id":"closed"}"#)
        XCTAssertTrue(c.waitForClose())
        XCTAssertFalse(String(decoding: c.received, as: UTF8.self).hasSuffix("</stream:stream>"),
                       "dropped like a broken network, not a stream ended")
        let closed = try XCTUnwrap(items(try client.get("/api/v1/messages?xmpp_message_id=closed")).first)
        XCTAssertEqual(closed["fault"]?.stringValue, closer)
        XCTAssertEqual(closed["error"]?.stringValue, "ConnectionClosed")
    }

    /// The event of a refused XMPP message has the shape of its record: the client's message_id,
    /// no HTTP status.
    func testRejectionEventOfAnXMPPMessage() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"ev-1","time_to_live":"x"}"#)
        XCTAssertEqual(try c.nextGCM()?["error"]?.stringValue, "INVALID_JSON")
        var rejected: JSONObject?
        while let e = try sse.next(timeout: 2) {
            if e.event == "message.rejected" {
                rejected = try? JSONParser.parse(e.data).objectValue
                break
            }
        }
        let o = try XCTUnwrap(rejected)
        XCTAssertEqual(o["xmpp_message_id"]?.stringValue, "ev-1")
        XCTAssertNil(o["http_status"])
        XCTAssertEqual(o["transport"]?.stringValue, "xmpp")
    }
}

/// `--xmpp-tls`: TLS from the first byte, with a generated or a given certificate.
final class XMPPTLSTests: XCTestCase {
    func testSelfSignedTLS() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--xmpp-tls", "--log-level", "warning"])
        defer { s.stop() }
        let c = try XMPPTestClient(port: s.xmppPort, tls: true)
        XCTAssertEqual(c.peerCertificateCount, 1)
        XCTAssertEqual(try c.login(user: DemoProject.senderID, password: DemoProject.serverKey), "\(DemoProject.senderID)@gcm.googleapis.com/test")
        c.sendDownstream(#"{"to":"demo-android-1","message_id":"tls-1"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(items(try s.client().get("/api/v1/xmpp/connections")).first?["tls"]?.boolValue, true)
        // A plain-text client on the TLS port gets nowhere (its bytes are not a TLS hello).
        let plain = try XMPPTestClient(port: s.xmppPort)
        plain.send(XMPPTestClient.header)
        XCTAssertTrue(plain.waitForClose(timeout: 15))
        // The generated certificate's path is in the log, even at --log-level warning.
        let log = String(decoding: s.takeStderr(), as: UTF8.self)
        XCTAssertTrue(log.contains("tls.cert=") && log.contains("server.pem"), log)
    }

    func testGivenCertificateAndBadFiles() throws {
        let dir = try temporaryDirectory("tls")
        let made = try TLSCredentials.selfSigned(names: ["localhost"], directory: dir)
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--xmpp-tls", "--tls-cert", made.certificatePath, "--tls-key", made.keyPath])
        defer { s.stop() }
        let c = try XMPPTestClient(port: s.xmppPort, tls: true)
        XCTAssertNoThrow(try c.login(user: DemoProject.senderID, password: DemoProject.serverKey))
        let bad = try runBinary(["serve", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0", "--xmpp-tls",
                                 "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("TLS"), bad.stderr)
        XCTAssertEqual(try runBinary(["serve", "--tls-cert", made.certificatePath]).status, 2, "a certificate needs its key")
    }
}

/// A client that does not log in is disconnected after the login time-out (lowered to 1 s here,
/// as no flag sets it); a bound connection may stay idle.
final class XMPPLoginTimeoutTests: XCTestCase {
    func testIdleBeforeLoginIsDisconnected() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppLoginTimeout = 1 }
        defer { s.stop() }
        let silent = try XMPPTestClient(port: s.app.xmppPort)
        let halfway = try XMPPTestClient(port: s.app.xmppPort)
        halfway.send(XMPPTestClient.header)
        let bound = try XMPPTestClient(port: s.app.xmppPort)
        _ = try bound.login(user: "111@fcm.googleapis.com", password: "key-111")
        for c in [silent, halfway] {
            XCTAssertTrue(c.waitForClose(timeout: 10))
            XCTAssertTrue(String(decoding: c.received, as: UTF8.self).contains("<connection-timeout xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
        }
        // A deadline, not an idle time: whitespace every 200 ms does not keep a client in.
        let trickle = try XMPPTestClient(port: s.app.xmppPort)
        trickle.send(XMPPTestClient.header)
        var closed = false
        for _ in 0..<50 where !closed {
            usleep(200_000)
            trickle.send(" ")
            closed = trickle.waitForClose(timeout: 0.01)
        }
        XCTAssertTrue(closed, "a client sending whitespace is still disconnected at the deadline")
        bound.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try bound.nextStanza()?.attributes["type"], "result")
    }
}

/// Out of descriptors, the listener waits and goes on accepting (it stopped for good).
final class XMPPDescriptorExhaustionTests: XCTestCase {
    func testListenerSurvivesRunningOutOfDescriptors() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"], maxOpenFiles: 64)
        defer { s.stop() }
        var idle: [XMPPTestClient] = []
        for _ in 0..<80 { idle.append(try XMPPTestClient(port: s.xmppPort)) }
        usleep(300_000)
        idle.removeAll()  // closes them
        var ok = false
        for _ in 0..<50 where !ok {
            let c = try XMPPTestClient(port: s.xmppPort)
            if (try? c.login(user: "123456789012@fcm.googleapis.com", password: "AAAAfcmmock:demo-server-key")) != nil { ok = true } else { usleep(100_000) }
        }
        XCTAssertTrue(ok, "a new connection logs in once descriptors are free again")
    }
}

/// Connections open at once are bounded (each holds a thread); one more is refused with a
/// policy-violation stream error, and a freed place is taken again (limit lowered to 3 here).
final class XMPPServerConnectionCapTests: XCTestCase {
    func testOneConnectionOverTheServerLimitIsRefused() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppMaxConnections = 3 }
        defer { s.stop() }
        let port = s.app.xmppPort
        var open = [try XMPPTestClient(port: port), try XMPPTestClient(port: port)]
        let logged = try XMPPTestClient(port: port)
        _ = try logged.login(user: "111@fcm.googleapis.com", password: "key-111")
        let extra = try XMPPTestClient(port: port)
        XCTAssertTrue(extra.waitForClose())
        XCTAssertTrue(String(decoding: extra.received, as: UTF8.self).contains("<policy-violation xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
        logged.sendDownstream(#"{"to":"a1","message_id":"still-served"}"#)
        XCTAssertEqual(try logged.nextGCM()?["message_id"]?.stringValue, "still-served")
        open[0].drop()
        open.removeFirst()
        var again: XMPPTestClient?
        for _ in 0..<100 where again == nil {
            let c = try XMPPTestClient(port: port)
            if (try? c.login(user: "111@fcm.googleapis.com", password: "key-111")) != nil { again = c } else { usleep(20_000) }
        }
        XCTAssertNotNil(again, "a freed place is taken again")
    }
}
