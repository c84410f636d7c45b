import FCMCore
import FCMServer
import FCMTesting
import Foundation
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
            (#"{"to":"ios-nocred","message_id":"n7"}"#, "INVALID_APNS_CREDENTIAL"),
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
    }
}

/// SIGTERM ends XMPP streams cleanly.
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
