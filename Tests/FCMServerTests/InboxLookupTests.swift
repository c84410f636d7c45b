import FCMCore
@testable import FCMEngine
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// `GET /api/v1/devices/{token}/messages/{message_id}`: one inbox entry by its message id, found
/// through the device's inbox index (ids in memory and in the store's chunks), as the listing
/// shows it. Through a real server on a file store, with more entries than a page holds.
final class InboxLookupTests: RollbackTestCase {
    /// `n` sends to `token`, their message ids in order.
    private func sendMany(_ c: HTTPTestClient, _ n: Int, to token: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        var ids: [String] = []
        for i in 0..<n {
            let r = try send(c, to: token, key: "m\(i)")
            ids.append(try XCTUnwrap(results(r, file: file, line: line).first?["message_id"]?.stringValue, r.text, file: file, line: line))
        }
        return ids
    }

    private func entry(_ c: HTTPTestClient, _ token: String, _ id: String) throws -> WireResponse {
        try c.get("/api/v1/devices/\(pathEncode(token))/messages/\(pathEncode(id))")
    }

    /// The lookup answers 404 in the control API's error form.
    private func assertNotFound(_ r: WireResponse, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, 404, r.text, file: file, line: line)
        XCTAssertEqual(r.headers["content-type"], jsonType, file: file, line: line)
        XCTAssertEqual(r.text, #"{"error":{"code":"not_found","message":"\#(message)"}}"#, file: file, line: line)
    }

    func testAnEntryPastTheFirstPageIsFoundByItsMessageID() throws {
        let s = try start()
        let c = s.client()
        let n = 1010
        let sent = try sendMany(c, n, to: "demo-android-1")
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM inbox_chunks"), Int64(n / InboxChunk.size),
                       "the oldest ids are in the store's chunks, the rest in memory")
        // The listing in two pages: the first 1000 entries, then the newest 10.
        let first = try c.get("/api/v1/devices/demo-android-1/messages?limit=1000")
        let cursor = try XCTUnwrap(first.object?["next"]?.stringValue, first.text)
        let second = try c.get("/api/v1/devices/demo-android-1/messages?limit=1000&cursor=\(cursor)")
        XCTAssertEqual(items(first).count + items(second).count, n)

        // The newest, and entries at each edge of the chunks and of memory: byte for byte the
        // listing's.
        let chunked = n / InboxChunk.size * InboxChunk.size
        let picks = [n - 1, 0, InboxChunk.size - 1, InboxChunk.size, chunked - 1, chunked, 999, 1000]
        var bodies: [Int: String] = [:]
        for i in picks {
            let r = try entry(c, "demo-android-1", sent[i])
            XCTAssertEqual(r.status, 200, "entry \(i): \(r.text)")
            XCTAssertEqual(r.headers["content-type"], jsonType)
            XCTAssertEqual(r.object?["message_id"]?.stringValue, sent[i], r.text)
            XCTAssertEqual(r.object?["data"]?.objectValue?["k"]?.stringValue, "m\(i)", r.text)
            XCTAssertEqual(r.object?["status"]?.stringValue, "delivered", r.text)
            XCTAssertTrue((i < 1000 ? first : second).text.contains(r.text), "entry \(i) as the listing shows it: \(r.text)")
            bodies[i] = r.text
        }

        // The id must be one of this device's entries.
        let other = try sendMany(c, 1, to: "demo-android-2")[0]
        assertNotFound(try entry(c, "demo-android-1", other), "message '\(other)' is not in the inbox of device 'demo-android-1'")
        XCTAssertEqual(try entry(c, "demo-android-2", other).object?["message_id"]?.stringValue, other)
        // The right number with another project's suffix, a malformed id, an unknown device.
        let parsed = try XCTUnwrap(MessageID(sent[5]))
        let foreign = MessageID(micros: parsed.micros, suffix: parsed.suffix ^ 1).description
        assertNotFound(try entry(c, "demo-android-1", foreign), "message '\(foreign)' is not in the inbox of device 'demo-android-1'")
        assertNotFound(try entry(c, "demo-android-1", "0:123"), "message '0:123' is not in the inbox of device 'demo-android-1'")
        assertNotFound(try entry(c, "no-such-device", sent[0]), "device 'no-such-device' does not exist")

        // A held message reads as the listing reads it: pending, then expired once its TTL ran out.
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-2", #"{"online":false}"#).status, 200)
        let held = try XCTUnwrap(results(try c.sendJSON(#"{"to":"demo-android-2","time_to_live":60,"data":{"k":"held"}}"#, key: demoKey)).first?["message_id"]?.stringValue)
        XCTAssertEqual(try entry(c, "demo-android-2", held).object?["status"]?.stringValue, "pending")
        XCTAssertEqual(try c.post("/api/v1/clock", #"{"advance_s":61}"#).status, 200)
        XCTAssertEqual(try entry(c, "demo-android-2", held).object?["status"]?.stringValue, "expired")

        // The same after a restart on the file.
        c.disconnect()
        s.stop()
        let again = try start()
        defer { again.stop() }
        let c2 = again.client()
        for i in picks {
            XCTAssertEqual(try entry(c2, "demo-android-1", sent[i]).text, bodies[i], "entry \(i) after a restart")
        }
    }

    /// Pruned entries are gone from the lookup as from the listing; a deleted device has none.
    func testPrunedAndDeletedEntriesAreNotFound() throws {
        let s = try start(["--max-messages", "100"])
        defer { s.stop() }
        let c = s.client()
        let sent = try sendMany(c, 3 * InboxChunk.size + 10, to: "demo-android-1")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try entry(c, "demo-android-1", sent[0]).status != 404 { usleep(20_000) }
        assertNotFound(try entry(c, "demo-android-1", sent[0]), "message '\(sent[0])' is not in the inbox of device 'demo-android-1'")
        XCTAssertEqual(try entry(c, "demo-android-1", sent[sent.count - 100]).status, 200, "the oldest one kept")
        XCTAssertEqual(try c.delete("/api/v1/devices/demo-android-1").status, 204)
        assertNotFound(try entry(c, "demo-android-1", sent.last!), "device 'demo-android-1' does not exist")
    }

    /// `?order=newest`: the same entries as the oldest-first listing, newest first, paged with
    /// `next` across memory and every stored chunk; the status filter applies; bad input is a 400.
    func testNewestFirstPagesThroughMemoryAndChunks() throws {
        let s = try start()
        let c = s.client()
        let n = 3 * InboxChunk.size + 10
        let sent = try sendMany(c, n, to: "demo-android-1")
        XCTAssertEqual(try storeScalar(s, "SELECT count(*) FROM inbox_chunks"), 3)
        // Pages of 50: one straddles memory and the newest chunk, later ones straddle chunks.
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let r = try c.get("/api/v1/devices/demo-android-1/messages?order=newest&limit=50" + (cursor.map { "&cursor=\($0)" } ?? ""))
            XCTAssertEqual(r.status, 200, r.text)
            seen += items(r).compactMap { $0["message_id"]?.stringValue }
            cursor = r.object?["next"]?.stringValue
            pages += 1
        } while cursor != nil && pages < 20
        XCTAssertEqual(pages, (n + 49) / 50)
        XCTAssertEqual(seen, Array(sent.reversed()))
        // The newest page as a whole is the oldest-first listing's tail, reversed, byte for byte.
        let newest = try c.get("/api/v1/devices/demo-android-1/messages?order=newest&limit=3")
        let all = try c.get("/api/v1/devices/demo-android-1/messages?limit=1000")
        XCTAssertEqual(items(newest), Array(items(all).suffix(3).reversed()))

        // Filtered by status: the two held entries of another device, newest first.
        XCTAssertEqual(try c.patch("/api/v1/devices/demo-android-2", #"{"online":false}"#).status, 200)
        let held = try sendMany(c, 2, to: "demo-android-2")
        let pending = try c.get("/api/v1/devices/demo-android-2/messages?order=newest&status=pending")
        XCTAssertEqual(items(pending).compactMap { $0["message_id"]?.stringValue }, Array(held.reversed()))
        XCTAssertEqual(items(try c.get("/api/v1/devices/demo-android-2/messages?order=newest&status=delivered")).count, 0)

        for (query, message) in [("order=latest", "order must be oldest or newest"),
                                 ("order=newest&wait=1", "wait works with order=oldest only")] {
            let r = try c.get("/api/v1/devices/demo-android-1/messages?\(query)")
            XCTAssertEqual(r.status, 400, query)
            XCTAssertEqual(r.text, #"{"error":{"code":"bad_request","message":"\#(message)"}}"#, query)
        }
        XCTAssertEqual(try c.get("/api/v1/devices/no-such/messages?order=newest").status, 404)
    }
}
