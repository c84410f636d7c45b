import FCMCore
import FCMTesting
import Foundation
import XCTest

/// `GET /api/v1/stats`: the overview's counters, counted as sends are decided (issue 14).
final class StatsTests: ServerTestCase {
    func stats(_ c: HTTPTestClient? = nil) throws -> String {
        let r = try (c ?? client).get("/api/v1/stats")
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        return r.text
    }

    func testAFreshServerCountsNothingButItsDevices() throws {
        XCTAssertEqual(try stats(), #"{"messages":{"accepted":0,"rejected":0},"errors":{},"pending":0,"xmpp_connections":0,"devices":6}"#)
    }

    func testLegacySendsCountAcceptedRejectedErrorsByCodeAndPending() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","data":{"k":"v"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"k":"v"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline","data":{"k":"w"}}"#)))
        // One accepted record with one failed recipient.
        XCTAssertEqual(results(try client.sendJSON(#"{"registration_ids":["a1","a2"]}"#)).count, 2)
        // All recipients failed: a rejected record, its error counted once per recipient.
        XCTAssertEqual(singleError(try client.sendJSON(#"{"to":"a2"}"#)), "NotRegistered")
        // Refused as a whole: a bad key (401) and a body that is not JSON (400).
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try client.sendJSON(#"{"to":"#).status, 400)
        XCTAssertEqual(try stats(), """
            {"messages":{"accepted":4,"rejected":3},"errors":{"InvalidJson":1,"NotRegistered":2,"Unauthorized":1},\
            "pending":2,"xmpp_connections":0,"devices":6}
            """)
        // Deliveries held by an offline device leave the pending count when it comes online.
        XCTAssertEqual(try client.patch("/api/v1/devices/a-offline", #"{"online":true}"#).status, 200)
        XCTAssertTrue(try stats().contains(#""pending":0,"#))
    }

    func testXMPPSendsAndConnectionsCount() throws {
        let c = try XMPPTestClient(port: server.app.xmppPort)
        try c.login(user: "111@fcm.googleapis.com", password: "key-111")
        c.sendDownstream(#"{"to":"a1","message_id":"m-1","data":{"k":"v"}}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        c.sendDownstream(#"{"to":"bad token","message_id":"m-2"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "nack")
        XCTAssertEqual(try stats(), """
            {"messages":{"accepted":1,"rejected":1},"errors":{"InvalidRegistration":1},"pending":0,"xmpp_connections":1,"devices":6}
            """)
    }

    func testResetClearsTheCounters() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a-offline"}"#)))
        XCTAssertEqual(try client.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try stats(), #"{"messages":{"accepted":0,"rejected":0},"errors":{},"pending":0,"xmpp_connections":0,"devices":6}"#)
    }

    func testARestartKeepsTheCounts() throws {
        let dir = try temporaryDirectory("stats")
        let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        let c1 = first.client()
        XCTAssertEqual(try c1.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertNil(singleError(try c1.sendJSON(#"{"to":"a-offline"}"#)))
        XCTAssertEqual(results(try c1.sendJSON(#"{"registration_ids":["a1","a2","a2"]}"#)).count, 3)
        XCTAssertEqual(try c1.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        XCTAssertEqual(try c1.sendJSON(#"{"to":"/topics/news"}"#).status, 200)
        let before = try stats(c1)
        c1.disconnect()
        first.stop()
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c2 = second.client()
        defer { c2.disconnect() }
        XCTAssertEqual(try stats(c2), before)
        XCTAssertTrue(before.hasPrefix(#"{"messages":{"accepted":3,"rejected":1},"errors":{"NotRegistered":2,"#), before)
        XCTAssertTrue(before.hasSuffix(#""pending":1,"xmpp_connections":0,"devices":6}"#), before)
        // Counting goes on from there.
        XCTAssertNil(singleError(try c2.sendJSON(#"{"to":"a1"}"#)))
        XCTAssertTrue(try stats(c2).hasPrefix(#"{"messages":{"accepted":4,"#))
    }

    /// The stored sends are counted when the counts are first asked for, not at start: a send
    /// made after a restart but before that first read counts once.
    func testASendBeforeTheFirstReadAfterARestartCountsOnce() throws {
        let dir = try temporaryDirectory("stats-lazy")
        do {
            let first = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
            defer { first.stop() }
            let c = first.client()
            defer { c.disconnect() }
            XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
            XCTAssertEqual(try c.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
        }
        let second = try TestServer(fixtures: [errorTableFixture], db: dir + "/s.sqlite")
        defer { second.stop() }
        let c = second.client()
        defer { c.disconnect() }
        XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
        let counted = try stats(c)
        XCTAssertTrue(counted.hasPrefix(#"{"messages":{"accepted":2,"rejected":1},"#), counted)
    }
}

/// HTTP v1 sends count with their FcmError codes, as their records name them.
final class StatsV1Tests: V1TestCase {
    func testV1SendsCountByTheirOwnCodes() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1","data":{"k":"v"}}}"#).status, 200)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a2"}}"#).status, 404)
        XCTAssertEqual(try v1Send(#"{"message":{"token":"a1"}}"#, bearer: "not-a-token").status, 401)
        let r = try client.get("/api/v1/stats")
        XCTAssertEqual(r.text, """
            {"messages":{"accepted":1,"rejected":2},"errors":{"UNAUTHENTICATED":1,"UNREGISTERED":1},\
            "pending":0,"xmpp_connections":0,"devices":6}
            """)
    }
}
