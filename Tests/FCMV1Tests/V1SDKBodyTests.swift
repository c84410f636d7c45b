import XCTest

@testable import FCMCore
@testable import FCMV1

/// Whole bodies as the SDKs send them: firebase-admin-python's encoder (snake_case, booleans as
/// 1/0, enums upper-cased, `'{seconds}.{nanos:09}s'` durations, `isoformat() + 'Z'` times) and
/// firebase-admin-node's (lowerCamelCase).
final class V1SDKBodyTests: V1ParserTestCase {
    func testPythonRichMessage() throws {
        let body = #"""
            {"validate_only": false, "message": {
              "android": {"collapse_key": "scores", "data": {"score": "3x1"},
                "notification": {"body": "Match update", "body_loc_args": ["a", "b"], "body_loc_key": "upd", "click_action": "OPEN",
                  "color": "#f45342", "icon": "ic_ball", "sound": "default", "tag": "match", "title": "Goal!", "channel_id": "sports",
                  "image": "https://cdn.example.com/goal.png", "ticker": "t", "sticky": 1, "event_time": "2024-05-30T12:34:56.789000Z",
                  "local_only": 0, "notification_priority": "PRIORITY_HIGH", "vibrate_timings": ["0.100000000s", "1s"],
                  "default_vibrate_timings": 0, "default_sound": 1, "default_light_settings": 0,
                  "light_settings": {"color": {"red": 0.9568627450980393, "green": 0.3254901960784314, "blue": 0.25882352941176473, "alpha": 1.0},
                    "light_on_duration": "0.200000000s", "light_off_duration": "0.500000000s"},
                  "visibility": "PUBLIC", "notification_count": 3},
                "priority": "high", "restricted_package_name": "com.example.app", "ttl": "3600.500000000s",
                "fcm_options": {"analytics_label": "android-label"}, "direct_boot_ok": true},
              "apns": {"headers": {"apns-priority": "10", "apns-push-type": "alert"},
                "payload": {"aps": {"alert": {"title": "Goal!", "body": "Match update", "loc-args": ["x"], "loc-key": "k"}, "badge": 42,
                  "sound": {"name": "default", "volume": 0.5, "critical": 1}, "category": "MATCH", "thread-id": "m1",
                  "content-available": 1, "mutable-content": 1}, "customKey": {"nested": [1, 2]}},
                "fcm_options": {"analytics_label": "ios-label", "image": "https://cdn.example.com/goal.png"}},
              "webpush": {"data": {"k": "v"}, "headers": {"TTL": "300", "Urgency": "high"},
                "notification": {"actions": [{"action": "open", "title": "Open"}], "badge": "/b.png", "body": "Match update",
                  "dir": "ltr", "requireInteraction": true, "timestamp": 1700000000000, "title": "Goal!", "vibrate": [100, 200], "custom": "x"},
                "fcm_options": {"link": "https://example.com/match"}},
              "data": {"matchId": "123"}, "notification": {"body": "Match update", "title": "Goal!", "image": "https://cdn.example.com/goal.png"},
              "fcm_options": {"analytics_label": "msg-label"},
              "topic": "sports"}}
            """#
        let send = try XCTUnwrap(expectSend(body))
        XCTAssertEqual(send.request.target, .topic("sports"))
        XCTAssertEqual(send.request.options.collapseKey, "scores")
        XCTAssertEqual(send.request.options.priority, .high)
        XCTAssertEqual(send.request.options.timeToLive, 3600)
        XCTAssertEqual(send.request.options.restrictedPackageName, "com.example.app")
        XCTAssertEqual(send.request.data, JSONObject([("matchId", .string("123"))]))
        let android = try XCTUnwrap(send.request.platforms?.android)
        let notification = try XCTUnwrap(android["notification"]?.objectValue)
        XCTAssertEqual(notification["sticky"], .bool(true))
        XCTAssertEqual(notification["local_only"], .bool(false))
        XCTAssertEqual(notification["notification_priority"], .string("priority_high"))
        XCTAssertEqual(notification["visibility"], .string("public"))
        XCTAssertEqual(notification["notification_count"], .number(JSONNumber(3)))
        // Struct blocks are kept exactly as sent.
        guard case .object(let root)? = try? JSONParser.parse(body) else { return XCTFail("body is not JSON") }
        let sent = root["message"]?.objectValue
        XCTAssertEqual(send.request.platforms?.apns?["payload"], sent?["apns"]?.objectValue?["payload"])
        XCTAssertEqual(send.request.platforms?.webpush?["notification"], sent?["webpush"]?.objectValue?["notification"])
        XCTAssertEqual(send.request.platforms?.fcmOptions, JSONObject([("analytics_label", .string("msg-label"))]))
    }

    func testNodeCamelCaseMessage() throws {
        let body = #"""
            {"message":{"token":"fGx9:APA91bEnodeToken","data":{"a":"1"},
              "android":{"collapseKey":"ck","priority":"normal","ttl":"86400s","restrictedPackageName":"com.x",
                "notification":{"title":"T","bodyLocKey":"k","bodyLocArgs":["1"],"channelId":"c","notificationCount":2,
                  "lightSettings":{"color":{"red":1,"green":0,"blue":0,"alpha":1},"lightOnDuration":"1s","lightOffDuration":"2.5s"},
                  "eventTime":"2024-01-01T00:00:00.000Z","defaultSound":true,"proxy":"DENY"},
                "fcmOptions":{"analyticsLabel":"n"},"directBootOk":false},
              "apns":{"headers":{"apns-priority":"5"},"payload":{"aps":{"contentAvailable":true}},"liveActivityToken":"lat"},
              "webpush":{"fcmOptions":{"link":"https://x.test/"}},"fcmOptions":{"analyticsLabel":"m"}}}
            """#
        let send = try XCTUnwrap(expectSend(body))
        XCTAssertEqual(send.request.target, .token("fGx9:APA91bEnodeToken"))
        XCTAssertEqual(send.request.options.priority, .normal)
        XCTAssertEqual(send.request.options.timeToLive, 86400)
        let android = try XCTUnwrap(send.request.platforms?.android)
        XCTAssertEqual(android.keys, ["collapse_key", "priority", "ttl", "restricted_package_name", "notification", "fcm_options", "direct_boot_ok"])
        XCTAssertEqual(android["notification"]?.objectValue?.keys,
                       ["title", "body_loc_key", "body_loc_args", "channel_id", "notification_count", "light_settings", "event_time",
                        "default_sound", "proxy"])
        XCTAssertEqual(send.request.platforms?.apns?.keys, ["headers", "payload", "live_activity_token"])
    }
}
