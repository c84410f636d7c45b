import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import XCTest

/// A reset of a store large enough to have its history set aside (Store+Prune.swift): once the
/// reset answers, nothing old is visible anywhere (docs/spec/control-api.md), the tables set aside
/// are emptied in the background, and a restart shows the same.
final class ResetHistoryTests: XCTestCase {
    private func eventually(_ what: String, seconds: TimeInterval = 20, file: StaticString = #filePath, line: UInt = #line,
                            _ condition: () throws -> Bool) rethrows {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            usleep(20_000)
        }
        XCTFail("never happened: \(what)", file: file, line: line)
    }

    /// The tables resets set aside that the store file still holds (read on a connection of our own).
    private func leftovers(_ path: String) throws -> Int64 {
        let c = try SQLiteConnection(path: path)
        return try c.scalar("SELECT count(*) FROM sqlite_schema WHERE name GLOB 'gone_*'") ?? -1
    }

    func testLargeResetShowsNothingOldAndCleansUpBehind() throws {
        let dir = try temporaryDirectory("reset-history")
        let db = dir + "/store.sqlite"
        var s = try TestServer(fixtures: [errorTableFixture], db: db)
        var c = s.client()
        // About 11 MB of history (past the 8 MB below which a reset deletes in place), some of it
        // held by an offline device, a multicast among it.
        let filler = String(repeating: "x", count: 3_900)
        var old: [String] = []
        for i in 0..<2_800 {
            let to = i % 10 == 0 ? "a-offline" : "a1"
            let r = try c.sendJSON(#"{"to":"\#(to)","data":{"i":"\#(i)","f":"\#(filler)"}}"#)
            old.append(try XCTUnwrap(results(r).first?["message_id"]?.stringValue, r.text))
        }
        XCTAssertEqual(results(try c.sendJSON(#"{"registration_ids":["a1","a2","a-offline"]}"#)).count, 3)
        XCTAssertGreaterThan(try c.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64 ?? 0, 0)

        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        // Nothing old, at once: records by id, lists, inboxes, devices' pending, stats.
        for id in [old[0], old[1], old[2_799]] { XCTAssertEqual(try c.get("/api/v1/messages/\(pathEncode(id))").status, 404) }
        XCTAssertEqual(items(try c.get("/api/v1/messages?limit=1000")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/messages?token=a1&limit=1000")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/devices/a1/messages?limit=1000")).count, 0)
        XCTAssertEqual(items(try c.get("/api/v1/devices/a-offline/messages?limit=1000")).count, 0)
        XCTAssertEqual(try c.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 0)
        XCTAssertEqual(try c.get("/api/v1/stats").object?["messages"]?.objectValue?["accepted"]?.numberValue?.int64, 0)

        // New sends are seen, and counted; the history set aside goes in the background.
        let fresh = try XCTUnwrap(results(try c.sendJSON(#"{"to":"a-offline","data":{"new":"1"}}"#)).first?["message_id"]?.stringValue)
        XCTAssertEqual(items(try c.get("/api/v1/messages?limit=1000")).compactMap { $0["message_id"]?.stringValue }, [fresh])
        XCTAssertEqual(items(try c.get("/api/v1/devices/a-offline/messages")).compactMap { $0["message_id"]?.stringValue }, [fresh])
        try eventually("health counts the one new record") {
            try c.get("/api/v1/health").object?["store_messages"]?.numberValue?.int64 == 1
        }
        try eventually("the tables set aside are gone") { try leftovers(db) == 0 }

        // A restart shows the same.
        c.disconnect()
        s.stop()
        s = try TestServer(fixtures: [errorTableFixture], db: db)
        defer { s.stop() }
        c = s.client()
        XCTAssertEqual(items(try c.get("/api/v1/messages?limit=1000")).compactMap { $0["message_id"]?.stringValue }, [fresh])
        XCTAssertEqual(try c.get("/api/v1/messages/\(pathEncode(old[5]))").status, 404)
        XCTAssertEqual(try c.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)
        try eventually("counted at start") { try c.get("/api/v1/health").object?["store_messages"]?.numberValue?.int64 == 1 }
    }
}
