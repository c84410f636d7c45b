@testable import APNs
import FCMCore
@testable import FCMServer
import XCTest

/// The record's `apns` block, written straight as bytes (APNsRecordBlock.swift), against the
/// form it had before: a tree of JSON values built in order and serialized compact, which held
/// the `headers` the stored block now leaves to be put back when read.
final class APNsRecordBlockTests: XCTestCase {
    /// The block as it was built before, serialized as the engine serializes platform blocks.
    private func treeForm(headers: APNsHeaders, apnsID: String, uniqueID: String?, payload: JSONObject,
                          authorizedBy: (name: String, id: String), environment: APNsEnvironment, now: Int64) -> String {
        var h = JSONObject()
        h["apns-push-type"] = .string(headers.pushType.rawValue)
        h["apns-priority"] = .string(String(headers.priority))
        if let topic = headers.topic { h["apns-topic"] = .string(topic) }
        h["apns-expiration"] = .string(String(headers.expiration ?? (now / 1000 + APNsRoutes.defaultTimeToLive)))
        if let c = headers.collapseID { h["apns-collapse-id"] = .string(c) }
        h["apns-id"] = .string(apnsID)
        func text(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        let block: [(String, JSONValue)] = [
            ("push_type", .string(headers.pushType.rawValue)), ("topic", text(headers.topic)),
            ("priority", .number(JSONNumber(Int64(headers.priority)))),
            ("expiration", headers.expiration.map { .number(JSONNumber($0)) } ?? .null),
            ("collapse_id", text(headers.collapseID)), ("environment", .string(environment.rawValue)),
            (authorizedBy.name, .string(authorizedBy.id)),
            ("apns_id", .string(apnsID)), ("apns_unique_id", text(uniqueID)), ("headers", .object(h)), ("payload", .object(payload)),
        ]
        return JSONValue.object(JSONObject([("apns", .object(JSONObject(block)))])).serialized()
    }

    private func check(_ sent: [(name: String, value: String)], body: String, topicRequired: Bool = true, uniqueID: String?,
                       authorizedBy: (name: String, id: String), environment: APNsEnvironment,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let bytes = Array(body.utf8)
        let headers = try APNsHeaders.parse(sent, body: bytes, topicRequired: topicRequired)
        let payload = try XCTUnwrap(JSONParser.parse(bytes).objectValue, file: file, line: line)
        let now: Int64 = 1_796_000_123_456
        let apnsID = "0d9f8a4c-1b2e-4c3d-8e4f-5a6b7c8d9e0f"
        // The payload as the route keeps it: the body's compact text, not the parsed tree.
        var sentBody = APNsBody(bytes)
        let kept = try XCTUnwrap(sentBody.object()?.text, file: file, line: line)
        let written = APNsRoutes.recordedBlock(headers: headers, apnsID: apnsID, uniqueID: uniqueID, payload: kept,
                                               authorizedBy: authorizedBy, environment: environment)
        let tree = treeForm(headers: headers, apnsID: apnsID, uniqueID: uniqueID, payload: payload,
                            authorizedBy: authorizedBy, environment: environment, now: now)
        // Stored: the old form less its `headers`, which repeat the fields beside them.
        let full = try XCTUnwrap(JSONParser.parse(Array(tree.utf8)).objectValue?["apns"]?.objectValue, file: file, line: line)
        var stored = JSONObject()
        for m in full.members where m.key != "headers" { stored[m.key] = m.value }
        XCTAssertEqual(written, JSONValue.object(JSONObject([("apns", .object(stored))])).serialized(), file: file, line: line)
        // Read back: the headers put back exactly where and as they were.
        let back = try XCTUnwrap(JSONParser.parse(Array(written.utf8)).objectValue?["apns"]?.objectValue, file: file, line: line)
        let restored = APNsRecordBlock.withHeaders(back, acceptedAtMillis: now)
        XCTAssertEqual(JSONValue.object(JSONObject([("apns", .object(restored))])).serialized(), tree, file: file, line: line)
        // A block that has its headers (an older store's record, a v1 message's) is left alone.
        XCTAssertEqual(APNsRecordBlock.withHeaders(full, acceptedAtMillis: 0), full, file: file, line: line)
        var v1 = JSONObject()
        v1["headers"] = .object(JSONObject([("apns-priority", .string("5"))]))
        XCTAssertEqual(APNsRecordBlock.withHeaders(v1, acceptedAtMillis: now), v1, file: file, line: line)
    }

    /// A refused send's token and apns-* headers are kept up to 256 UTF-8 bytes, cut between
    /// characters.
    func testRefusedSendsKeepAtMost256BytesOfATokenOrHeader() {
        XCTAssertEqual(APNsRoutes.clipped(String(repeating: "a", count: 300)), String(repeating: "a", count: 256))
        XCTAssertEqual(APNsRoutes.clipped(String(repeating: "é", count: 300)), String(repeating: "é", count: 128))
        XCTAssertEqual(APNsRoutes.clipped("a" + String(repeating: "😀", count: 100)).utf8.count, 253, "no half character")
        XCTAssertEqual(APNsRoutes.clipped("short"), "short")
    }

    func testEveryHeaderGiven() throws {
        try check([("apns-push-type", "alert"), ("apns-topic", "com.example.app"), ("apns-priority", "5"),
                   ("apns-expiration", "1796003600"), ("apns-collapse-id", "score \"x\"\\y")],
                  body: #"{"aps":{"alert":{"title":"Score","body":"5x1 \u00e9 ✓"}},"time":"15:10","n":[1,2.5,-3e2,true,null]}"#,
                  uniqueID: "6a1c2b3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d", authorizedBy: ("key_id", "ABC123DEFG"), environment: .sandbox)
    }

    func testDefaultsOnlyAndACertificate() throws {
        // No push type (background: no aps.alert), no expiration, priority 10 by default, no topic.
        try check([], body: #"{"aps":{"content-available":1},"tab\tline\n":"\u0001"}"#, topicRequired: false, uniqueID: nil,
                  authorizedBy: ("certificate_id", "01AB"), environment: .production)
    }

    func testExpirationZeroAndAnEmptyPayload() throws {
        try check([("apns-topic", "com.example.app.voip"), ("apns-push-type", "voip"), ("apns-expiration", "0")],
                  body: "{}", uniqueID: nil, authorizedBy: ("key_id", "KEY0000001"), environment: .production)
    }
}
