import XCTest

@testable import FCMCore
@testable import FCMV1

/// The platform blocks, proto3 JSON spellings and values, the size limit, and real SDK bodies.
final class V1PlatformTests: V1ParserTestCase {
    func platforms(_ body: String, file: StaticString = #filePath, line: UInt = #line) -> PlatformConfigs? {
        expectSend(body, file: file, line: line)?.request.platforms
    }

    func json(_ text: String) -> JSONObject {
        guard case .object(let obj)? = try? JSONParser.parse(text) else {
            XCTFail("not a JSON object: \(text)")
            return JSONObject()
        }
        return obj
    }

    func testAndroidOptionsBecomeSendOptions() {
        let send = expectSend(message(#""android":{"collapse_key":"ck","priority":"HIGH","ttl":"3.5s","restricted_package_name":"com.x"}"#))
        XCTAssertEqual(send?.request.options.collapseKey, "ck")
        XCTAssertEqual(send?.request.options.priority, .high)
        XCTAssertEqual(send?.request.options.timeToLive, 3, "fractions of a second are dropped")
        XCTAssertEqual(send?.request.options.restrictedPackageName, "com.x")
        XCTAssertEqual(send?.request.platforms?.android,
                       json(#"{"collapse_key":"ck","priority":"high","ttl":"3.5s","restricted_package_name":"com.x"}"#))
    }

    func testBothSpellingsAndNormalization() {
        let camel = platforms(message(#"""
            "android":{"collapseKey":"c","restrictedPackageName":"p","directBootOk":true,"bandwidthConstrainedOk":"false",
              "restrictedSatelliteOk":null,"fcmOptions":{"analyticsLabel":"l"},
              "notification":{"clickAction":"A","bodyLocArgs":["1"],"titleLocKey":"t","channelId":"ch","notificationPriority":"priority_max",
                "notificationCount":"7","visibility":2,"proxy":"if-priority-lowered","defaultSound":true,"vibrateTimings":["1s","0.5s"],
                "eventTime":"2024-05-30T12:34:56.789000Z","lightSettings":{"color":{"red":1,"green":"0.5","blue":0},
                "lightOnDuration":"0.1s","lightOffDuration":"2s"}}},
            "apns":{"liveActivityToken":"lat","fcmOptions":{"analyticsLabel":"a","image":"https://i.test/x"}},
            "webpush":{"fcmOptions":{"link":"https://w.test/"}},"fcmOptions":{"analyticsLabel":"m"}
            """#))
        XCTAssertEqual(camel?.android, json(#"""
            {"collapse_key":"c","restricted_package_name":"p","direct_boot_ok":true,"bandwidth_constrained_ok":false,
             "fcm_options":{"analytics_label":"l"},
             "notification":{"click_action":"A","body_loc_args":["1"],"title_loc_key":"t","channel_id":"ch",
               "notification_priority":"priority_max","notification_count":7,"visibility":"public","proxy":"if_priority_lowered",
               "default_sound":true,"vibrate_timings":["1s","0.5s"],"event_time":"2024-05-30T12:34:56.789000Z",
               "light_settings":{"color":{"red":1,"green":0.5,"blue":0},"light_on_duration":"0.1s","light_off_duration":"2s"}}}
            """#))
        XCTAssertEqual(camel?.apns, json(#"{"live_activity_token":"lat","fcm_options":{"analytics_label":"a","image":"https://i.test/x"}}"#))
        XCTAssertEqual(camel?.webpush, json(#"{"fcm_options":{"link":"https://w.test/"}}"#))
        XCTAssertEqual(camel?.fcmOptions, json(#"{"analytics_label":"m"}"#))

        expectPayload(message(#""android":{"collapse_key":"a","collapseKey":"b"}"#),
                      "Invalid JSON payload received. Field \"collapse_key\" at 'message.android' is set twice, as \"collapse_key\" and as \"collapseKey\".",
                      field: "message.android")
        expectPayload(#"{"validate_only":true,"validateOnly":false,"message":{"topic":"a"}}"#,
                      "Invalid JSON payload received. Field \"validate_only\" at '' is set twice, as \"validate_only\" and as \"validateOnly\".",
                      field: "")
    }

    func testEnums() {
        for (given, want) in [("\"normal\"", Priority.normal), ("\"NORMAL\"", .normal), ("\"High\"", .high), ("1", .high), ("\"0\"", .normal)] {
            XCTAssertEqual(expectSend(message(#""android":{"priority":\#(given)}"#))?.request.options.priority, want, given)
        }
        expectPayload(message(#""android":{"priority":"urgent"}"#), "Invalid value at 'message.android.priority' (TYPE_ENUM), \"urgent\"",
                      field: "message.android.priority")
        expectPayload(message(#""android":{"priority":2}"#), "Invalid value at 'message.android.priority' (TYPE_ENUM), 2",
                      field: "message.android.priority")
        expectPayload(message(#""android":{"notification":{"visibility":true}}"#),
                      "Invalid value at 'message.android.notification.visibility' (TYPE_ENUM), true",
                      field: "message.android.notification.visibility")
    }

    func testDurations() {
        for (ttl, seconds) in [("0s", Int64(0)), ("2419200s", 2_419_200), ("2419199.999999999s", 2_419_199), ("1.000000001s", 1), ("86400s", 86400)] {
            XCTAssertEqual(expectSend(message(#""android":{"ttl":"\#(ttl)"}"#))?.request.options.timeToLive, seconds, ttl)
        }
        let tooLong = "ttl must be a duration from 0s to 2419200s (4 weeks)"
        for ttl in ["2419201s", "2419200.000000001s", "-1s", "-0.5s"] {
            expectInvalid(message(#""android":{"ttl":"\#(ttl)"}"#), "Invalid value for ttl: \(ttl) is not between 0s and 2419200s",
                          field: "message.android.ttl", description: tooLong)
        }
        let prefix = "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', "
        for (ttl, reason) in [("\"10\"", "Illegal duration format; duration must end with 's'"),
                              ("\"s\"", "Invalid duration format, failed to parse seconds"),
                              ("\"1.5.5s\"", "Invalid duration format, failed to parse nanos seconds"),
                              ("\"1.1234567891s\"", "Invalid duration format, failed to parse nanos seconds"),
                              ("\"x1s\"", "Invalid duration format, failed to parse seconds"),
                              ("\"315576000001s\"", "Duration value exceeds limits"),
                              ("10", "Invalid data type for duration, value is 10")] {
            expectPayload(message(#""android":{"ttl":\#(ttl)}"#), prefix + reason, field: "message.android.ttl")
        }
        expectPayload(message(#""android":{"notification":{"vibrateTimings":["1s","2"]}}"#),
                      "Invalid value at 'message.android.notification.vibrate_timings[1]' (type.googleapis.com/google.protobuf.Duration), Field 'vibrateTimings', Illegal duration format; duration must end with 's'",
                      field: "message.android.notification.vibrate_timings[1]")
        XCTAssertEqual(V1Duration.parse("3.5s"), .success(V1Duration(seconds: 3, nanos: 500_000_000)))
        XCTAssertEqual(V1Duration.parse("-1.25s"), .success(V1Duration(seconds: -1, nanos: -250_000_000)))
    }

    func testScalarTypes() {
        let n = "message.android.notification"
        expectPayload(message(#""android":{"notification":{"notification_count":1.5}}"#),
                      "Invalid value at '\(n).notification_count' (TYPE_INT32), 1.5", field: "\(n).notification_count")
        expectPayload(message(#""android":{"notification":{"notification_count":"x"}}"#),
                      "Invalid value at '\(n).notification_count' (TYPE_INT32), \"x\"", field: "\(n).notification_count")
        expectPayload(message(#""android":{"notification":{"notification_count":2147483648}}"#),
                      "Invalid value at '\(n).notification_count' (TYPE_INT32), 2147483648", field: "\(n).notification_count")
        XCTAssertEqual(platforms(message(#""android":{"notification":{"notification_count":3.0}}"#))?.android,
                       json(#"{"notification":{"notification_count":3}}"#))
        expectPayload(message(#""android":{"direct_boot_ok":2}"#), "Invalid value at 'message.android.direct_boot_ok' (TYPE_BOOL), 2",
                      field: "message.android.direct_boot_ok")
        expectPayload(message(#""android":{"notification":{"sticky":{}}}"#),
                      "Invalid value at '\(n).sticky' (TYPE_BOOL), Starting an object on a scalar field", field: "\(n).sticky")
        expectPayload(message(#""android":{"notification":{"body_loc_args":["a",2]}}"#),
                      "Invalid value at '\(n).body_loc_args[1]' (TYPE_STRING), 2", field: "\(n).body_loc_args[1]")
        expectPayload(message(#""android":{"notification":{"light_settings":{"color":{"red":"x"}}}}"#),
                      "Invalid value at '\(n).light_settings.color.red' (TYPE_FLOAT), \"x\"", field: "\(n).light_settings.color.red")
        expectPayload(message(#""android":{"notification":{"event_time":"yesterday"}}"#),
                      "Invalid value at '\(n).event_time' (type.googleapis.com/google.protobuf.Timestamp), Field 'event_time', Invalid time format: yesterday",
                      field: "\(n).event_time")
        expectPayload(message(#""android":7"#),
                      "Invalid value at 'message.android' (type.googleapis.com/google.firebase.fcm.v1.AndroidConfig), 7", field: "message.android")
        expectPayload(message(#""apns":{"payload":[1]}"#),
                      "Invalid JSON payload received. Unknown name \"payload\" at 'message.apns': Proto field is not repeating, cannot start list.",
                      field: "message.apns")
        expectPayload(message(#""webpush":{"notification":"x"}"#),
                      "Invalid value at 'message.webpush.notification' (type.googleapis.com/google.protobuf.Struct), \"x\"",
                      field: "message.webpush.notification")
        expectPayload(message(#""apns":{"headers":{"apns-priority":10}}"#),
                      "Invalid value at 'message.apns.headers[0].value' (TYPE_STRING), 10", field: "message.apns.headers[0].value")
        // A lone value for a repeated field is a list of one.
        XCTAssertEqual(platforms(message(#""android":{"notification":{"title_loc_args":"a"}}"#))?.android,
                       json(#"{"notification":{"title_loc_args":["a"]}}"#))
    }

    func testNullsAreAbsent() {
        let p = platforms(message(#""android":{"ttl":null,"notification":{"title":null,"light_settings":null}},"apns":null,"webpush":{"data":null},"fcm_options":null"#))
        XCTAssertEqual(p?.android, json(#"{"notification":{}}"#))
        XCTAssertNil(p?.apns)
        XCTAssertEqual(p?.webpush, JSONObject())
        XCTAssertNil(p?.fcmOptions)
        // Struct values are kept as sent, nulls included.
        XCTAssertEqual(platforms(message(#""apns":{"payload":{"aps":{"sound":null},"k":null}}"#))?.apns,
                       json(#"{"payload":{"aps":{"sound":null},"k":null}}"#))
    }

    func testAndroidRules() {
        let n = "message.android.notification"
        XCTAssertNotNil(expectSend(message(##""android":{"notification":{"color":"#A0b1C2","notification_count":0}}"##)))
        for color in ["red", "#fff", "#12345g", "123456#", "#1234567"] {
            expectInvalid(message(#""android":{"notification":{"color":"\#(color)"}}"#), "Invalid color: \"\(color)\"",
                          field: "\(n).color", description: "color must be in the form #rrggbb")
        }
        expectInvalid(message(#""android":{"notification":{"notification_count":-1}}"#), "Invalid notification_count: -1",
                      field: "\(n).notification_count")
        expectInvalid(message(#""android":{"notification":{"image":"ftp://x"}}"#), "Invalid image URL: \"ftp://x\"", field: "\(n).image")
    }

    func testAPNsRules() {
        for p in ["5", "10"] {
            XCTAssertNotNil(expectSend(message(#""apns":{"headers":{"apns-priority":"\#(p)"}}"#)))
        }
        for p in ["1", "", "high"] {
            expectInvalid(message(#""apns":{"headers":{"APNS-Priority":"\#(p)"}}"#), "Invalid apns-priority: \"\(p)\"",
                          field: "message.apns.headers", description: "apns-priority must be \"5\" or \"10\"")
        }
        for aps in ["\"x\"", "[1]", "null", "3"] {
            expectInvalid(message(#""apns":{"payload":{"aps":\#(aps)}}"#), "Invalid APNs payload: aps must be an object",
                          field: "message.apns.payload.aps")
        }
        XCTAssertNotNil(expectSend(message(#""apns":{"payload":{"custom":1}}"#)), "aps may be absent")
        expectInvalid(message(#""apns":{"fcm_options":{"image":"http://i.test/x"}}"#), "Invalid image URL: \"http://i.test/x\"",
                      field: "message.apns.fcm_options.image")
    }

    func testWebpushAndAnalyticsLabels() {
        for link in ["http://w.test/", "https://", "https:///x", "w.test", "https://w.test/a b"] {
            expectInvalid(message(#""webpush":{"fcm_options":{"link":"\#(link)"}}"#), "Invalid link: \"\(link)\"",
                          field: "message.webpush.fcm_options.link", description: "link must be an HTTPS URL")
        }
        XCTAssertNotNil(expectSend(message(#""webpush":{"fcm_options":{"link":"HTTPS://w.test/x?y=1"}}"#)))
        let fifty = String(repeating: "a", count: 50)
        for holder in ["fcm_options", "android.fcm_options", "apns.fcm_options", "webpush.fcm_options"] {
            let parts = holder.split(separator: ".")
            func wrap(_ label: String) -> String {
                let inner = #""analytics_label":"\#(label)""#
                return parts.count == 1 ? #""\#(parts[0])":{\#(inner)}"# : #""\#(parts[0])":{"\#(parts[1])":{\#(inner)}}"#
            }
            XCTAssertNotNil(expectSend(message(wrap(fifty))), holder)
            XCTAssertNotNil(expectSend(message(wrap("a-Z_0.~%"))), holder)
            for bad in [fifty + "a", "", "a b", "ü"] {
                expectInvalid(message(wrap(bad)), "Invalid analytics label: \"\(bad)\"", field: "message.\(holder).analytics_label",
                              description: "analytics_label must match ^[a-zA-Z0-9-_.~%]{1,50}$")
            }
        }
    }

    func testSizeLimit() {
        // "k" + value: 1 + 4095 = 4096 bytes, the limit exactly.
        XCTAssertNotNil(expectSend(message(#""data":{"k":"\#(String(repeating: "v", count: 4095))"}"#)))
        // The same limit for a topic: "k" (1) + 4090 + "title" (5) + "" = 4096.
        XCTAssertNotNil(expectSend(#"{"message":{"topic":"t","data":{"k":"\#(String(repeating: "v", count: 4090))"},"notification":{"title":""}}}"#))
        expectInvalid(message(#""data":{"k":"\#(String(repeating: "v", count: 4096))"}"#), "Message is too big", field: "message",
                      description: "The message payload (data and notification) is 4097 bytes; the limit is 4096 bytes.")
        // Notification fields count too: "title" (5) + 2044 + "body" (4) + 2044 = 4097.
        expectInvalid(message(#""notification":{"title":"\#(String(repeating: "t", count: 2044))","body":"\#(String(repeating: "b", count: 2044))"}"#),
                      "Message is too big", field: "message")
    }
}
