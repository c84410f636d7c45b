import FCMCore
import XCTest

/// The APNs request rules and reasons (docs/spec/apns.md section 2), table by table.
final class APNsRulesTests: XCTestCase {
    /// Every reason with the status the contract gives it.
    func testEveryReasonHasTheStatusOfTheContract() {
        let table: [(String, Int)] = [
            ("BadCollapseId", 400), ("BadDeviceToken", 400), ("BadExpirationDate", 400), ("BadMessageId", 400),
            ("BadPriority", 400), ("BadTopic", 400), ("DeviceTokenNotForTopic", 400), ("DuplicateHeaders", 400),
            ("IdleTimeout", 400), ("InvalidPushType", 400), ("MissingDeviceToken", 400), ("MissingTopic", 400),
            ("PayloadEmpty", 400), ("TopicDisallowed", 400),
            ("BadCertificate", 403), ("BadCertificateEnvironment", 403), ("ExpiredProviderToken", 403), ("Forbidden", 403),
            ("InvalidProviderToken", 403), ("MissingProviderToken", 403),
            ("BadPath", 404), ("MethodNotAllowed", 405), ("ExpiredToken", 410), ("Unregistered", 410),
            ("PayloadTooLarge", 413), ("TooManyProviderTokenUpdates", 429), ("TooManyRequests", 429),
            ("InternalServerError", 500), ("ServiceUnavailable", 503), ("Shutdown", 503),
        ]
        XCTAssertEqual(table.count, APNsReason.allCases.count)
        for (name, status) in table {
            XCTAssertEqual(APNsReason(rawValue: name)?.status, status, name)
        }
        XCTAssertEqual(APNsReason.forStatus(429), .tooManyRequests)
        XCTAssertEqual(APNsReason.forStatus(503), .serviceUnavailable)
        XCTAssertEqual(APNsReason.forStatus(500), .internalServerError)
        XCTAssertEqual(APNsReason.forStatus(502), .internalServerError)
    }

    func testBodiesAreExactlyTheReasonAndTheTimestampOfA410() {
        XCTAssertEqual(APNsError(.badTopic, "x").body, #"{"reason":"BadTopic"}"#)
        XCTAssertEqual(APNsError(.unregistered, "x", timestamp: 1_700_000_000_123).body,
                       #"{"reason":"Unregistered","timestamp":1700000000123}"#)
    }

    func parse(_ headers: [(String, String)], body: String = #"{"aps":{"alert":"hi"}}"#, topicRequired: Bool = true) -> Result<APNsHeaders, APNsError> {
        do {
            return .success(try APNsHeaders.parse(headers.map { (name: $0.0, value: $0.1) }, body: Array(body.utf8), topicRequired: topicRequired))
        } catch {
            return .failure(error)
        }
    }

    func reason(_ headers: [(String, String)], body: String = #"{"aps":{"alert":"hi"}}"#, topicRequired: Bool = true) -> APNsReason? {
        if case .failure(let e) = parse(headers, body: body, topicRequired: topicRequired) { return e.reason }
        return nil
    }

    let topic = ("apns-topic", "com.example.app")

    func testEachHeaderRuleRefusesWithItsReason() {
        let cases: [([(String, String)], APNsReason?)] = [
            ([topic], nil),
            ([topic, ("apns-push-type", "banner")], .invalidPushType),
            ([topic, ("apns-push-type", "Alert")], .invalidPushType),
            ([topic, ("apns-id", "123e4567-e89b-12d3-a456-426614174000")], nil),
            ([topic, ("apns-id", "123E4567-E89B-12D3-A456-426614174000")], nil),
            ([topic, ("apns-id", "123e4567e89b12d3a456426614174000")], .badMessageId),
            ([topic, ("apns-id", "123e4567-e89b-12d3-a456-42661417400g")], .badMessageId),
            ([topic, ("apns-expiration", "0")], nil),
            ([topic, ("apns-expiration", "1700000000")], nil),
            ([topic, ("apns-expiration", "-1")], .badExpirationDate),
            ([topic, ("apns-expiration", "soon")], .badExpirationDate),
            ([topic, ("apns-expiration", "")], .badExpirationDate),
            ([topic, ("apns-expiration", "99999999999999999999")], .badExpirationDate),
            ([topic, ("apns-priority", "10")], nil),
            ([topic, ("apns-priority", "5")], nil),
            ([topic, ("apns-priority", "1")], nil),
            ([topic, ("apns-priority", "7")], .badPriority),
            ([topic, ("apns-priority", "010")], .badPriority),
            ([topic, ("apns-push-type", "background"), ("apns-priority", "10")], .badPriority),
            ([topic, ("apns-push-type", "background"), ("apns-priority", "5")], nil),
            ([], .missingTopic),
            ([("apns-topic", "com.example.app.voip")], .badTopic),
            ([("apns-topic", "com.example.app"), ("apns-push-type", "voip")], .badTopic),
            ([("apns-topic", "com.example.app.voip"), ("apns-push-type", "voip")], nil),
            ([("apns-topic", "com.example.app.voip-ptt"), ("apns-push-type", "pushtotalk")], nil),
            ([("apns-topic", "com.example.app.voip-ptt"), ("apns-push-type", "voip")], .badTopic),
            ([("apns-topic", ".voip"), ("apns-push-type", "voip")], .badTopic),
            ([topic, ("apns-collapse-id", String(repeating: "c", count: 64))], nil),
            ([topic, ("apns-collapse-id", String(repeating: "c", count: 65))], .badCollapseId),
            ([topic, ("apns-collapse-id", String(repeating: "é", count: 33))], .badCollapseId),
            ([topic, topic], .duplicateHeaders),
            ([topic, ("authorization", "bearer a"), ("Authorization", "bearer b")], .duplicateHeaders),
            // The table's order: the push type before the id, the priority before the topic.
            ([("apns-push-type", "x"), ("apns-id", "nope")], .invalidPushType),
            ([("apns-priority", "3")], .badPriority),
            ([topic, topic, ("apns-collapse-id", String(repeating: "c", count: 65))], .badCollapseId),
        ]
        for (headers, expected) in cases {
            XCTAssertEqual(reason(headers), expected, "\(headers)")
        }
    }

    func testEveryPushTypeTakesItsOwnSuffix() {
        for type in APNsPushType.allCases {
            let topic = "com.example.app" + type.topicSuffix
            let parsed = parse([("apns-topic", topic), ("apns-push-type", type.rawValue), ("apns-priority", "5")])
            XCTAssertEqual(try? parsed.get().bundleID, "com.example.app", type.rawValue)
        }
    }

    func testDefaultsFollowApple() throws {
        let alert = try parse([topic]).get()
        XCTAssertEqual(alert.pushType, .alert)
        XCTAssertEqual(alert.priority, 10)
        XCTAssertNil(alert.expiration)
        let background = try parse([topic], body: #"{"aps":{"content-available":1}}"#).get()
        XCTAssertEqual(background.pushType, .background)
        XCTAssertEqual(background.priority, 5)
        let noTopic = try parse([], topicRequired: false).get()
        XCTAssertNil(noTopic.topic)
        XCTAssertNil(noTopic.bundleID)
    }

    func testDeviceTokens() {
        let cases: [(String, APNsReason?)] = [
            ("", .missingDeviceToken),
            (String(repeating: "a", count: 64), nil),
            (String(repeating: "A", count: 64), nil),
            (String(repeating: "0", count: 200), nil),
            (String(repeating: "0", count: 62), .badDeviceToken),
            (String(repeating: "0", count: 65), .badDeviceToken),
            (String(repeating: "0", count: 202), .badDeviceToken),
            (String(repeating: "g", count: 64), .badDeviceToken),
        ]
        for (token, expected) in cases {
            var got: APNsReason?
            do { try APNsDeviceToken.check(token) } catch { got = error.reason }
            XCTAssertEqual(got, expected, token)
        }
        let made = APNsDeviceToken.generate()
        XCTAssertNoThrow(try APNsDeviceToken.check(made))
        XCTAssertEqual(made, made.lowercased())
    }

    func testPayloadLimitsAre4096And5120ForVoIP() {
        func payload(_ n: Int) -> [UInt8] {
            let head = Array(#"{"aps":{"alert":""#.utf8), tail = Array(#""}}"#.utf8)
            return head + [UInt8](repeating: UInt8(ascii: "x"), count: n - head.count - tail.count) + tail
        }
        let cases: [(Int, APNsPushType, APNsReason?)] = [
            (4096, .alert, nil), (4097, .alert, .payloadTooLarge), (4097, .background, .payloadTooLarge),
            (5120, .voip, nil), (5121, .voip, .payloadTooLarge),
        ]
        for (n, type, expected) in cases {
            var got: APNsReason?
            do { _ = try APNsPayload.check(payload(n), pushType: type) } catch { got = error.reason }
            XCTAssertEqual(got, expected, "\(n) \(type)")
        }
        XCTAssertThrowsError(try APNsPayload.check([], pushType: .alert)) { XCTAssertEqual(($0 as? APNsError)?.reason, .payloadEmpty) }
        XCTAssertNil(try APNsPayload.check(Array("[1]".utf8), pushType: .alert), "not an object: accepted, marked")
        XCTAssertNotNil(try APNsPayload.check(Array("{}".utf8), pushType: .alert))
    }

    func testEnvironmentFromHost() {
        let cases: [(String?, APNsEnvironment)] = [
            ("api.push.apple.com", .production), ("api.push.apple.com:443", .production), ("API.PUSH.APPLE.COM:2197", .production),
            ("api.sandbox.push.apple.com", .sandbox), ("api.development.push.apple.com:443", .sandbox),
            ("127.0.0.1:8080", .production), (nil, .production), ("[::1]", .production), ("push.apple.com", .production),
        ]
        for (host, expected) in cases {
            XCTAssertEqual(APNsEnvironment.of(host: host, fallback: .production), expected, host ?? "nil")
        }
        XCTAssertEqual(APNsEnvironment.of(host: "localhost", fallback: .sandbox), .sandbox)
        XCTAssertEqual(APNsEnvironment.of(host: "api.push.apple.com", fallback: .sandbox), .production)
    }

    func testUUIDs() {
        let made = (0..<50).map { _ in newUUID() }
        XCTAssertEqual(Set(made).count, 50)
        for u in made {
            XCTAssertTrue(isCanonicalUUID(u))
            XCTAssertEqual(u, u.lowercased())
            XCTAssertEqual(Array(u)[14], "4")
        }
        XCTAssertFalse(isCanonicalUUID("123e4567-e89b-12d3-a456-4266141740000"))
    }
}
