@testable import APNs
import FCMCore
@testable import FCMServer
import FCMTesting
import HTTPServer
import Foundation
import TLS
import XCTest

/// APNs's provider API through the real server over h2c with prior knowledge (curl): every
/// reason the send path reaches, Apple's exact body, the `apns-id`, provider tokens.
final class APNsTests: XCTestCase {
    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: String
    }

    var server: TestServer!
    var key: P256PrivateKey!
    var keyID = ""
    let team = "TEAM123456"
    let topic = "com.example.demo.ios"
    let device = String(repeating: "ab", count: 32)

    override func setUpWithError() throws {
        try start()
    }

    /// A server with `arguments` (unknown tokens refused unless said), and a key of `team` for
    /// the demo iOS app made on it.
    func start(_ arguments: [String] = [], unknownTokens: String = "reject") throws {
        server = try TestServer(unknownTokens: unknownTokens, extraArguments: arguments)
        let made = try server.client().post("/api/v1/apns/keys", #"{"team_id":"\#(team)","bundle_ids":["\#(topic)"]}"#)
        XCTAssertEqual(made.status, 201, made.text)
        let o = try XCTUnwrap(JSONParser.parse(Array(made.text.utf8)).objectValue)
        keyID = try XCTUnwrap(o["key_id"]?.stringValue)
        XCTAssertEqual(o["team_id"]?.stringValue, team)
        let pem = try XCTUnwrap(o["private_key_pem"]?.stringValue)
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), pem)
        key = try P256PrivateKey(pem: pem)
    }

    override func tearDown() {
        server?.stop()
    }

    /// A provider token: ES256 over the header and claims given.
    func token(kid: String? = nil, iss: String? = nil, iat: Int64? = nil, alg: String = "ES256", signer: P256PrivateKey? = nil) throws -> String {
        let header = #"{"alg":"\#(alg)","kid":"\#(kid ?? keyID)"}"#
        let claims = #"{"iss":"\#(iss ?? team)","iat":\#(iat ?? Int64(Date().timeIntervalSince1970))}"#
        let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try (signer ?? key).signES256(Array(input.utf8)))
    }

    /// One request over h2c (or HTTP/1.1 with `http1`), through curl.
    func send(path: String? = nil, method: String = "POST", headers: [(String, String)]? = nil, body: String? = #"{"aps":{"alert":"hi"}}"#,
              http1: Bool = false, authorization: String?? = nil) throws -> Answer {
        var args = ["-sS", "-i", "--max-time", "20", "-X", method, http1 ? "--http1.1" : "--http2-prior-knowledge"]
        let auth: String? = try authorization ?? ("bearer " + token())
        if let auth { args += ["-H", "authorization: \(auth)"] }
        for (n, v) in headers ?? [("apns-topic", topic)] { args += ["-H", "\(n): \(v)"] }
        var file: String?
        if let body {
            let f = NSTemporaryDirectory() + "apns-body-\(UUID().uuidString)"
            try body.write(toFile: f, atomically: true, encoding: .utf8)
            file = f
            args += ["--data-binary", "@\(f)"]
        }
        defer { if let file { try? FileManager.default.removeItem(atPath: file) } }
        args.append("http://127.0.0.1:\(server.port)\(path ?? "/3/device/\(device)")")
        let r = try runProcess(try HTTP2Tests.tool("curl"), args)
        XCTAssertEqual(r.status, 0, r.stderr)
        let parts = r.stdout.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var fields: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: fields, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// `apnsID`: the `apns-id` the request sent, echoed; without one a new UUID.
    func assertReason(_ a: Answer, _ status: Int, _ reason: String, apnsID: String? = nil,
                      file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.status, status, a.body, file: file, line: line)
        XCTAssertEqual(a.body, #"{"reason":"\#(reason)"}"#, file: file, line: line)
        XCTAssertEqual(a.headers["content-type"], "application/json", file: file, line: line)
        if let apnsID {
            XCTAssertEqual(a.headers["apns-id"], apnsID, file: file, line: line)
        } else {
            XCTAssertTrue(isCanonicalUUID(a.headers["apns-id"] ?? ""), "\(a.headers)", file: file, line: line)
        }
    }

    func testEveryHeaderAndBodyReasonThroughTheServer() throws {
        let t = topic
        let known = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        let rows: [(String, Answer)] = [
            ("BadPath", try send(path: "/3/devices/\(device)")),
            ("BadPath", try send(path: "/3/device/\(device)/more")),
            ("MethodNotAllowed", try send(method: "PUT")),
            ("MissingProviderToken", try send(authorization: .some(nil))),
            ("InvalidPushType", try send(headers: [("apns-topic", t), ("apns-push-type", "banner")])),
            ("BadMessageId", try send(headers: [("apns-topic", t), ("apns-id", "not-a-uuid")])),
            ("BadExpirationDate", try send(headers: [("apns-topic", t), ("apns-expiration", "tomorrow")])),
            ("BadPriority", try send(headers: [("apns-topic", t), ("apns-priority", "7")])),
            ("BadPriority", try send(headers: [("apns-topic", t), ("apns-push-type", "background"), ("apns-priority", "10")])),
            ("MissingTopic", try send(headers: [])),
            ("BadTopic", try send(headers: [("apns-topic", t), ("apns-push-type", "voip")])),
            ("BadCollapseId", try send(headers: [("apns-topic", t), ("apns-collapse-id", String(repeating: "c", count: 65))])),
            ("DuplicateHeaders", try send(headers: [("apns-topic", t), ("apns-topic", t)])),
            // The provider token twice (each valid): the header sent twice, not an invalid token.
            ("DuplicateHeaders", try send(headers: [("apns-topic", t), ("authorization", "bearer " + token())])),
            ("MissingDeviceToken", try send(path: "/3/device/")),
            ("BadDeviceToken", try send(path: "/3/device/xyz")),
            ("TopicDisallowed", try send(headers: [("apns-topic", "com.other.app")])),
            ("PayloadEmpty", try send(path: known, body: nil)),
            ("BadDeviceToken", try send()),
        ]
        let status = ["BadPath": 404, "MethodNotAllowed": 405, "MissingProviderToken": 403]
        for (reason, answer) in rows {
            // Every error echoes the request's apns-id, a malformed one too.
            assertReason(answer, status[reason] ?? 400, reason, apnsID: reason == "BadMessageId" ? "not-a-uuid" : nil)
        }
        let large = #"{"aps":{"alert":""# + String(repeating: "x", count: 4097) + #""}}"#
        assertReason(try send(path: known, body: large), 413, "PayloadTooLarge")
    }

    func testPayloadLimitsAtTheirEdgesForAlertAndVoIP() throws {
        func payload(_ n: Int) -> String {
            let head = #"{"aps":{"alert":""#, tail = #""}}"#
            return head + String(repeating: "x", count: n - head.utf8.count - tail.utf8.count) + tail
        }
        let known = "/3/device/\(try apnsToken(of: "demo-ios-1"))"
        XCTAssertEqual(try send(path: known, body: payload(4096)).status, 200)
        assertReason(try send(path: known, body: payload(4097)), 413, "PayloadTooLarge")
        let voip = [("apns-topic", topic + ".voip"), ("apns-push-type", "voip")]
        XCTAssertEqual(try send(path: known, headers: voip, body: payload(5120)).status, 200)
        assertReason(try send(path: known, headers: voip, body: payload(5121)), 413, "PayloadTooLarge")
        XCTAssertEqual(items(try server.client().get("/api/v1/devices/demo-ios-1/messages")).count, 2, "the two within their limits")
    }

    /// The contract's order: the topic is checked against the device (its environment and app,
    /// an unknown token) before the body and its size, and those before the device's state. An
    /// unknown token becomes a device only for a send that passed the body and size rules.
    func testTheDeviceStepComesBeforeTheBodyAndTheBodyBeforeTheDevicesState() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let large = #"{"aps":{"alert":""# + String(repeating: "x", count: 4097) + #""}}"#
        XCTAssertEqual(try server.client().request("PUT", "/api/v1/apns/teams/\(team)", headers: [("Content-Type", "application/json")],
                                                   body: Array(#"{"bundle_ids":["\#(topic)","com.example.other"]}"#.utf8)).status, 200)
        for body in [nil, large] {
            assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", "com.example.other")], body: body),
                         400, "DeviceTokenNotForTopic")
            assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("host", "api.push.apple.com")], body: body),
                         400, "BadDeviceToken")
            // Unknown, with unknown tokens refused.
            assertReason(try send(body: body), 400, "BadDeviceToken")
        }
        // Uninstalled: the body's rules come first, then 410.
        XCTAssertEqual(try server.client().post("/api/v1/devices/demo-ios-1:unregister").status, 200)
        assertReason(try send(path: "/3/device/\(token)", body: nil), 400, "PayloadEmpty")
        assertReason(try send(path: "/3/device/\(token)", body: large), 413, "PayloadTooLarge")
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 410)

        // Unknown tokens registered: a refused body makes no device; an accepted send does.
        server.stop()
        try start(unknownTokens: "register")
        let fresh = String(repeating: "3c", count: 32)
        assertReason(try send(path: "/3/device/\(fresh)", body: nil), 400, "PayloadEmpty")
        assertReason(try send(path: "/3/device/\(fresh)", body: large), 413, "PayloadTooLarge")
        XCTAssertEqual(items(try server.client().get("/api/v1/devices?apns_token=\(fresh)")).count, 0, "no device for a refused send")
        XCTAssertEqual(try send(path: "/3/device/\(fresh)").status, 200)
        XCTAssertEqual(items(try server.client().get("/api/v1/devices?apns_token=\(fresh)")).count, 1)
        // No project has the app: refused at the device step, before the body.
        XCTAssertEqual(try server.client().request("PUT", "/api/v1/apns/teams/\(team)", headers: [("Content-Type", "application/json")],
                                                   body: Array(#"{"bundle_ids":["com.nobody"]}"#.utf8)).status, 200)
        let refused = try send(path: "/3/device/\(String(repeating: "77", count: 32))", headers: [("apns-topic", "com.nobody")], body: nil)
        assertReason(refused, 400, "BadDeviceToken")
        let record = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(record["error_detail"]?.stringValue,
                       "no device has this APNs token, and no project has com.nobody as an iOS app to register it in")
    }

    func testProviderTokenRules() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let stranger = try P256PrivateKey()
        let rows: [(String, String)] = [
            ("InvalidProviderToken", "bearer not.a.jwt"),
            ("InvalidProviderToken", "basic abc"),
            ("InvalidProviderToken", "bearer " + (try token(alg: "ES384"))),
            ("InvalidProviderToken", "bearer " + (try token(kid: "ABCDEFGHIJ"))),
            ("InvalidProviderToken", "bearer " + (try token(signer: stranger))),
            ("InvalidProviderToken", "bearer " + (try token(iss: "OTHER12345"))),
            ("InvalidProviderToken", "bearer " + (try token(iat: now + 120))),
            ("InvalidProviderToken", "bearer " + String(repeating: "a", count: 10_000)),
            ("ExpiredProviderToken", "bearer " + (try token(iat: now - 3700))),
        ]
        for (reason, auth) in rows {
            assertReason(try send(authorization: .some(auth)), 403, reason)
        }
        // A good token passes; after the mock's clock moves an hour on, the same text (cached) is expired.
        let good = "bearer " + (try token())
        assertReason(try send(authorization: .some(good)), 400, "BadDeviceToken")
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        assertReason(try send(authorization: .some(good)), 403, "ExpiredProviderToken")
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"reset":true}"#).status, 200)
        assertReason(try send(authorization: .some(good)), 400, "BadDeviceToken")
        // A revoked key's tokens are refused at once, cached or not.
        XCTAssertEqual(try server.client().delete("/api/v1/apns/keys/\(keyID)").status, 204)
        assertReason(try send(authorization: .some(good)), 403, "InvalidProviderToken")
        XCTAssertEqual(try server.client().delete("/api/v1/apns/keys/\(keyID)").status, 404)
    }

    /// The verified-token cache is keyed by the whole token (its hash reads only the length and
    /// the signature's end): a cached token's signature on other claims, or on claims of the same
    /// length, is checked afresh and refused; the same token with `Bearer` and extra blanks is
    /// the same token.
    func testTheTokenCacheMatchesWholeTokensOnly() throws {
        // Signed with `now`, so the claims forged from `now` below are never the good token's.
        let now = Int64(Date().timeIntervalSince1970)
        let good = try token(iat: now)
        assertReason(try send(authorization: .some("bearer " + good)), 400, "BadDeviceToken")
        let parts = good.split(separator: ".").map(String.init)
        for claims in [#"{"iss":"\#(team)","iat":\#(now - 1)}"#, #"{"iss":"\#(team)","iat":\#(now)}  "#,
                       #"{"iss":"OTHER12345","iat":\#(now)}"#] {
            let forged = parts[0] + "." + base64URLEncode(Array(claims.utf8)) + "." + parts[2]
            XCTAssertNotEqual(forged, good)
            assertReason(try send(authorization: .some("bearer " + forged)), 403, "InvalidProviderToken")
        }
        for variant in ["Bearer " + good, "bearer   " + good, "BEARER \t" + good] {
            assertReason(try send(authorization: .some(variant)), 400, "BadDeviceToken")
        }
        // Moved an hour on, every spelling of the cached token is expired alike.
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        assertReason(try send(authorization: .some("Bearer  " + good)), 403, "ExpiredProviderToken")
    }

    func testApnsIDIsEchoedOrMadeAndHTTP1GetsA505() throws {
        let id = "123E4567-E89B-12D3-A456-426614174000"
        let echoed = try send(headers: [("apns-topic", topic), ("apns-id", id)])
        XCTAssertEqual(echoed.headers["apns-id"], id)
        let made = try send()
        XCTAssertEqual(made.headers["apns-id"], made.headers["apns-id"]?.lowercased())
        let h1 = try send(http1: true)
        XCTAssertEqual(h1.status, 505)
        XCTAssertEqual(h1.body, "APNs speaks HTTP/2 only: send this request over HTTP/2 (h2, or h2c with prior knowledge)\n")
    }

    func testKeysAndTeamsThroughTheControlAPI() throws {
        let c = server.client()
        let list = try c.get("/api/v1/apns/keys")
        XCTAssertEqual(list.status, 200)
        XCTAssertTrue(list.text.contains(keyID))
        XCTAssertFalse(list.text.contains("PRIVATE KEY"), list.text)
        XCTAssertTrue(list.text.contains("BEGIN PUBLIC KEY"), list.text)
        XCTAssertEqual(try c.post("/api/v1/apns/keys", #"{"team_id":"short"}"#).status, 400)
        XCTAssertEqual(try c.post("/api/v1/apns/keys", #"{"team_id":"\#(team)","key_id":"\#(keyID)"}"#).status, 409)
        XCTAssertEqual(try c.post("/api/v1/apns/keys", #"{"team_id":"\#(team)","private_key":"x"}"#).status, 400)
        let put = try c.request("PUT", "/api/v1/apns/teams/\(team)", headers: [("Content-Type", "application/json")], body: Array(#"{"bundle_ids":["com.example.other"]}"#.utf8))
        XCTAssertEqual(put.status, 200, put.text)
        XCTAssertTrue(put.text.contains(#""bundle_ids":["com.example.other"]"#), put.text)
        // The team lost the demo app: its topic is now disallowed.
        assertReason(try send(), 400, "TopicDisallowed")
        XCTAssertTrue(try c.get("/api/v1/apns/teams").text.contains(#""team_id":"\#(team)""#))
    }

    func testKeysAndTeamsOutliveARestart() throws {
        let db = NSTemporaryDirectory() + "apns-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: db) }
        var s = try TestServer(db: db)
        let made = try s.client().post("/api/v1/apns/keys", #"{"team_id":"ZZZZZ99999","bundle_ids":["com.a"],"key_id":"KEYKEY0001"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        s.stop()
        s = try TestServer(db: db)
        defer { s.stop() }
        XCTAssertTrue(try s.client().get("/api/v1/apns/keys").text.contains(#""key_id":"KEYKEY0001","team_id":"ZZZZZ99999""#))
        XCTAssertTrue(try s.client().get("/api/v1/apns/teams").text.contains(#""bundle_ids":["com.a"]"#))
    }

    /// docs/apns.md's two shell snippets, run as written against this server (its port for 8080):
    /// the key they make signs the token the second one sends.
    /// docs/apns.md's shell blocks, run as written on this server's port: the key made over the
    /// control API, then the curl recipe (`fcm-mock apns-key`, `fcm-mock apns-token`, the demo
    /// iOS device's APNs token, the send over h2c), which must be answered 200.
    func testTheDocsSnippetsRun() throws {
        let doc = try String(contentsOf: DocumentedFlagsTests.root.appendingPathComponent("docs/apns.md"), encoding: .utf8)
        let blocks = doc.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        XCTAssertEqual(blocks.count, 3, "keys, a certificate (APNsCertificateAuthTests runs it), the send")
        let dir = NSTemporaryDirectory() + "apns-doc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bin = URL(fileURLWithPath: BinaryServer.executablePath).deletingLastPathComponent().path
        func run(_ script: String) throws -> String {
            let r = try runProcess("/bin/bash", ["-c", "set -e; cd \"$0\"; " + script.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(server.port)"), dir],
                                   environment: ["PATH": "\(bin):/usr/bin:/bin", "FCM_MOCK_URL": "http://127.0.0.1:\(server.port)"])
            XCTAssertEqual(r.status, 0, r.stderr)
            return r.stdout
        }
        let made = try XCTUnwrap(JSONParser.parse(Array(try run(blocks[0]).utf8)).objectValue)
        XCTAssertNoThrow(try P256PrivateKey(pem: try XCTUnwrap(made["private_key_pem"]?.stringValue)))
        XCTAssertEqual(made["team_id"]?.stringValue, "ABCDE12345")
        let answer = try run(blocks[2])
        XCTAssertTrue(answer.contains("wrote AuthKey.p8: key id KEY1234567, team ABCDE12345\n"), answer)
        XCTAssertTrue(answer.contains("HTTP/2 200"), answer)
        let record = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(record["apns"]?.objectValue?["key_id"]?.stringValue, "KEY1234567")
        XCTAssertEqual(record["target"]?.objectValue?["value"]?.stringValue, "demo-ios-1")
    }

    /// The APNs token of an iOS device, as the control API shows it.
    func apnsToken(of fcmToken: String) throws -> String {
        let d = try XCTUnwrap(server.client().get("/api/v1/devices/\(fcmToken)").object)
        XCTAssertEqual(d["apns_environment"]?.stringValue, "sandbox")
        return try XCTUnwrap(d["apns_token"]?.stringValue)
    }

    /// A refreshed iOS device's new token carries its APNs token; a reset drops the new device,
    /// and the fixture device is found by its APNs token again and takes the sends to it.
    func testAResetAfterARefreshGivesTheAPNsTokenBackToTheFixtureDevice() throws {
        let token = try apnsToken(of: "demo-ios-1")
        XCTAssertEqual(try server.client().post("/api/v1/devices/demo-ios-1:refresh", "").status, 200)
        XCTAssertEqual(try server.client().post("/api/v1/reset", "").status, 204)
        let found = items(try server.client().get("/api/v1/devices?apns_token=\(token)"))
        XCTAssertEqual(found.map { $0["token"]?.stringValue }, ["demo-ios-1"])
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        XCTAssertEqual(items(try server.client().get("/api/v1/devices/demo-ios-1/messages")).count, 1)
        XCTAssertEqual(items(try server.client().get("/api/v1/devices?apns_token=\(token)")).count, 1, "no second device")
    }

    func testASendReachesTheIOSDeviceWithTheAPNsTransport() throws {
        let token = try apnsToken(of: "demo-ios-1")
        XCTAssertNoThrow(try APNsDeviceToken.check(token))
        XCTAssertNil(try server.client().get("/api/v1/devices/demo-android-1").object?["apns_token"], "only iOS devices have one")
        let found = items(try server.client().get("/api/v1/devices?apns_token=\(token.uppercased())"))
        XCTAssertEqual(found.first?["token"]?.stringValue, "demo-ios-1")
        XCTAssertTrue(items(try server.client().get("/api/v1/devices?apns_token=\(device)")).isEmpty)

        let id = "0a0b0c0d-0000-4000-8000-000000000001"
        let a = try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-id", id), ("apns-collapse-id", "score")],
                         body: #"{"aps":{"alert":{"title":"Goal","body":"3-1"}},"match":7}"#)
        XCTAssertEqual(a.status, 200, a.body)
        XCTAssertEqual(a.body, "")
        XCTAssertEqual(a.headers["apns-id"], id)
        XCTAssertTrue(isCanonicalUUID(a.headers["apns-unique-id"] ?? ""), "\(a.headers)")
        let inbox = items(try server.client().get("/api/v1/devices/demo-ios-1/messages"))
        let entry = try XCTUnwrap(inbox.first)
        XCTAssertEqual(entry["status"]?.stringValue, "delivered", "\(entry)")
        XCTAssertEqual(entry["via"]?.objectValue?["transport"]?.stringValue, "apns", "\(entry)")
        let effective = try XCTUnwrap(entry["effective"]?.objectValue?["apns"]?.objectValue, "\(entry)")
        // apns.md §5: the entry names its transport, as a Web Push one does (and `via` too).
        XCTAssertEqual(entry["transport"]?.stringValue, "apns")
        XCTAssertEqual(entry["via"]?.objectValue?["transport"]?.stringValue, "apns")
        XCTAssertEqual(effective["payload"]?.objectValue?["match"], .number(JSONNumber(7)))
        let headers = try XCTUnwrap(effective["headers"]?.objectValue)
        XCTAssertEqual(headers["apns-push-type"]?.stringValue, "alert")
        XCTAssertEqual(headers["apns-priority"]?.stringValue, "10")
        XCTAssertEqual(headers["apns-collapse-id"]?.stringValue, "score")
        XCTAssertEqual(headers["apns-topic"]?.stringValue, topic)
        XCTAssertEqual(headers["apns-id"]?.stringValue, id)
    }

    /// The device path is cut as bytes when it is ASCII and as characters otherwise (a combining
    /// mark after a '/' makes it no '/'), as before; a token in upper case finds its device.
    func testTheDevicePathAndTheTokensCase() throws {
        XCTAssertEqual(try APNsRoutes.deviceToken(path: "/3/device/ab12"), "ab12")
        XCTAssertEqual(try APNsRoutes.deviceToken(path: "/3/device/"), "")
        XCTAssertEqual(try APNsRoutes.deviceToken(path: "/3/device/é1"), "é1")
        XCTAssertEqual(try APNsRoutes.deviceToken(path: "/3/device/a/\u{301}"), "a/\u{301}")
        for bad in ["/3/devices/ab", "/3/device/a/b", "/3/device", "/3/device/\u{301}ab", "/3/devicé/ab", "/3/device/é/"] {
            XCTAssertThrowsError(try APNsRoutes.deviceToken(path: bad)) { XCTAssertEqual(($0 as? APNsError)?.reason, .badPath, bad) }
        }
        let token = try apnsToken(of: "demo-ios-1")
        let before = items(try server.client().get("/api/v1/devices/demo-ios-1/messages")).count
        let a = try send(path: "/3/device/\(token.uppercased())")
        XCTAssertEqual(a.status, 200, a.body)
        XCTAssertEqual(items(try server.client().get("/api/v1/devices/demo-ios-1/messages")).count, before + 1)
    }

    func testKnownTokensOfAnotherAppEnvironmentOrStateAreRefused() throws {
        let token = try apnsToken(of: "demo-ios-1")
        // Another app of the same team: the device is not its.
        XCTAssertEqual(try server.client().request("PUT", "/api/v1/apns/teams/\(team)", headers: [("Content-Type", "application/json")],
                                                   body: Array(#"{"bundle_ids":["\#(topic)","com.example.other"]}"#.utf8)).status, 200)
        assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", "com.example.other")]), 400, "DeviceTokenNotForTopic")
        // Apple's production host: the device's token is a sandbox one.
        assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("host", "api.push.apple.com")]),
                     400, "BadDeviceToken")
        // Uninstalled: 410 with when it became invalid (the unregistering, its last sighting).
        let before = try XCTUnwrap(parseRFC3339(try XCTUnwrap(server.client().get("/api/v1/devices/demo-ios-1").object?["last_seen_at"]?.stringValue)))
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":5}"#).status, 200)
        XCTAssertEqual(try server.client().post("/api/v1/devices/demo-ios-1:unregister").status, 200)
        let seen = try XCTUnwrap(server.client().get("/api/v1/devices/demo-ios-1").object?["last_seen_at"]?.stringValue)
        let at = try XCTUnwrap(parseRFC3339(seen))
        XCTAssertGreaterThanOrEqual(at, before + 5_000, "the moment of the unregistering, on the mock's clock")
        let gone = try send(path: "/3/device/\(token)")
        XCTAssertEqual(gone.status, 410)
        XCTAssertEqual(gone.body, #"{"reason":"Unregistered","timestamp":\#(at)}"#)
    }

    func testTheRecordKeepsTheRequestItsKeyAndAnswerAndAnOfflineDeviceGetsItLater() throws {
        let token = try apnsToken(of: "demo-ios-1")
        XCTAssertEqual(try server.client().patch("/api/v1/devices/demo-ios-1", #"{"online":false}"#).status, 200)
        let a = try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-push-type", "background")],
                         body: #"{"aps":{"content-available":1}}"#)
        XCTAssertEqual(a.status, 200, a.body)
        var inbox = items(try server.client().get("/api/v1/devices/demo-ios-1/messages"))
        XCTAssertEqual(inbox.first?["status"]?.stringValue, "pending")
        let records = items(try server.client().get("/api/v1/messages"))
        let record = try XCTUnwrap(records.first { $0["transport"]?.stringValue == "apns" }, "\(records)")
        let apns = try XCTUnwrap(record["apns"]?.objectValue, "\(record)")
        XCTAssertEqual(apns["key_id"]?.stringValue, keyID)
        XCTAssertEqual(apns["environment"]?.stringValue, "sandbox")
        XCTAssertEqual(apns["headers"]?.objectValue?["apns-push-type"]?.stringValue, "background")
        XCTAssertEqual(apns["headers"]?.objectValue?["apns-priority"]?.stringValue, "5", "Apple's default for background")
        XCTAssertEqual(record["answer"]?.objectValue?["status"], .number(JSONNumber(200)), "\(record)")
        XCTAssertEqual(try server.client().patch("/api/v1/devices/demo-ios-1", #"{"online":true}"#).status, 200)
        inbox = items(try server.client().get("/api/v1/devices/demo-ios-1/messages"))
        XCTAssertEqual(inbox.first?["status"]?.stringValue, "delivered")
    }

    func testOverTheDeviceRateIsTooManyRequests() throws {
        server.stop()
        try start(["--device-rate", "1/1h"])
        let token = try apnsToken(of: "demo-ios-1")
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        assertReason(try send(path: "/3/device/\(token)"), 429, "TooManyRequests")
        // Recorded as answered: Apple's reason, and why.
        let record = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns")).first)
        XCTAssertEqual(record["status"]?.stringValue, "rejected")
        XCTAssertEqual(record["error"]?.stringValue, "TooManyRequests")
        XCTAssertEqual(record["error_detail"]?.stringValue, "over the per-device rate: at most 1 message a device in 3600000 ms")
    }

    func testARefusedSendIsRecordedOnceWithItsReasonAndAnswer() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let before = items(try server.client().get("/api/v1/messages?transport=apns")).count
        assertReason(try send(path: "/3/device/\(token)", headers: [("apns-topic", topic), ("apns-priority", "7")]), 400, "BadPriority")
        assertReason(try send(path: "/3/nothing"), 404, "BadPath")  // not a send: not recorded
        let records = items(try server.client().get("/api/v1/messages?transport=apns"))
        XCTAssertEqual(records.count, before + 1, "\(records)")
        let r = try XCTUnwrap(records.first)
        XCTAssertEqual(r["status"]?.stringValue, "rejected")
        XCTAssertEqual(r["error"]?.stringValue, "BadPriority")
        XCTAssertEqual(r["http_status"], .number(JSONNumber(400)))
        XCTAssertEqual(r["sender_id"]?.stringValue, "123456789012", "the device's project")
        XCTAssertEqual(r["answer"]?.objectValue?["body"]?.stringValue, #"{"reason":"BadPriority"}"#, "\(r)")
        // What it named and the Apple headers it came with are kept: the device (by its FCM
        // token, as an accepted send's record), the apns-* headers as sent.
        XCTAssertEqual(r["target"], .object(JSONObject([("kind", .string("token")), ("value", .string("demo-ios-1"))])), "\(r)")
        let headers = try XCTUnwrap(r["headers"]?.objectValue, "\(r)")
        XCTAssertEqual(headers["apns-topic"]?.stringValue, topic)
        XCTAssertEqual(headers["apns-priority"]?.stringValue, "7")
        XCTAssertEqual(headers["authorization"]?.stringValue.map { $0.hasPrefix("bearer ") && $0.hasSuffix("…") }, true, "masked: \(headers)")
        // A token no device has, and one that is no token: kept as sent.
        let unknown = String(repeating: "0f", count: 32)
        assertReason(try send(path: "/3/device/\(unknown)", headers: [("apns-topic", topic), ("apns-push-type", "banner")]), 400, "InvalidPushType")
        var last = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(last["target"], .object(JSONObject([("kind", .string("apns_token")), ("value", .string(unknown))])), "\(last)")
        XCTAssertEqual(last["headers"]?.objectValue?["apns-push-type"]?.stringValue, "banner", "\(last)")
        assertReason(try send(path: "/3/device/xyz", headers: [("apns-topic", topic), ("apns-topic", topic)]), 400, "DuplicateHeaders")
        last = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns&limit=1")).first)
        XCTAssertEqual(last["target"]?.objectValue?["value"]?.stringValue, "xyz", "\(last)")
        XCTAssertEqual(last["headers"]?.objectValue?["apns-topic"]?.stringValue, "\(topic), \(topic)", "joined once: \(last)")
    }

    func testFaultsOfTheAPNsTransport() throws {
        let token = try apnsToken(of: "demo-ios-1")
        let c = server.client()
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"status":503,"retry_after_s":7},"times":1}"#).status, 201)
        let unavailable = try send(path: "/3/device/\(token)")
        XCTAssertEqual(unavailable.status, 503)
        XCTAssertEqual(unavailable.body, #"{"reason":"ServiceUnavailable"}"#)
        XCTAssertEqual(unavailable.headers["retry-after"], "7")
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"status":502},"times":1}"#).status, 201)
        let other = try send(path: "/3/device/\(token)")
        XCTAssertEqual(other.status, 502)
        XCTAssertEqual(other.body, #"{"reason":"InternalServerError"}"#)
        // A fault of another transport leaves APNs alone; NotRegistered inside the send is Unregistered.
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"http_v1"},"then":{"status":500}}"#).status, 201)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"error":"NotRegistered"},"times":1}"#).status, 201)
        let gone = try send(path: "/3/device/\(token)")
        XCTAssertEqual(gone.status, 410, gone.body)
        XCTAssertTrue(gone.body.hasPrefix(#"{"reason":"Unregistered","timestamp":"#), gone.body)
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns2"},"then":{"status":500}}"#).status, 400)
        // A delay answers late; a dropped connection answers nothing (curl sees the stream reset
        // or the connection closed) and is recorded.
        XCTAssertEqual(try c.delete("/api/v1/faults").status, 204)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"delay_ms":400},"times":1}"#).status, 201)
        let started = Date()
        XCTAssertEqual(try send(path: "/3/device/\(token)").status, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.4)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"close_connection":true},"times":1}"#).status, 201)
        let dropped = try runProcess(try HTTP2Tests.tool("curl"), ["-sS", "--max-time", "20", "--http2-prior-knowledge", "-X", "POST",
                                                                   "-H", "authorization: bearer \(try self.token())", "-H", "apns-topic: \(topic)",
                                                                   "-d", "{}", "http://127.0.0.1:\(server.port)/3/device/\(token)"])
        XCTAssertNotEqual(dropped.status, 0, dropped.stdout)
        XCTAssertEqual(items(try c.get("/api/v1/messages?transport=apns")).first?["error"]?.stringValue, "ConnectionClosed")
    }

    func testGivenTokensAndEnvironmentsAndUnknownTokensRegistered() throws {
        let c = server.client()
        let given = String(repeating: "C0", count: 40)
        let made = try c.post("/api/v1/devices", #"{"sender_id":"123456789012","platform":"ios","app":"\#(topic)","apns_token":"\#(given)","apns_environment":"production"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(made.object?["apns_token"]?.stringValue, given.lowercased())
        XCTAssertEqual(made.object?["apns_environment"]?.stringValue, "production")
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"sender_id":"123456789012","platform":"ios","apns_token":"\#(given)"}"#).status, 409)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"sender_id":"123456789012","platform":"android","apns_token":"\#(given)"}"#).status, 400)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"sender_id":"123456789012","platform":"ios","apns_token":"xyz"}"#).status, 400)
        XCTAssertEqual(try c.post("/api/v1/devices", #"{"sender_id":"123456789012","platform":"ios","apns_environment":"dev"}"#).status, 400)
        // A production token: the sandbox (this server's default) refuses it, production takes it.
        assertReason(try send(path: "/3/device/\(given)"), 400, "BadDeviceToken")
        let production = try send(path: "/3/device/\(given)", headers: [("apns-topic", topic), ("host", "api.push.apple.com")])
        XCTAssertEqual(production.status, 200, production.body)
        XCTAssertNil(production.headers["apns-unique-id"], "only the sandbox answers one")

        // With --unknown-tokens register, an unknown token becomes a device of the topic's app.
        server.stop()
        try start(unknownTokens: "register")
        let fresh = String(repeating: "5e", count: 32)
        let first = try send(path: "/3/device/\(fresh)")
        XCTAssertEqual(first.status, 200, first.body)
        let found = items(try server.client().get("/api/v1/devices?apns_token=\(fresh)"))
        XCTAssertEqual(found.first?["app"]?.stringValue, topic)
        XCTAssertEqual(found.first?["platform"]?.stringValue, "ios")
        XCTAssertEqual(found.first?["apns_environment"]?.stringValue, "sandbox")
        let fcm = try XCTUnwrap(found.first?["token"]?.stringValue)
        XCTAssertEqual(items(try server.client().get("/api/v1/devices/\(pathEncode(fcm))/messages")).first?["status"]?.stringValue, "delivered")
        // An app no project has as an iOS app stays refused.
        XCTAssertEqual(try server.client().request("PUT", "/api/v1/apns/teams/\(team)", headers: [("Content-Type", "application/json")],
                                                   body: Array(#"{"bundle_ids":["com.nobody"]}"#.utf8)).status, 200)
        assertReason(try send(path: "/3/device/\(String(repeating: "77", count: 32))", headers: [("apns-topic", "com.nobody")]),
                     400, "BadDeviceToken")
        // Across a restart the given token stays (file store).
        let db = NSTemporaryDirectory() + "apns-dev-\(UUID().uuidString).sqlite"
        defer { try? FileManager.default.removeItem(atPath: db) }
        var s = try TestServer(db: db)
        XCTAssertEqual(try s.client().post("/api/v1/devices", #"{"token":"kept-1","sender_id":"123456789012","platform":"ios","apns_token":"\#(given)","apns_environment":"production"}"#).status, 201)
        s.stop()
        s = try TestServer(db: db)
        defer { s.stop() }
        let back = try XCTUnwrap(s.client().get("/api/v1/devices/kept-1").object)
        XCTAssertEqual(back["apns_token"]?.stringValue, given.lowercased())
        XCTAssertEqual(back["apns_environment"]?.stringValue, "production")
    }
}
