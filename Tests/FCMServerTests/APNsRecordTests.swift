import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// What the control API says of APNs: health's `apns` member, the record's APNs fields, and
/// APNs sends counted in the stats and their series, through the real server.
extension APNsTests {
    func testHealthNamesHowAPNsIsServedAndItsTeamsAndKeys() throws {
        let health = try server.client().get("/api/v1/health")
        XCTAssertEqual(health.object?["apns"]?.serialized(),
                       #"{"default_environment":"sandbox","environments":["production","sandbox"],"h2c":true,"tls":false,"teams":1,"keys":1}"#)
        let dir = NSTemporaryDirectory() + "apns-health-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let s = try TestServer(db: dir + "/store.sqlite", extraArguments: ["--https-port", "0", "--apns-environment", "production"])
        defer { s.stop() }
        XCTAssertEqual(try s.client().get("/api/v1/health").object?["apns"]?.serialized(),
                       #"{"default_environment":"production","environments":["production","sandbox"],"h2c":true,"tls":true,"teams":0,"keys":0}"#)
    }

    func testTheRecordNamesPushTypeTopicPriorityExpirationCollapseIDAndKey() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let a = try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-collapse-id", "score"),
                                                               ("apns-expiration", "1900000000")])
        XCTAssertEqual(a.status, 200, a.body)
        let record = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns")).first)
        XCTAssertEqual(record["apns_id"]?.stringValue, a.headers["apns-id"])
        XCTAssertEqual(record["apns_unique_id"]?.stringValue, a.headers["apns-unique-id"])
        let apns = try XCTUnwrap(record["apns"]?.objectValue)
        XCTAssertEqual(apns["push_type"]?.stringValue, "alert", "Apple's default: the payload has aps.alert")
        XCTAssertEqual(apns["topic"]?.stringValue, topic)
        XCTAssertEqual(apns["priority"], .number(JSONNumber(10)), "Apple's default")
        XCTAssertEqual(apns["expiration"], .number(JSONNumber(1_900_000_000)))
        XCTAssertEqual(apns["collapse_id"]?.stringValue, "score")
        XCTAssertEqual(apns["environment"]?.stringValue, "sandbox")
        XCTAssertEqual(apns["key_id"]?.stringValue, keyID)
        // Apple's headers as the send had them, defaults filled in, in this order, before the payload.
        let id0 = try XCTUnwrap(a.headers["apns-id"])
        XCTAssertEqual(apns["headers"]?.serialized(),
                       #"{"apns-push-type":"alert","apns-priority":"10","apns-topic":"\#(topic)","apns-expiration":"1900000000","apns-collapse-id":"score","apns-id":"\#(id0)"}"#)
        XCTAssertEqual(apns.members.map(\.key).suffix(2), ["headers", "payload"])
        // The one fetched by its id says the same.
        let id = try XCTUnwrap(record["message_id"]?.stringValue)
        let one = try XCTUnwrap(server.client().get("/api/v1/messages/\(pathEncode(id))").object)
        XCTAssertEqual(one["apns"], record["apns"])
        // A background push without a priority or an expiration: 5, and no expiration.
        XCTAssertEqual(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic)], body: #"{"aps":{"content-available":1}}"#).status, 200)
        let background = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns")).first?["apns"]?.objectValue)
        XCTAssertEqual(background["push_type"]?.stringValue, "background")
        XCTAssertEqual(background["priority"], .number(JSONNumber(5)))
        XCTAssertEqual(background["expiration"], .null)
        XCTAssertEqual(background["collapse_id"], .null)
        // Without apns-expiration: kept 30 days from its acceptance, which its header says.
        let latest = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns")).first)
        let accepted = try XCTUnwrap(parseRFC3339(try XCTUnwrap(latest["accepted_at"]?.stringValue)))
        let bgHeaders = try XCTUnwrap(background["headers"]?.objectValue)
        XCTAssertEqual(bgHeaders["apns-expiration"]?.stringValue, String(accepted / 1000 + 30 * 86_400))
        XCTAssertEqual(bgHeaders.members.map(\.key), ["apns-push-type", "apns-priority", "apns-topic", "apns-expiration", "apns-id"])
    }

    func testStatsCountAPNsSendsAsSends() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        func stats() throws -> JSONObject { try XCTUnwrap(c.get("/api/v1/stats").object) }
        func count(_ o: JSONObject, _ group: String, _ name: String) -> Int64 {
            o[group]?.objectValue?[name]?.numberValue?.int64 ?? 0
        }
        func seriesSends() throws -> Int64 {
            let s = try XCTUnwrap(c.get("/api/v1/stats/series?window=60&bucket=60").object)
            return s["sends"]?.arrayValue?.compactMap { $0.numberValue?.int64 }.reduce(0, +) ?? -1
        }
        let before = try stats(), sentBefore = try seriesSends()
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-priority", "7")]), 400, "BadPriority")
        let after = try stats()
        XCTAssertEqual(count(after, "messages", "accepted"), count(before, "messages", "accepted") + 1)
        XCTAssertEqual(count(after, "messages", "rejected"), count(before, "messages", "rejected") + 1)
        XCTAssertEqual(count(after, "errors", "BadPriority"), count(before, "errors", "BadPriority") + 1)
        XCTAssertEqual(try seriesSends(), sentBefore + 2)
    }
}
