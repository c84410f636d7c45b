import XCTest

@testable import FCMCore

/// What each platform receives (docs/spec/fcm-v1.md section 5, docs/effective-payloads.md), for
/// legacy requests and v1-shaped ones (platform blocks built by hand, as the v1 parser leaves them).
final class EffectivePayloadTests: XCTestCase {
    /// 2023-11-14T22:13:20.123Z: the accept time of every request here.
    let at: Int64 = 1_700_000_000_123

    func o(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> JSONObject {
        guard case .object(let obj)? = try? JSONParser.parse(json) else {
            XCTFail("not a JSON object: \(json)", file: file, line: line)
            return JSONObject()
        }
        return obj
    }

    func legacy(data: String? = nil, notification: String? = nil, _ change: (inout SendOptions) -> Void = { _ in }) -> SendRequest {
        var r = SendRequest(format: .json, target: .token("t"))
        r.data = data.map { o($0) }
        r.notification = notification.map { o($0) }
        change(&r.options)
        return r
    }

    func v1(data: String? = nil, notification: String? = nil, android: String? = nil, apns: String? = nil, webpush: String? = nil,
            _ change: (inout SendOptions) -> Void = { _ in }) -> SendRequest {
        var r = legacy(data: data, notification: notification, change)
        r.platforms = PlatformConfigs(android: android.map { o($0) }, apns: apns.map { o($0) }, webpush: webpush.map { o($0) })
        return r
    }

    func json(_ req: SendRequest, _ p: PushPlatform) -> String {
        JSONValue.object(EffectivePayload.payload(req, for: p, acceptedAtMillis: at)).serialized()
    }

    func options(_ req: SendRequest, _ p: PushPlatform) -> DeliveryOptions {
        EffectivePayload.deliveryOptions(req, for: p, acceptedAtMillis: at)
    }

    // MARK: - Android

    func testLegacyAndroidUsesTheTopLevelFields() {
        let r = legacy(data: #"{"score":"3x1"}"#, notification: #"{"title":"Goal","body":"3x1"}"#) {
            $0.collapseKey = "score"; $0.timeToLive = 60
        }
        XCTAssertEqual(json(r, .android), #"{"platform":"android","data":{"score":"3x1"},"notification":{"title":"Goal","body":"3x1"},"collapse_key":"score","priority":"high","ttl_s":60}"#)
        let dataOnly = legacy(data: #"{"k":"v"}"#)
        XCTAssertEqual(json(dataOnly, .android), #"{"platform":"android","data":{"k":"v"},"notification":null,"collapse_key":null,"priority":"normal","ttl_s":2419200}"#)
        let high = legacy(data: #"{"k":"v"}"#) { $0.priority = .high }
        XCTAssertEqual(EffectivePayload.android(high)["priority"], .string("high"))
    }

    func testV1AndroidOverlaysTheAndroidBlock() {
        let r = v1(data: #"{"a":"1","b":"2"}"#, notification: #"{"title":"T","body":"B"}"#,
                   android: #"{"collapse_key":"ck","priority":"high","ttl":"3.5s","data":{"b":"android","c":"3"},"notification":{"body":"android body","channel_id":"news"}}"#)
        XCTAssertEqual(json(r, .android), #"{"platform":"android","data":{"a":"1","b":"android","c":"3"},"notification":{"title":"T","body":"android body","channel_id":"news"},"collapse_key":"ck","priority":"high","ttl_s":4}"#)
        XCTAssertEqual(options(r, .android), DeliveryOptions(collapseKey: "ck", ttlSeconds: 4))
        // Android-only notification: high by default, like any notification message.
        let n = v1(android: #"{"notification":{"title":"x"},"priority":"NORMAL"}"#)
        XCTAssertEqual(EffectivePayload.android(n)["priority"], .string("normal"))
        XCTAssertEqual(EffectivePayload.android(v1(android: #"{"notification":{"title":"x"}}"#))["priority"], .string("high"))
    }

    func testDurations() {
        let cases: [(JSONValue, Int64?)] = [
            (.string("0s"), 0), (.string("60s"), 60), (.string("3.5s"), 4), (.string("3.000s"), 3),
            (.string("0.000000001s"), 1), (.number(JSONNumber(7)), 7),
            (.string("60"), nil), (.string("-1s"), nil), (.string("1.s"), nil), (.string(".5s"), nil), (.string("1.0000000001s"), nil),
            (.bool(true), nil),
        ]
        for (v, want) in cases { XCTAssertEqual(EffectivePayload.durationSeconds(v), want, "\(v)") }
    }

    // MARK: - iOS

    func testLegacyIOSNotification() {
        let r = legacy(data: #"{"score":"3x1"}"#,
                       notification: ##"{"title":"Goal","body":"3x1","badge":"2","sound":"default","click_action":"SCORE","body_loc_key":"GOAL","body_loc_args":"[\"Arsenal\"]","title_loc_key":"T","title_loc_args":["x"],"icon":"ball","color":"#ff0000"}"##) {
            $0.collapseKey = "score"; $0.timeToLive = 3600; $0.mutableContent = true
        }
        XCTAssertEqual(json(r, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"10","apns-expiration":"1700003600","apns-collapse-id":"score","apns-push-type":"alert"},"payload":{"aps":{"alert":{"title":"Goal","body":"3x1","title-loc-key":"T","title-loc-args":["x"],"loc-key":"GOAL","loc-args":["Arsenal"]},"badge":2,"sound":"default","category":"SCORE","mutable-content":1},"score":"3x1"}}}"#)
        XCTAssertEqual(options(r, .ios), DeliveryOptions(collapseKey: "score", ttlSeconds: 3600))
    }

    func testLegacyIOSBackgroundAndPriority() {
        let bg = legacy(data: #"{"k":"v"}"#) { $0.contentAvailable = true; $0.timeToLive = 0 }
        XCTAssertEqual(json(bg, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"5","apns-expiration":"0","apns-push-type":"background"},"payload":{"aps":{"content-available":1},"k":"v"}}}"#)
        XCTAssertEqual(options(bg, .ios), DeliveryOptions(collapseKey: nil, ttlSeconds: 0))
        // Legacy: the priority decides apns-priority, whatever the payload shows.
        let urgent = legacy(data: #"{"k":"v"}"#) { $0.priority = .high }
        XCTAssertEqual(EffectivePayload.ios(urgent, acceptedAtMillis: at)["apns"]?.objectValue?["headers"]?.objectValue?["apns-priority"], .string("10"))
        let quiet = legacy(notification: #"{"title":"t"}"#) { $0.priority = .normal }
        XCTAssertEqual(EffectivePayload.ios(quiet, acceptedAtMillis: at)["apns"]?.objectValue?["headers"]?.objectValue?["apns-priority"], .string("5"))
    }

    func testV1IOSDefaultsFromThePayload() {
        let r = v1(data: #"{"k":"v"}"#, notification: #"{"title":"T","body":"B","image":"https://x/i.png"}"#,
                   android: #"{"collapse_key":"android-only","ttl":"60s"}"#)
        XCTAssertEqual(json(r, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"10","apns-expiration":"1702419200","apns-push-type":"alert"},"payload":{"aps":{"alert":{"title":"T","body":"B"}},"k":"v","fcm_options":{"image":"https://x/i.png"}}}}"#)
        // The android block's collapse key and TTL are Android's only.
        XCTAssertEqual(options(r, .ios), DeliveryOptions(collapseKey: nil, ttlSeconds: 2_419_200))
        let dataOnly = v1(data: #"{"k":"v"}"#)
        XCTAssertEqual(json(dataOnly, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"5","apns-expiration":"1702419200","apns-push-type":"background"},"payload":{"aps":{},"k":"v"}}}"#)
    }

    func testV1IOSApnsBlockOverlays() {
        let r = v1(data: #"{"k":"v","aps":"ignored"}"#, notification: #"{"title":"T","body":"B"}"#,
                   apns: #"{"headers":{"APNS-Priority":"5","apns-collapse-id":"game-1","apns-expiration":"1700000060","apns-topic":"com.x"},"payload":{"aps":{"alert":{"body":"apns body","subtitle":"S"},"badge":3,"thread-id":"g"},"k":"apns","extra":"e"},"fcm_options":{"image":"https://x/a.png"}}"#)
        XCTAssertEqual(json(r, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"5","apns-expiration":"1700000060","apns-collapse-id":"game-1","apns-push-type":"alert","apns-topic":"com.x"},"payload":{"aps":{"alert":{"title":"T","body":"apns body","subtitle":"S"},"badge":3,"thread-id":"g"},"k":"apns","extra":"e","fcm_options":{"image":"https://x/a.png"}}}}"#)
        XCTAssertEqual(options(r, .ios), DeliveryOptions(collapseKey: "game-1", ttlSeconds: 60))
        // A string alert replaces the built one.
        let s = v1(notification: #"{"title":"T"}"#, apns: #"{"payload":{"aps":{"alert":"plain"}}}"#)
        XCTAssertEqual(EffectivePayload.apnsPayload(s).serialized, #"{"aps":{"alert":"plain"}}"#)
        // An alert object where none was built is set as given; a background push stays one.
        let bg = v1(apns: #"{"payload":{"aps":{"content-available":1}}}"#)
        XCTAssertEqual(json(bg, .ios), #"{"platform":"ios","apns":{"headers":{"apns-priority":"5","apns-expiration":"1702419200","apns-push-type":"background"},"payload":{"aps":{"content-available":1}}}}"#)
        let alertOnly = v1(apns: #"{"payload":{"aps":{"alert":{"title":"A"}}}}"#)
        XCTAssertEqual(EffectivePayload.apnsPayload(alertOnly).serialized, #"{"aps":{"alert":{"title":"A"}}}"#)
    }

    /// Header names are read in any case, ASCII ones as bytes and others through Unicode's
    /// lower case (as before they were all lower-cased), on every platform's block.
    func testHeaderNamesOfAnyCase() {
        let r = v1(apns: #"{"headers":{"APNS-Collapse-ID":"game-2","Apns-Expiration":"1700000060"}}"#,
                   webpush: #"{"headers":{"topic":"web-1","ttl":"30"}}"#)
        XCTAssertEqual(options(r, .ios), DeliveryOptions(collapseKey: "game-2", ttlSeconds: 60))
        XCTAssertEqual(options(r, .web), DeliveryOptions(collapseKey: "web-1", ttlSeconds: 30))
        let headers = o(#"{"apns-collapse-İd":"x","APNS-TOPIC":"t","apns-push-type":"alert"}"#)
        XCTAssertEqual(EffectivePayload.header(headers, "apns-topic"), .string("t"))
        XCTAssertEqual(EffectivePayload.header(headers, "Apns-Push-Type"), .string("alert"))
        XCTAssertNil(EffectivePayload.header(headers, "apns-collapse-id"), "İ lower-cases to i and a combining dot")
        XCTAssertEqual(EffectivePayload.header(headers, "apns-collapse-i\u{307}d"), .string("x"))
        XCTAssertNil(EffectivePayload.header(nil, "apns-topic"))
    }

    func testIOSExpirationBecomesATTL() {
        func ttl(_ expiration: String) -> Int64 {
            options(v1(apns: "{\"headers\":{\"apns-expiration\":\"\(expiration)\"}}"), .ios).ttlSeconds
        }
        XCTAssertEqual(ttl("0"), 0, "now or never")
        XCTAssertEqual(ttl("1700000000"), 0, "already due")
        XCTAssertEqual(ttl("1600000000"), 0, "in the past")
        XCTAssertEqual(ttl("1700086400"), 86_400)
        XCTAssertEqual(ttl("soon"), 2_419_200, "unreadable: the default")
        // Any 64-bit number: no overflow, and a far future is held at most a century.
        XCTAssertEqual(ttl("-9223372036854775808"), 0, "the earliest moment: in the past")
        XCTAssertEqual(ttl("9223372036854775807"), DeliveryOptions.longestTTLSeconds)
    }

    func testExtremeTTLsAreKeptWithinACentury() {
        func web(_ ttl: String) -> Int64 { options(v1(webpush: "{\"headers\":{\"TTL\":\"\(ttl)\"}}"), .web).ttlSeconds }
        XCTAssertEqual(web("9223372036854775807"), 2_419_200, "a push service keeps a message 4 weeks at most")
        XCTAssertEqual(web("-9223372036854775808"), 0)
        XCTAssertEqual(DeliveryOptions(collapseKey: nil, ttlSeconds: .max).ttlSeconds, 100 * 365 * 86_400)
        XCTAssertEqual(DeliveryOptions(collapseKey: nil, ttlSeconds: -5).ttlSeconds, 0)
        XCTAssertEqual(EffectivePayload.durationSeconds(.string("9223372036854775807.5s")), .max, "rounding up stops at the top")
        XCTAssertEqual(EffectivePayload.floorSeconds(.min), .min / 1000 - 1)
        XCTAssertEqual(EffectivePayload.floorSeconds(-1), -1)
        XCTAssertEqual(EffectivePayload.floorSeconds(-1000), -1)
        XCTAssertEqual(EffectivePayload.floorSeconds(-1001), -2)
        XCTAssertEqual(EffectivePayload.floorSeconds(1999), 1)
    }

    // MARK: - Web

    func testLegacyWeb() {
        let r = legacy(data: #"{"k":"v"}"#, notification: #"{"title":"T","click_action":"https://x"}"#) {
            $0.collapseKey = "news"; $0.timeToLive = 600
        }
        XCTAssertEqual(json(r, .web), #"{"platform":"web","webpush":{"headers":{"TTL":"600","Topic":"news","Urgency":"high"},"data":{"k":"v"},"notification":{"title":"T","click_action":"https://x"}}}"#)
        XCTAssertEqual(options(r, .web), DeliveryOptions(collapseKey: "news", ttlSeconds: 600))
        XCTAssertEqual(json(legacy(), .web), #"{"platform":"web","webpush":{"headers":{"TTL":"2419200","Urgency":"normal"},"data":null,"notification":null}}"#)
    }

    func testV1WebOverlaysTheWebpushBlock() {
        let r = v1(data: #"{"a":"1","b":"2"}"#, notification: #"{"title":"T","body":"B"}"#, android: #"{"ttl":"5s","collapse_key":"a"}"#,
                   webpush: #"{"headers":{"ttl":"120","topic":"scores","Urgency":"high","X-Extra":"1"},"data":{"b":"web"},"notification":{"icon":"https://x/i.png","actions":[{"action":"open"}]},"fcm_options":{"link":"https://x/p","analytics_label":"l"}}"#)
        XCTAssertEqual(json(r, .web), #"{"platform":"web","webpush":{"headers":{"TTL":"120","Topic":"scores","Urgency":"high","X-Extra":"1"},"data":{"a":"1","b":"web"},"notification":{"title":"T","body":"B","icon":"https://x/i.png","actions":[{"action":"open"}]},"fcm_options":{"link":"https://x/p"}}}"#)
        XCTAssertEqual(options(r, .web), DeliveryOptions(collapseKey: "scores", ttlSeconds: 120))
        let bare = v1(data: #"{"k":"v"}"#)
        XCTAssertEqual(json(bare, .web), #"{"platform":"web","webpush":{"headers":{"TTL":"2419200"},"data":{"k":"v"},"notification":null}}"#)
        XCTAssertEqual(options(bare, .web), DeliveryOptions(collapseKey: nil, ttlSeconds: 2_419_200))
    }

    // MARK: - Delivery options

    func testLegacyOptionsAreTheSameOnEveryPlatform() {
        let r = legacy { $0.collapseKey = "k"; $0.timeToLive = 0 }
        for p in PushPlatform.allCases { XCTAssertEqual(options(r, p), DeliveryOptions(collapseKey: "k", ttlSeconds: 0), "\(p)") }
    }

    func testV1WithoutBlocksKeepsTheDefaults() {
        let r = v1(data: #"{"k":"v"}"#)
        for p in PushPlatform.allCases { XCTAssertEqual(options(r, p), DeliveryOptions(collapseKey: nil, ttlSeconds: 2_419_200), "\(p)") }
    }
}

extension JSONObject {
    fileprivate var serialized: String { JSONValue.object(self).serialized() }
}
