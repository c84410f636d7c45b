import FCMCore
@testable import FCMEngine
import FCMServer
@testable import FCMStore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// A failed commit reads memory back from the store (docs/architecture.md, "When a commit
/// fails"); a real client's connection, which the store knows nothing of, stays its client's.
extension AutopushTests {
    /// Every write fails as on a read-only file, or succeeds again.
    private func refuseWrites(_ refuse: Bool) throws {
        try server.app.engine.store.readSQL { (c: SQLiteConnection) throws(StoreError) in try c.execute("PRAGMA query_only=\(refuse ? 1 : 0)") }
    }

    /// An acknowledgement that makes room for a held push, whose commit fails: neither the push
    /// it released (never written) nor the acknowledged one (its record failed) stays on the
    /// connection; both are held again and written once the store takes writes, oldest first.
    func testWhatAFailedAcknowledgementReleasedIsHeldAndWrittenAfter() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        var versions: [String] = []
        for _ in 0..<101 { versions.append(try messageID(try push(endpoint))) }
        for _ in 0..<100 { XCTAssertNotNil(try ws.nextText()) }
        let held = versions[100]
        XCTAssertEqual(try entry(token, held)["status"]?.stringValue, "pending")

        try refuseWrites(true)
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(versions[0])","code":100}]}"#)
        try waitFor("the failed acknowledgement's recovery") {
            try get("/api/v1/clients/\(uaid)")["connection"]?.objectValue?["unacked"] == .number(JSONNumber(99))
        }
        try refuseWrites(false)
        // The acknowledged push comes again (its acknowledgement was not recorded), then, once
        // acknowledged, the one it had made room for.
        XCTAssertTrue(try XCTUnwrap(try ws.nextText()).contains(#""version":"\#(versions[0])""#))
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(versions[0])","code":100}]}"#)
        XCTAssertTrue(try XCTUnwrap(try ws.nextText()).contains(#""version":"\#(held)""#))
        XCTAssertEqual(try entry(token, held)["status"]?.stringValue, "sent")
        XCTAssertEqual(try entry(token, versions[0])["client_delivery"]?.objectValue?["sends"], .number(JSONNumber(2)))
    }

    func testAConnectedClientKeepsItsConnectionThroughAFailedCommit() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let first = try messageID(try push(endpoint))
        XCTAssertNotNil(try ws.nextText())

        // A push while the store refuses writes: not taken, and memory is read back.
        try refuseWrites(true)
        let refused = try push(endpoint)
        XCTAssertEqual(refused.status, 500, refused.text)
        try refuseWrites(false)

        // Still connected, its device online, the unacknowledged push still on the connection.
        let client = try get("/api/v1/clients/\(uaid)")
        XCTAssertEqual(client["connected"], .bool(true), "\(client)")
        XCTAssertEqual(client["connection"]?.objectValue?["unacked"], .number(JSONNumber(1)), "\(client)")
        XCTAssertEqual(try get("/api/v1/devices/\(token)")["online"], .bool(true))
        XCTAssertEqual(try entry(token, first)["status"]?.stringValue, "sent")

        // Its acknowledgement counts, and the next push is written on the same connection.
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(first)","code":100}]}"#)
        try waitFor("delivered") { try entry(token, first)["status"]?.stringValue == "delivered" }
        let next = try push(endpoint)
        XCTAssertEqual(next.status, 201, next.text)
        let note = try XCTUnwrap(try ws.nextText())
        XCTAssertTrue(note.contains(#""version":"\#(try messageID(next))""#), note)
        XCTAssertEqual(try entry(token, try messageID(next))["status"]?.stringValue, "sent")
    }
}
