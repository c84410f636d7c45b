import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// FCM's 100-message rule on a Firefox channel held while its browser is away: autopush has no
/// message for the notice of deleted messages, so the notice cannot reach Firefox.
extension AutopushTests {
    /// Pushes written and unacknowledged when the connection ends are held again whole; a newer
    /// push with their `Topic` while Firefox is away replaces all of them, so the next `hello`
    /// writes the newest only.
    func testANewerTopicReplacesEveryHeldPushOfThatTopic() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let topic = [("Content-Encoding", "aes128gcm"), ("Topic", "same")]
        var older: [String] = []
        for _ in 0..<3 {
            older.append(try messageID(try push(endpoint, headers: topic)))
            XCTAssertNotNil(try ws.nextText())
        }
        ws.sendRaw(WebSocketTestClient.frame(opcode: 8, [0x03, 0xE8]))
        _ = try ws.waitForClose()
        try waitFor("offline") { try get("/api/v1/devices/\(token)")["online"] == .bool(false) }
        let newest = try messageID(try push(endpoint, headers: topic))
        XCTAssertEqual(try older.map { try entry(token, $0)["status"]?.stringValue }, ["collapsed", "collapsed", "collapsed"])
        let (again, _) = try hello(uaid: uaid)
        XCTAssertTrue(try XCTUnwrap(try again.nextText()).contains(#""version":"\#(newest)""#))
        again.send(text: "{}")
        XCTAssertEqual(try again.nextText(), "{}", "the newest only")
    }

    func testANoticeOfDeletedMessagesIsUndeliverableOverAutopush() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        ws.sendRaw(WebSocketTestClient.frame(opcode: 8, [0x03, 0xE8]))
        _ = try ws.waitForClose()
        try waitFor("offline") { try get("/api/v1/devices/\(token)")["online"] == .bool(false) }
        for _ in 0..<101 { XCTAssertEqual(try push(endpoint).status, 201) }
        func notice() throws -> JSONObject? {
            let items = try XCTUnwrap(try get("/api/v1/devices/\(token)/messages?limit=200")["items"]?.arrayValue)
            return items.compactMap(\.objectValue).first { $0["message_type"]?.stringValue == "deleted_messages" }
        }
        XCTAssertEqual(try notice()?["status"]?.stringValue, "pending")

        // Back: nothing is written for it, and its entry says Firefox could not take it.
        let (again, same) = try hello(uaid: uaid)
        XCTAssertEqual(same, uaid)
        again.send(text: "{}")
        XCTAssertEqual(try again.nextText(), "{}", "nothing but the ping's answer")
        let n = try XCTUnwrap(try notice())
        XCTAssertEqual(n["status"]?.stringValue, "undeliverable", "\(n)")
        XCTAssertEqual(n["total_deleted"], .number(JSONNumber(101)), "\(n)")
    }
}
