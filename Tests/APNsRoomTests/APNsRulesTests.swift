import FCMCore
@testable import APNs
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

    /// Topics are matched against the push types' suffixes as bytes when ASCII, as characters
    /// otherwise: both read as a character-wise `hasSuffix` does.
    func testTopicSuffixesAsBytesAndAsCharacters() {
        let topics = ["com.example.app", "com.example.app.voip", "com.example.app.voip-ptt", "voip", ".voip", "com.a.complication",
                      "com.é.voip", "com.é", "com.e\u{301}.voip", "com.app\u{600}.voip", "com.app.voi\u{301}p", "x\r.voip", "x.voip\r\n"]
        for type in APNsPushType.allCases {
            for topic in topics {
                let suffix = type.topicSuffix
                let expected: String?
                if suffix.isEmpty {
                    expected = topic.isEmpty || APNsPushType.allCases.contains { !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix) }
                        ? nil : topic
                } else {
                    expected = topic.hasSuffix(suffix) && topic.utf8.count > suffix.utf8.count ? String(topic.dropLast(suffix.count)) : nil
                }
                XCTAssertEqual(try? APNsHeaders.bundleID(topic: topic, pushType: type), expected, "\(type.rawValue) \(topic.debugDescription)")
            }
        }
    }

    func testHeadersOfOtherNamesAreIgnoredInAnyCase() {
        let parsed = parse([("Content-Type", "application/json"), ("user-agent", "x"), ("APNS-TOPIC", "com.example.app"),
                            ("Apns-Priority", "5"), ("x-apns-topic", "com.other.app"), ("b", "c")])
        XCTAssertEqual(try? parsed.get().bundleID, "com.example.app")
        XCTAssertEqual(try? parsed.get().priority, 5)
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
        var rng = SystemRandomNumberGenerator()
        let made = APNsDeviceToken.generate(using: &rng)
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

    /// Header names in any case are the same header (HTTP/2 sends them in lower case; a rule
    /// reads them as ASCII bytes), duplicates across cases included.
    func testHeaderNamesOfAnyCase() {
        let h = try? parse([("APNS-Topic", "com.example.app"), ("Apns-Push-Type", "background"), ("APNS-PRIORITY", "1"),
                            ("Apns-Collapse-Id", "c"), ("APNS-Expiration", "0"), ("APNS-ID", "123e4567-e89b-12d3-a456-426614174000")]).get()
        XCTAssertEqual(h?.pushType, .background)
        XCTAssertEqual(h?.apnsID, "123e4567-e89b-12d3-a456-426614174000")
        XCTAssertEqual(h?.expiration, 0)
        XCTAssertEqual(h?.priority, 1)
        XCTAssertEqual(h?.topic, "com.example.app")
        XCTAssertEqual(h?.bundleID, "com.example.app")
        XCTAssertEqual(h?.collapseID, "c")
        XCTAssertEqual(reason([topic, ("APNS-TOPIC", "com.example.app")]), .duplicateHeaders)
        XCTAssertEqual(reason([topic, ("Authorization", "a"), ("authorization", "b")]), .duplicateHeaders)
        XCTAssertEqual(reason([("apns-topic\u{301}", "com.example.app")]), .missingTopic, "another name")
        XCTAssertEqual(reason([("apns-topi", "com.example.app")]), .missingTopic)
    }

    /// The body's JSON is parsed once for both rules that read it, with the answers of the
    /// rules on the bytes alone.
    func testOneParseServesThePushTypeAndThePayloadRule() throws {
        for (body, type) in [(#"{"aps":{"alert":"hi"}}"#, APNsPushType.alert), (#"{"aps":{}}"#, .background),
                             ("[1]", .background), ("not json", .background)] {
            var b = APNsBody(Array(body.utf8))
            let h = try APNsHeaders.parse([topic], body: &b, topicRequired: true)
            XCTAssertEqual(h.pushType, type, body)
            XCTAssertEqual(try APNsPayload.check(&b, pushType: h.pushType), try APNsPayload.check(Array(body.utf8), pushType: h.pushType), body)
        }
        var empty = APNsBody([])
        XCTAssertEqual(try APNsHeaders.parse([topic], body: &empty, topicRequired: true).pushType, .background)
        XCTAssertThrowsError(try APNsPayload.check(&empty, pushType: .background)) {
            XCTAssertEqual(($0 as? APNsError)?.reason, .payloadEmpty)
        }
    }

    func testTokensLowerCaseOnlyWhenTheyHaveToAndAreCheckedAsBytes() {
        let t = String(repeating: "aB", count: 32)
        XCTAssertEqual(APNsDeviceToken.lowercased(t), t.lowercased())
        XCTAssertEqual(APNsDeviceToken.lowercased("abc123"), "abc123")
        XCTAssertEqual(APNsDeviceToken.lowercased("ÄB"), "äb")
        XCTAssertNoThrow(try APNsDeviceToken.check(t))
        for bad in [String(repeating: "g", count: 64), String(repeating: "a", count: 63), String(repeating: "a", count: 202),
                    String(repeating: "a", count: 63) + "é"] {
            XCTAssertThrowsError(try APNsDeviceToken.check(bad)) { XCTAssertEqual(($0 as? APNsError)?.reason, .badDeviceToken, bad) }
        }
    }

    func testEnvironmentFromHost() {
        let cases: [(String?, APNsEnvironment)] = [
            ("api.push.apple.com", .production), ("api.push.apple.com:443", .production), ("API.PUSH.APPLE.COM:2197", .production),
            ("api.sandbox.push.apple.com", .sandbox), ("api.development.push.apple.com:443", .sandbox),
            ("127.0.0.1:8080", .production), (nil, .production), ("[::1]", .production), ("push.apple.com", .production),
            ("api.sandbox.push.apple.com.", .sandbox), ("Api.Sandbox.Push.Apple.Com.:443", .sandbox), ("[::1]:443", .production),
            ("api.sandbox.push.apple.com:", .sandbox), ("", .production), (":443", .production), (".", .production),
            // Not ASCII: read as characters and lower-cased as before, so never one of Apple's.
            ("äpi.sandbox.push.apple.com", .production), ("api.sandbox.push.apple.com\u{301}", .production),
        ]
        for (host, expected) in cases {
            XCTAssertEqual(APNsEnvironment.of(host: host, fallback: .production), expected, host ?? "nil")
        }
        XCTAssertEqual(APNsEnvironment.of(host: "localhost", fallback: .sandbox), .sandbox)
        XCTAssertEqual(APNsEnvironment.of(host: "api.push.apple.com", fallback: .sandbox), .production)
    }

    func testUUIDs() {
        let made = (0..<10_000).map { _ in APNsRoutes.newUUID() }
        XCTAssertEqual(Set(made).count, 10_000)
        for u in made {
            XCTAssertTrue(isCanonicalUUID(u))
            XCTAssertEqual(u, u.lowercased())
            XCTAssertEqual(Array(u)[14], "4", "version 4")
            XCTAssertTrue("89ab".contains(Array(u)[19]), "variant 10: \(u)")
        }
        // Every hex digit of the random part takes every value (no bit stuck), in each position.
        for position in 0..<36 where ![8, 13, 14, 18, 19, 23].contains(position) {
            XCTAssertEqual(Set(made.map { Array($0)[position] }).count, 16, "position \(position)")
        }
        XCTAssertFalse(isCanonicalUUID("123e4567-e89b-12d3-a456-4266141740000"))
    }
}
