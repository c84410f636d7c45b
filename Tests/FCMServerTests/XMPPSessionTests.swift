import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import XCTest
import XMPPServer

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

    /// A receipt awaited for a delivery that ends otherwise (here replaced by a newer message of
    /// its collapse key) will never be due: such receipts are let go once a thousand wait, so a
    /// long-running server does not keep them all; the one still held is kept and sent.
    func testReceiptsOfDeliveriesThatEndedOtherwiseAreLetGo() throws {
        let c = try connected()
        for i in 1...1100 {
            c.sendDownstream("{\"to\":\"a-offline\",\"message_id\":\"c-\(i)\",\"collapse_key\":\"k\",\"delivery_receipt_requested\":true}")
            XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        }
        // Let go of off the commit's thread, a moment later.
        try waitFor("collapsed deliveries' receipts let go") { self.server.app.awaitedReceipts < 1024 }
        let waiting = server.app.awaitedReceipts
        XCTAssertGreaterThanOrEqual(waiting, 1)
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let receipt = try XCTUnwrap(try c.nextGCM())
        XCTAssertEqual(receipt["message_id"]?.stringValue, "dr2:c-1100", "the held message's receipt is still sent")
        XCTAssertEqual(server.app.awaitedReceipts, waiting - 1)
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
        // A status no upstream message has is a bad filter, as on every list.
        let bad = try client.get("/api/v1/upstream?status=bogus")
        XCTAssertEqual(bad.status, 400, bad.text)
        XCTAssertEqual(bad.object?["error"]?.objectValue?["message"]?.stringValue, "status must be queued, sent or acked")
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
        // Drain all: idle connections close at once, and the answer still shows them draining.
        let a = try connected(), b = try connected()
        let all = items(try client.post("/api/v1/xmpp:drain"))
        XCTAssertEqual(all.map { $0["draining"]?.boolValue }, [true, true])
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
