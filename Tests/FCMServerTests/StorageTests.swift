import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// Offline devices: collapse keys, storage limits, TTL on the movable clock (issue 3).
final class StorageTests: ServerTestCase {
    func inbox(_ token: String, _ query: String = "") throws -> [JSONObject] {
        items(try client.get("/api/v1/devices/\(token)/messages?limit=1000" + query))
    }

    func testThreeSendsWithOneCollapseKeyDeliverOne() throws {
        for i in 1...3 {
            XCTAssertNil(singleError(try client.sendJSON("{\"to\":\"a-offline\",\"collapse_key\":\"score\",\"data\":{\"n\":\"\(i)\"}}")))
        }
        XCTAssertEqual(try inbox("a-offline").map { $0["status"]?.stringValue }, ["collapsed", "collapsed", "pending"])
        XCTAssertEqual(try client.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let after = try inbox("a-offline")
        XCTAssertEqual(after.map { $0["status"]?.stringValue }, ["collapsed", "collapsed", "delivered"])
        XCTAssertEqual(after.last?["data"]?.objectValue?["n"]?.stringValue, "3")
        XCTAssertEqual(after.last?["collapse_key"]?.stringValue, "score")
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=collapsed")).count, 2)
    }

    func testFiveCollapseKeysDropTheOldestKey() throws {
        for k in ["k1", "k2", "k3", "k4", "k5"] {
            XCTAssertNil(singleError(try client.sendJSON("{\"to\":\"a-offline\",\"collapse_key\":\"\(k)\"}")))
        }
        XCTAssertEqual(try inbox("a-offline").map { $0["status"]?.stringValue }, ["dropped", "pending", "pending", "pending", "pending"])
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).object?["online"]?.boolValue, true)
        XCTAssertEqual(try inbox("a-offline", "&status=delivered").compactMap { $0["collapse_key"]?.stringValue }, ["k2", "k3", "k4", "k5"])
    }

    func testHundredAndOnePendingDiscardsAllAndLeavesANotice() throws {
        for i in 1...101 {
            XCTAssertNil(singleError(try client.sendJSON("{\"to\":\"a-offline\",\"data\":{\"n\":\"\(i)\"}}")), "send \(i) is accepted")
        }
        let held = try inbox("a-offline")
        XCTAssertEqual(held.count, 102)
        XCTAssertEqual(held.prefix(101).filter { $0["status"]?.stringValue == "dropped" }.count, 101)
        let notice = try XCTUnwrap(held.last)
        XCTAssertEqual(notice["message_type"]?.stringValue, "deleted_messages")
        XCTAssertEqual(notice["total_deleted"]?.numberValue?.int64, 101)
        XCTAssertEqual(notice["status"]?.stringValue, "pending")
        XCTAssertEqual(try client.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)
        // However long the device stays away (past the four weeks a message may wait), the notice waits.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":2419201}"#).status, 200)
        defer { _ = try? client.post("/api/v1/clock", #"{"reset":true}"#) }
        XCTAssertEqual(try inbox("a-offline").last?["status"]?.stringValue, "pending")
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let online = try inbox("a-offline")
        XCTAssertEqual(online.last?["status"]?.stringValue, "delivered", "the notice reaches the device when it is back")
        XCTAssertEqual(online.last?["message_type"]?.stringValue, "deleted_messages")
        // The notice is the device's, not something an app server sent.
        XCTAssertEqual(items(try client.get("/api/v1/messages?token=a-offline&limit=1000")).count, 101)
    }

    /// A device that overflows twice before it is back has one notice of everything it lost,
    /// also after a restart (the total is read back with what the device holds).
    func testASecondPurgeRaisesTheHeldNoticeInsteadOfAddingOne() throws {
        let dir = try temporaryDirectory("notice")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        let c1 = first.client()
        for i in 1...202 {
            XCTAssertNil(singleError(try c1.sendJSON("{\"to\":\"a-offline\",\"data\":{\"n\":\"\(i)\"}}")), "send \(i) is accepted")
        }
        let notices = items(try c1.get("/api/v1/devices/a-offline/messages?limit=1000")).filter { $0["message_type"] != nil }
        XCTAssertEqual(notices.count, 1)
        XCTAssertEqual(notices.first?["total_deleted"]?.numberValue?.int64, 202)
        c1.disconnect()
        first.stop()
        // After a restart a third purge adds to the same notice.
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        for i in 1...101 { XCTAssertNil(singleError(try c2.sendJSON("{\"to\":\"a-offline\",\"data\":{\"n\":\"\(i)\"}}"))) }
        XCTAssertEqual(try c2.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try c2.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let inbox = items(try c2.get("/api/v1/devices/a-offline/messages?limit=1000"))
        let after = inbox.filter { $0["message_type"] != nil }
        XCTAssertEqual(after.count, 1)
        XCTAssertEqual(after.first?["total_deleted"]?.numberValue?.int64, 303)
        XCTAssertEqual(after.first?["status"]?.stringValue, "delivered")
        XCTAssertEqual(inbox.count(where: { $0["status"]?.stringValue == "dropped" }), 303)
    }

    /// A device deleted while it holds messages takes them with it: `deleted` on their records,
    /// not `pending` for ever (nor counted among the pending).
    func testDeletingADeviceDeletesWhatItHeld() throws {
        let sent = try client.sendJSON(#"{"to":"a-offline","data":{"n":"1"}}"#)
        let id = try XCTUnwrap(results(sent).first?["message_id"]?.stringValue)
        XCTAssertEqual(try client.get("/api/v1/stats").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try client.delete("/api/v1/devices/a-offline").status, 204)
        let record = try XCTUnwrap(try client.get("/api/v1/messages/\(pathEncode(id))").object)
        XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "deleted")
        XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["token"]?.stringValue, "a-offline")
        XCTAssertEqual(try client.get("/api/v1/stats").object?["pending"]?.numberValue?.int64, 0)
    }

    /// The app was uninstalled while the device was away: what it held is not shown when it comes
    /// back (`undeliverable`), and what ran out of time meanwhile is `expired`, as ever.
    func testAnUnregisteredDeviceBackOnlineGetsNothingItHeld() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"n":"1"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","time_to_live":5,"data":{"n":"2"}}"#)))
        XCTAssertEqual(try client.post("/api/v1/devices/a-offline:unregister").status, 200)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":10}"#).status, 200)
        defer { _ = try? client.post("/api/v1/clock", #"{"reset":true}"#) }
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        XCTAssertEqual(try inbox("a-offline").map { $0["status"]?.stringValue }, ["undeliverable", "expired"])
        XCTAssertEqual(try client.get("/api/v1/stats").object?["pending"]?.numberValue?.int64, 0)
    }

    func testTTLExpiresWhenTheClockMoves() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","time_to_live":60,"data":{"k":"short"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","time_to_live":3600,"data":{"k":"long"}}"#)))
        XCTAssertEqual(try inbox("a-offline").map { $0["status"]?.stringValue }, ["pending", "pending"])
        let clock = try client.post("/api/v1/clock", #"{"advance_s":61}"#)
        XCTAssertEqual(clock.object?["offset_s"]?.numberValue?.int64, 61)
        XCTAssertEqual(try inbox("a-offline").map { $0["status"]?.stringValue }, ["expired", "pending"])
        XCTAssertEqual(items(try client.get("/api/v1/messages?status=expired")).count, 1, "the stored status changed at once")
        XCTAssertEqual(try client.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        let after = try inbox("a-offline")
        XCTAssertEqual(after.map { $0["status"]?.stringValue }, ["expired", "delivered"])
        XCTAssertTrue(after[0]["delivered_at"]?.isNull ?? false)
        // Reset returns to real time.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).object?["offset_s"]?.numberValue?.int64, 0)
    }

    /// A held message expires as real time passes its TTL, without a read or a clock move: a
    /// long poll for expired entries returns then, and the event stream says so.
    func testExpiryInRealTimeWakesLongPollsAndEvents() throws {
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        waitForReaders(1)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","time_to_live":1,"data":{"k":"v"}}"#)))
        // Answered when the TTL runs out (about 1 s), well before the 30 s the poll allows.
        let started = Date()
        let polled = items(try client.get("/api/v1/devices/a-offline/messages?wait=30&min=1&status=expired"))
        XCTAssertEqual(polled.map { $0["status"]?.stringValue }, ["expired"])
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "woken by the expiry, not by the poll's end")
        var names: [String] = []
        while let e = try sse.next(timeout: 5) {
            names.append(e.event)
            if e.event == "message.expired" { break }
        }
        XCTAssertEqual(names.last, "message.expired")
    }

    /// The clock runs at most 100 years ahead: more is a 400, never an overflow.
    func testClockAdvanceIsBounded() throws {
        let huge = try client.post("/api/v1/clock", #"{"advance_s":10000000000000}"#)
        XCTAssertEqual(huge.status, 400)
        XCTAssertEqual(huge.object?["error"]?.objectValue?["code"]?.stringValue, "bad_request")
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3155760000}"#).status, 200)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":1}"#).status, 400)
        XCTAssertEqual(try client.get("/api/v1/health").status, 200)
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"reset":true}"#).status, 200)
    }

    /// Seconds computed in floating point (`timedelta(hours=1).total_seconds()` is 3600.0) are
    /// taken when whole; a fraction is refused.
    func testClockAdvanceTakesAWholeNumberWrittenAsAFraction() throws {
        defer { _ = try? client.post("/api/v1/clock", #"{"reset":true}"#) }
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","time_to_live":3000,"data":{"n":"1"}}"#)))
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":3600.0}"#).status, 200)
        XCTAssertEqual(try inbox("a-offline").last?["status"]?.stringValue, "expired")
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":1e3}"#).status, 200)
        let half = try client.post("/api/v1/clock", #"{"advance_s":1.5}"#)
        XCTAssertEqual(half.status, 400)
        XCTAssertTrue(half.text.contains("advance_s must be an integer"), half.text)
    }

    func testStateSurvivesARestartOfTheEngine() throws {
        let dir = try temporaryDirectory("storage")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        let c1 = first.client()
        for k in ["k1", "k2", "k3", "k4"] { XCTAssertNil(singleError(try c1.sendJSON("{\"to\":\"a-offline\",\"collapse_key\":\"\(k)\"}"))) }
        c1.disconnect()
        first.stop()
        // After a restart the held collapse keys are known again: a fifth still evicts k1.
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        XCTAssertEqual(try c2.get("/api/v1/devices/a-offline").object?["pending"]?.numberValue?.int64, 4)
        XCTAssertNil(singleError(try c2.sendJSON(#"{"to":"a-offline","collapse_key":"k5"}"#)))
        XCTAssertEqual(items(try c2.get("/api/v1/devices/a-offline/messages")).map { $0["status"]?.stringValue },
                       ["dropped", "pending", "pending", "pending", "pending"])
    }
}
