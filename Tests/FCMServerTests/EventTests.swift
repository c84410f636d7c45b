import FCMCore
import FCMModel
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
@testable import HTTPServer
import XCTest

/// `GET /api/v1/events` (server-sent events).
final class EventTests: ServerTestCase {
    func testOneSendIsAcceptedThenDelivered() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        let r = try client.sendJSON(#"{"to":"a1","data":{"k":"v"}}"#)
        let id = try XCTUnwrap(results(r).first?["message_id"]?.stringValue)
        let first = try XCTUnwrap(try sse.next())
        XCTAssertEqual(first.event, "message.accepted")
        let accepted = try XCTUnwrap(try? JSONParser.parse(first.data).objectValue)
        XCTAssertEqual(accepted["message_id"]?.stringValue, id)
        XCTAssertEqual(accepted["target"]?.objectValue?["value"]?.stringValue, "a1")
        let second = try XCTUnwrap(try sse.next())
        XCTAssertEqual(second.event, "message.delivered")
        let delivered = try XCTUnwrap(try? JSONParser.parse(second.data).objectValue)
        XCTAssertEqual(delivered["message_id"]?.stringValue, id)
        XCTAssertEqual(delivered["token"]?.stringValue, "a1")
    }

    /// A device event carries the object `GET /api/v1/devices/{token}` answers right after the
    /// change: its topics, its canonical token and its pending count included.
    func testDeviceEventsCarryTheDeviceObjectAsGetShowsIt() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a-offline/topics/news").status, 200)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"k":"v"}}"#)))
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        let offline = try client.patch("/api/v1/devices/a-offline", #"{"online":false}"#)
        XCTAssertEqual(offline.object?["pending"]?.numberValue?.int64, 1, "an answer without a change counts what is held")
        XCTAssertEqual(offline.object?["topics"]?.arrayValue?.count, 1)
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let shown = try client.get("/api/v1/devices/a-offline").object
        var updated: JSONObject?
        while let e = try sse.next(timeout: 2) {
            if e.event == "device.updated" {
                updated = try? JSONParser.parse(e.data).objectValue
                break
            }
        }
        XCTAssertEqual(updated, shown)
        XCTAssertEqual(updated?["pending"]?.numberValue?.int64, 0)
        XCTAssertEqual(updated?["topics"]?.arrayValue?.compactMap(\.stringValue), ["news"])

        let refreshed = try client.post("/api/v1/devices/a1:refresh")
        XCTAssertEqual(refreshed.status, 200)
        let newToken = try XCTUnwrap(refreshed.object?["token"]?.stringValue)
        var old: JSONObject?
        while let e = try sse.next(timeout: 2) {
            if e.event == "device.updated" {
                old = try? JSONParser.parse(e.data).objectValue
                break
            }
        }
        XCTAssertEqual(old?["token"]?.stringValue, "a1")
        XCTAssertEqual(old?["canonical_token"]?.stringValue, newToken)
        XCTAssertEqual(old, try client.get("/api/v1/devices/a1").object)
    }

    func testStorageAndDeviceEvents() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","collapse_key":"c"}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","collapse_key":"c"}"#)))
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try client.post("/api/v1/devices", #"{"sender_id":"111","token":"new-one"}"#).status, 201)
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1","time_to_live":"x"}"#).status, 400)
        var names: [String] = []
        while let e = try sse.next(timeout: 2) {
            names.append(e.event)
            if e.event == "message.rejected" { break }
        }
        XCTAssertEqual(names, ["message.accepted", "message.accepted", "message.collapsed", "device.updated",
                               "message.delivered", "device.created", "message.rejected"])
        // A send refused whole has the shape of every message event: no target, no recipient.
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1","time_to_live":"y"}"#).status, 400)
        var refused: JSONObject?
        while let e = try sse.next(timeout: 2) {
            if e.event == "message.rejected" {
                refused = try? JSONParser.parse(e.data).objectValue
                break
            }
        }
        XCTAssertEqual(refused?["target"]?.isNull, true)
        XCTAssertEqual(refused?["recipients"]?.serialized(), "[]")
        XCTAssertEqual(refused?["http_status"]?.numberValue?.int64, 400)
    }

    func testAVanishedReaderIsDroppedAndNeverBlocksSends() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        sse.disconnect()
        // Sends go on; once the server writes to the dead connection it lets the reader go.
        var n = 0
        func readers() throws -> Int64 { try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64 ?? 0 }
        while try n < 2000 && readers() > 0 {
            XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
            n += 1
        }
        XCTAssertEqual(try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64, 0, "after \(n) sends")
    }

    func testControlTokenProtectsTheStream() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--control-token", "t"])
        defer { s.stop() }
        XCTAssertEqual(try SSEClient(port: s.port).status(), 401)
        XCTAssertEqual(try SSEClient(port: s.port, headers: [("Authorization", "Bearer t")]).status(), 200)
    }

    /// Past the most readers the server takes, a reader is refused with 503 and the control API's
    /// error, which says how many are open and the limit; once some close, new ones come in.
    func testReadersPastTheLimitAreRefusedUntilSomeClose() throws {
        let limit = EventBus.defaultMaxReaders
        var readers: [SSEClient] = []
        for _ in 0..<limit {
            let r = try SSEClient(port: server.port)
            XCTAssertEqual(try r.status(), 200)
            readers.append(r)
        }
        waitForReaders(Int64(limit))
        func refused(file: StaticString = #filePath, line: UInt = #line) throws {
            // A short timeout: a stream that was accepted never ends its body.
            let r = try HTTPTestClient(port: server.port, receiveTimeout: 5).get("/api/v1/events")
            XCTAssertEqual(r.status, 503, file: file, line: line)
            let error = r.object?["error"]?.objectValue
            XCTAssertEqual(error?["code"]?.stringValue, "unavailable", file: file, line: line)
            let message = error?["message"]?.stringValue ?? ""
            XCTAssertTrue(message.contains("\(limit) event streams are open") && message.contains("the limit is \(limit)"),
                          message, file: file, line: line)
        }
        try refused()
        XCTAssertEqual(try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64, Int64(limit),
                       "a refused reader is not counted")
        for r in readers.suffix(2) { r.disconnect() }
        readers.removeLast(2)
        waitForReaders(Int64(limit - 2))
        for _ in 0..<2 {
            let r = try SSEClient(port: server.port)
            XCTAssertEqual(try r.status(), 200)
            readers.append(r)
        }
        waitForReaders(Int64(limit))
        try refused()
        // The readers let in last get events as every other does.
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertEqual(try readers.last?.next()?.event, "message.accepted")
    }
}

/// The bus alone: a reader that stops taking events is dropped, publishing never waits.
final class EventBusTests: XCTestCase {
    func testASlowReaderIsDroppedAtItsLimit() throws {
        let bus = EventBus(maxBehindBytes: 1000)
        let slow = HTTPStream()  // never handed to a connection: nothing drains it
        try bus.subscribe(slow)
        XCTAssertEqual(bus.readerCount, 1)
        for _ in 0..<20 { bus.publish([("message.accepted", String(repeating: "x", count: 100))]) }
        XCTAssertEqual(bus.readerCount, 0, "dropped once more than 1000 bytes were waiting")
        XCTAssertEqual(slow.buffered, 0, "what it was not sent went with it")
        XCTAssertFalse(bus.hasReaders)
        bus.publish([("message.accepted", "{}")])  // no reader: nothing to do, no error
    }

    func testTheReaderPastTheLimitIsRefusedAndOneLeavingMakesRoom() throws {
        let bus = EventBus(maxReaders: 2)
        let first = HTTPStream(), second = HTTPStream()
        try bus.subscribe(first)
        try bus.subscribe(second)
        XCTAssertThrowsError(try bus.subscribe(HTTPStream())) { e in
            XCTAssertEqual((e as? EngineError)?.code, .unavailable)
        }
        XCTAssertEqual(bus.readerCount, 2)
        first.released()  // its connection is gone
        XCTAssertEqual(bus.readerCount, 1)
        XCTAssertNoThrow(try bus.subscribe(HTTPStream()))
        XCTAssertEqual(bus.readerCount, 2)
    }
}

/// Readers that stop reading, through the binary: what they hold stays within the documented
/// 4 MiB each, and goes back to the system once they are dropped, though they stay connected.
final class EventBacklogMemoryTests: XCTestCase {
    func testReadersThatStopReadingHoldAtMostTheirBoundAndGiveItBackWhenDropped() throws {
        // A device in 100 topics: each change of it is one `device.updated` of about 10 KB (its
        // topics listed; smaller than a block of a stream's backlog, so every reader holds copies
        // of its own), and no record is stored, so the store does not grow meanwhile.
        let dir = try temporaryDirectory("events-memory")
        let topics = (0..<100).map { "\"topic-\($0)-\(String(repeating: "x", count: 80))\":[\"phone\"]" }.joined(separator: ",")
        try (#"{"projects":[{"sender_id":"111","server_keys":["key-111"],"apps":[{"app":"com.a","platform":"android"}]}],"#
            + #""devices":[{"token":"phone","sender_id":"111","app":"com.a","online":true}],"subscriptions":{"#
            + topics + "}}").write(toFile: dir + "/f.json", atomically: true, encoding: .utf8)
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--fixtures", dir + "/f.json"])
        defer { s.stop() }
        let client = s.client()
        func toggle(_ times: Int) throws {
            for i in 0..<times {
                XCTAssertEqual(try client.patch("/api/v1/devices/phone", i % 2 == 0 ? #"{"online":false}"# : #"{"online":true}"#).status, 200)
            }
        }
        func readers() throws -> Int64 { try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64 ?? -1 }
        func openFiles() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(s.process.processIdentifier)/fd").count) ?? 0 }
        // One reader that reads, so what building and sending events costs is in the baseline.
        let live = try SSEClient(port: s.httpPort)
        XCTAssertEqual(try live.status(), 200)
        try toggle(20)
        for _ in 0..<20 { XCTAssertEqual(try live.next()?.event, "device.updated") }
        live.disconnect()
        var count = try readers()
        for _ in 0..<500 where count != 0 { usleep(10_000); count = try readers() }
        XCTAssertEqual(count, 0, "a reader that closed its connection is gone")
        let base = try XCTUnwrap(s.residentBytes)
        let files = openFiles()

        let n = 16
        let stopped = try (0..<n).map { _ in try SSEClient(port: s.httpPort, receiveBuffer: 4096) }
        for r in stopped { XCTAssertEqual(try r.status(), 200) }
        for _ in 0..<500 where count != Int64(n) { usleep(10_000); count = try readers() }
        XCTAssertEqual(count, Int64(n))
        // 1,000 changes: about 10 MB to each reader, more than it may fall behind and the system
        // takes in its sockets.
        var peak = base
        for _ in 0..<100 {
            try toggle(10)
            peak = max(peak, s.residentBytes ?? 0)
        }
        for _ in 0..<500 where count != 0 { usleep(10_000); count = try readers() }
        XCTAssertEqual(count, 0, "every reader fell more than 4 MiB behind and was dropped")
        let mib = 1 << 20
        // Each reader held up to 4 MiB and one event more, its connection's 256 KiB beside.
        XCTAssertLessThan(peak - base, n * 5 * mib + 16 * mib, "peak \((peak - base) / mib) MiB over \(base / mib) MiB with \(n) readers")
        // Dropped, they stay connected but hold nothing: their backlogs went back at once (they
        // stayed, about 4.5 MiB each, while their connections did).
        var after = s.residentBytes ?? 0
        for _ in 0..<30 where after - base > n * mib / 2 { usleep(100_000); after = s.residentBytes ?? 0 }
        XCTAssertLessThan(after - base, n * mib / 2, "\((after - base) / mib) MiB over \(base / mib) MiB after the readers were dropped")
        // And the server closed their connections (they still have to read what the system took).
        XCTAssertEqual(openFiles(), files, "the dropped readers' connections are closed")
    }
}

/// Shutdown with an open event stream.
final class EventShutdownTests: XCTestCase {
    func testSIGTERMEndsOpenStreamsAndExits0() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let sse = try SSEClient(port: s.httpPort)
        XCTAssertEqual(try sse.status(), 200)
        let start = Date()
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        XCTAssertThrowsError(try sse.next(timeout: 5), "the stream ends with the server")
    }
}

/// Keep-alive comments on event streams (every 100 ms here; 15 s by default): a reader that went
/// away is dropped without any event being published, and live readers are not disturbed.
final class EventKeepaliveTests: XCTestCase {
    func testAVanishedReaderIsDroppedWithoutEvents() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.eventKeepaliveMillis = 100 }
        defer { s.stop() }
        let client = s.client()
        func readers() throws -> Int64 { try client.get("/api/v1/health").object?["event_readers"]?.numberValue?.int64 ?? -1 }
        let live = try SSEClient(port: s.port)
        let gone = try SSEClient(port: s.port)
        XCTAssertEqual(try live.status(), 200)
        XCTAssertEqual(try gone.status(), 200)
        var n = try readers()
        for _ in 0..<200 where n != 2 { usleep(10_000); n = try readers() }
        XCTAssertEqual(n, 2)
        gone.disconnect()
        for _ in 0..<500 where n != 1 { usleep(10_000); n = try readers() }
        XCTAssertEqual(n, 1, "the vanished reader is dropped with no event published")
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1"}"#)))
        var names: [String] = []
        while let e = try live.next(timeout: 5), names.count < 10 {
            names.append(e.event)
            if e.event == "message.accepted" { break }
        }
        XCTAssertTrue(names.contains("message.accepted"), "\(names)")
    }
}
