import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import Synchronization
import XCTest

/// Failed writes over XMPP, and many senders while the store fails and recovers.
final class RollbackXMPPTests: RollbackTestCase {
    /// Waits (at most 10 s) until the server counts no XMPP connection.
    private func waitForNoConnections(_ c: HTTPTestClient) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? c.get("/api/v1/stats").object?["xmpp_connections"]?.numberValue?.int64) != 0 {
            usleep(10_000)
        }
    }

    func testANackedXMPPSendLeavesNoTrace() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        let x = try XMPPTestClient(port: s.app.xmppPort)
        _ = try x.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        let before = try snapshot(c)

        try refuseWrites(s, true)
        x.sendDownstream(#"{"to":"xmpp-new-token","message_id":"x-1","data":{"a":"1"}}"#)
        var nack = try XCTUnwrap(x.nextGCM())
        XCTAssertEqual(nack["message_type"]?.stringValue, "nack")
        XCTAssertEqual(nack["message_id"]?.stringValue, "x-1")
        XCTAssertEqual(nack["error"]?.stringValue, "INTERNAL_SERVER_ERROR")
        x.sendDownstream(#"{"to":"demo-android-offline","message_id":"x-2","delivery_receipt_requested":true}"#)
        nack = try XCTUnwrap(x.nextGCM())
        XCTAssertEqual(nack["message_id"]?.stringValue, "x-2")
        XCTAssertEqual(nack["error"]?.stringValue, "INTERNAL_SERVER_ERROR")

        XCTAssertEqual(try c.get("/api/v1/devices/xmpp-new-token").status, 404)
        XCTAssertEqual(try pending(c, "demo-android-offline"), 0)
        XCTAssertEqual(items(try c.get("/api/v1/messages?xmpp_message_id=x-1")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/messages?xmpp_message_id=x-2")).count, 0)
        assertSame(try snapshot(c), before, "after the nacks")

        // Writes take again: the next message is acked, and its receipt is the only one the
        // device's coming online sends.
        try refuseWrites(s, false)
        x.sendDownstream(#"{"to":"demo-android-offline","message_id":"x-3","delivery_receipt_requested":true}"#)
        XCTAssertEqual(try x.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(try pending(c, "demo-android-offline"), 1)
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-offline", #"{"online":true}"#).status, 200)
        let receipt = try XCTUnwrap(x.nextGCM())
        XCTAssertEqual(receipt["message_type"]?.stringValue, "receipt")
        XCTAssertEqual(receipt["data"]?.objectValue?["original_message_id"]?.stringValue, "x-3")
        XCTAssertNil(try x.nextGCM(timeout: 0.3), "no receipt for the nacked message")
        x.drop()
        waitForNoConnections(c)
        try assertARestartShowsTheSame(s, c)
    }

    /// An upstream message a connection holds stays `sent` on it through a recovery (the store
    /// reads it back as queued, but this connection has it and waits for its ack); one created
    /// while writes fail never reaches the app server.
    func testUpstreamOnAConnectionSurvivesARecovery() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        let x = try XMPPTestClient(port: s.app.xmppPort)
        _ = try x.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        XCTAssertEqual(try c.post("/api/v1/devices/demo-android-1/upstream", #"{"message_id":"up-1","data":{"n":"1"}}"#).status, 201)
        let up = try XCTUnwrap(x.nextGCM())
        XCTAssertEqual(up["message_id"]?.stringValue, "up-1")

        try refuseWrites(s, true)
        XCTAssertEqual(try c.post("/api/v1/devices/demo-android-1/upstream", #"{"message_id":"up-2","data":{"n":"2"}}"#).status, 500)
        XCTAssertNil(try x.nextGCM(timeout: 0.3), "the refused upstream message is not sent")
        var list = items(try c.get("/api/v1/upstream"))
        XCTAssertEqual(list.map { $0["message_id"]?.stringValue }, ["up-1"])
        XCTAssertEqual(list.first?["status"]?.stringValue, "sent")
        XCTAssertNotNil(list.first?["connection_id"]?.stringValue)

        try refuseWrites(s, false)
        x.send(#"<message><gcm xmlns="google:mobile:data">{"message_type":"ack","message_id":"up-1","to":"demo-android-1"}</gcm></message>"#)
        let deadline = Date().addingTimeInterval(10)
        repeat {
            list = items(try c.get("/api/v1/upstream"))
        } while list.first?["status"]?.stringValue != "acked" && Date() < deadline
        XCTAssertEqual(list.first?["status"]?.stringValue, "acked")
        x.drop()
        waitForNoConnections(c)
        try assertARestartShowsTheSame(s, c)
    }

    /// HTTP and XMPP senders while the store fails and recovers again and again: every request
    /// is answered (200 or 500, ack or nack) in bounded time, and afterwards the mock shows
    /// what the store holds.
    func testConcurrentSendersWhileTheStoreFails() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        let outcomes = Mutex<[String: Int]>([:])
        let done = DispatchGroup()
        let senders = 4, perSender = 120
        let (httpPort, xmppPort, headers) = (s.port, s.app.xmppPort, auth)
        for t in 0..<senders {
            done.enter()
            Thread {
                defer { done.leave() }
                let client = HTTPTestClient(port: httpPort)
                defer { client.disconnect() }
                for i in 0..<perSender {
                    let to = ["demo-android-offline", "demo-android-1", "conc-\(t)-\(i):APA91b", "/topics/news"][i % 4]
                    let body = #"{"to":"\#(to)","data":{"k":"\#(t)-\#(i)"}}"#
                    let status = (try? client.request("POST", "/fcm/send", headers: headers, body: Array(body.utf8)).status) ?? -1
                    outcomes.withLock { $0["http \(status)", default: 0] += 1 }
                    if i % 10 == 0 { _ = try? client.post("/api/v1/devices/demo-ios-1/topics/news") }
                }
            }.start()
        }
        done.enter()
        Thread {
            defer { done.leave() }
            guard let x = try? XMPPTestClient(port: xmppPort),
                  (try? x.login(user: DemoProject.senderID, password: DemoProject.serverKey)) != nil else {
                outcomes.withLock { $0["xmpp login failed", default: 0] += 1 }
                return
            }
            for i in 0..<perSender {
                // Receipts too: an ack's completion then reads the engine on the writer thread.
                x.sendDownstream(#"{"to":"\#(i % 2 == 0 ? "demo-android-1" : "xmpp-\(i)")","message_id":"c-\#(i)","delivery_receipt_requested":true}"#)
                var answer = (try? x.nextGCM()) ?? nil
                while answer?["message_type"]?.stringValue == "receipt" { answer = (try? x.nextGCM()) ?? nil }
                let kind = answer?["message_type"]?.stringValue ?? "none"
                let error = answer?["error"]?.stringValue.map { " " + $0 } ?? ""
                outcomes.withLock { $0["xmpp \(kind)\(error)", default: 0] += 1 }
            }
            x.drop()
        }.start()

        // Writes fail and succeed by turns until every sender is done (or a minute passes).
        var refusing = false
        let deadline = Date().addingTimeInterval(60)
        while done.wait(timeout: .now() + .milliseconds(20)) == .timedOut && Date() < deadline {
            refusing.toggle()
            try refuseWrites(s, refusing)
        }
        try refuseWrites(s, false)
        XCTAssertEqual(done.wait(timeout: .now() + 1), .success, "senders still waiting: a deadlock")

        let seen = outcomes.withLock { $0 }
        XCTAssertEqual(Set(seen.keys).subtracting(["http 200", "http 500", "xmpp ack", "xmpp nack INTERNAL_SERVER_ERROR"]), [], "\(seen)")
        XCTAssertEqual((seen["http 200"] ?? 0) + (seen["http 500"] ?? 0), senders * perSender, "\(seen)")
        XCTAssertEqual((seen["xmpp ack"] ?? 0) + (seen["xmpp nack INTERNAL_SERVER_ERROR"] ?? 0), perSender, "\(seen)")
        XCTAssertGreaterThan(seen["http 500"] ?? 0, 0, "the store never failed: \(seen)")
        XCTAssertGreaterThan(seen["http 200"] ?? 0, 0, "the store never wrote: \(seen)")

        XCTAssertEqual(try pending(c, "demo-android-offline"), try storedPending(s, "demo-android-offline"))
        let devices = items(try c.get("/api/v1/devices?limit=1000")).count
        XCTAssertEqual(Int64(devices), try storeScalar(s, "SELECT count(*) FROM devices"))
        waitForNoConnections(c)
        try assertARestartShowsTheSame(s, c)
    }
}
