import FCMCore
@testable import FCMEngine
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import Platform
import HTTPServer
import XCTest

/// A device's inbox index past one chunk (`Engine+Inbox.swift`, `Store+Inbox.swift`): the older
/// ids move to the store's chunks and every view still lists every delivery in order, across
/// restarts, deletions, pruning, resets and failed commits. Through a real server on a file store.
final class InboxIndexTests: RollbackTestCase {
    private let chunk = InboxChunk.size

    /// `n` sends to `token`, their message ids in order.
    private func sendMany(_ c: HTTPTestClient, _ n: Int, to token: String, from first: Int = 0,
                          file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        var ids: [String] = []
        for i in first..<first + n {
            let r = try send(c, to: token, key: "m\(i)")
            XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
            ids.append(try XCTUnwrap(results(r, file: file, line: line).first?["message_id"]?.stringValue, r.text, file: file, line: line))
        }
        return ids
    }

    /// The device's whole inbox, oldest first, read `pageSize` at a time through the cursor.
    private func inboxIDs(_ c: HTTPTestClient, _ token: String, pageSize: Int = 1000, status: String? = nil,
                          file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        var out: [String] = []
        var cursor: String?
        repeat {
            var path = "/api/v1/devices/\(token)/messages?limit=\(pageSize)"
            if let status { path += "&status=\(status)" }
            if let cursor { path += "&cursor=\(cursor)" }
            let r = try c.get(path)
            XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
            let page = try XCTUnwrap(r.object, file: file, line: line)
            let entries = page["items"]?.arrayValue ?? []
            XCTAssertLessThanOrEqual(entries.count, pageSize, file: file, line: line)
            out += entries.compactMap { $0.objectValue?["message_id"]?.stringValue }
            cursor = page["next"]?.stringValue
            if out.count > 100_000 { break }
        } while cursor != nil
        return out
    }

    private func chunks(_ s: TestServer, _ token: String) throws -> Int64? {
        try storeScalar(s, "SELECT count(*) FROM inbox_chunks WHERE device = (SELECT id FROM devices WHERE token = ?)", [.text(token)])
    }

    func testAnInboxPastSeveralChunksListsEverythingInOrder() throws {
        let s = try start()
        let c = s.client()
        let n = 3 * chunk + 8
        let sent = try sendMany(c, n, to: "demo-android-1")
        XCTAssertEqual(try chunks(s, "demo-android-1"), 3, "three full chunks moved to the store, eight ids stay in memory")
        XCTAssertEqual(try inboxIDs(c, "demo-android-1"), sent)
        // Pages of 30 cross every chunk boundary and the step from the chunks to memory.
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", pageSize: 30), sent)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", pageSize: chunk), sent)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", status: "delivered"), sent)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", status: "pending"), [])
        // The message list filtered by the token finds them all too (newest first).
        let listed = items(try c.get("/api/v1/messages?token=demo-android-1&limit=1000"))
        XCTAssertEqual(listed.count, n)
        // Held messages of an offline device, some chunked, read as pending.
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-2", #"{"online":false}"#).status, 200)
        let held = try sendMany(c, chunk + 5, to: "demo-android-2")
        XCTAssertEqual(try chunks(s, "demo-android-2"), 1)
        XCTAssertEqual(try inboxIDs(c, "demo-android-2", pageSize: 7, status: "pending"), held)
        XCTAssertEqual(try pending(c, "demo-android-2"), Int64(held.count))

        // The same after a restart on the file.
        c.disconnect()
        s.stop()
        let again = try start()
        defer { again.stop() }
        let c2 = again.client()
        XCTAssertEqual(try inboxIDs(c2, "demo-android-1", pageSize: 30), sent)
        XCTAssertEqual(try inboxIDs(c2, "demo-android-2", status: "pending"), held)
        // And the index keeps growing from there.
        let more = try sendMany(c2, chunk, to: "demo-android-1", from: n)
        XCTAssertEqual(try chunks(again, "demo-android-1"), 4)
        XCTAssertEqual(try inboxIDs(c2, "demo-android-1", pageSize: 50), sent + more)
    }

    /// A long poll that waits past the chunked ids answers with the next delivery.
    func testALongPollAfterAChunkedCursorWakesOnTheNextSend() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        let sent = try sendMany(c, 2 * chunk, to: "demo-android-1")
        XCTAssertEqual(try chunks(s, "demo-android-1"), 2)
        // The cursor of a page that ends inside the first chunk.
        let first = try XCTUnwrap(try c.get("/api/v1/devices/demo-android-1/messages?limit=10").object)
        let cursor = try XCTUnwrap(first["next"]?.stringValue)
        let answered = Locked<WireResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let (port, min) = (s.port, 2 * chunk - 9)
        spawnThread {
            let r = try? HTTPTestClient(port: port).get("/api/v1/devices/demo-android-1/messages?limit=1000&cursor=\(cursor)&min=\(min)&wait=30")
            answered.withLock { $0 = r }
            done.signal()
        }
        // 118 entries are there already and min asks for 119: it waits, then wakes on this send.
        usleep(300_000)
        XCTAssertNil(answered.withLock { $0 }, "the poll waits for the 119th entry")
        let last = try sendMany(c, 1, to: "demo-android-1", from: 2 * chunk)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success, "the send woke the poll")
        let waiting = try XCTUnwrap(answered.withLock { $0 })
        XCTAssertEqual(waiting.status, 200)
        XCTAssertEqual(items(waiting).compactMap { $0["message_id"]?.stringValue }, Array(sent.dropFirst(10)) + last)
    }

    func testADeletedDeviceKeepsItsChunkedHistoryUnderItsToken() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        let n = 2 * chunk + 3
        _ = try sendMany(c, n, to: "demo-android-1")
        XCTAssertEqual(try chunks(s, "demo-android-1"), 2)
        XCTAssertEqual(try c.delete("/api/v1/devices/demo-android-1").status, 204)
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM inbox_chunks"), 0, "its chunks went with it")
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM deliveries WHERE device IS NULL AND token = 'demo-android-1'"), Int64(n))
        XCTAssertEqual(items(try c.get("/api/v1/messages?token=demo-android-1&limit=1000")).count, n)
    }

    /// A store written before chunks existed holds every id in `deliveries` only: the next start
    /// moves them into chunks and lists the same.
    func testAStoreWithoutChunksIsChunkedAtStart() throws {
        let s = try start()
        let c = s.client()
        let sent = try sendMany(c, 2 * chunk + 10, to: "demo-android-1")
        try storeSQL(s, "DELETE FROM inbox_chunks")
        c.disconnect()
        s.stop()
        let again = try start()
        defer { again.stop() }
        XCTAssertEqual(try chunks(again, "demo-android-1"), 2)
        XCTAssertEqual(try inboxIDs(again.client(), "demo-android-1", pageSize: 25), sent)
    }

    func testPruningDeletesChunksWithNothingLeft() throws {
        let s = try start(["--max-messages", "50"])
        defer { s.stop() }
        let c = s.client()
        let sent = try sendMany(c, 4 * chunk + 44, to: "demo-android-1")  // 300 messages
        // The newest 50 are 251...300; chunk 4 (193...256) still holds 251...256.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try chunks(s, "demo-android-1") != 1 || inboxIDs(c, "demo-android-1").count != 50 { usleep(20_000) }
        XCTAssertEqual(try chunks(s, "demo-android-1"), 1)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", pageSize: 20), Array(sent.suffix(50)))
    }

    func testAResetEmptiesTheChunks() throws {
        let s = try start()
        defer { s.stop() }
        let c = s.client()
        _ = try sendMany(c, chunk + 1, to: "demo-android-1")
        XCTAssertEqual(try chunks(s, "demo-android-1"), 1)
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM inbox_chunks"), 0)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1"), [])
        let after = try sendMany(c, chunk + 2, to: "demo-android-1")
        XCTAssertEqual(try chunks(s, "demo-android-1"), 1)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", pageSize: 10), after)
    }

    /// The send that fills a chunk fails: neither it nor the chunk is kept, the inbox lists what
    /// it listed, and the next send stores the chunk.
    func testAFailedCommitOfAFullChunkLeavesTheInboxWhole() throws {
        let s = try start()
        let c = s.client()
        let sent = try sendMany(c, chunk - 1, to: "demo-android-1")
        try refuseWrites(s, true)
        XCTAssertEqual(try send(c, to: "demo-android-1", key: "lost").status, 500)
        try refuseWrites(s, false)
        XCTAssertEqual(try chunks(s, "demo-android-1"), 0)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1"), sent)
        let next = try sendMany(c, 2, to: "demo-android-1", from: chunk)
        XCTAssertEqual(try chunks(s, "demo-android-1"), 1)
        XCTAssertEqual(try inboxIDs(c, "demo-android-1", pageSize: 9), sent + next)
        try assertARestartShowsTheSame(s, c)
    }
}
