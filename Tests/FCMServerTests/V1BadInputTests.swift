import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// BadInputTests' hostile bodies on the v1 send path, with a valid Bearer token: each is Google's
/// 400 INVALID_ARGUMENT in v1's own shape (docs/spec/fcm-v1.md section 2), never a crash or a 500,
/// and nothing reaches a device.
final class V1BadInputTests: V1TestCase {
    /// `POST /v1/projects/demo-a/messages:send` with these exact bytes.
    func post(_ body: [UInt8]) throws -> WireResponse {
        try client.request("POST", "/v1/projects/demo-a/messages:send",
                           headers: [("Content-Type", "application/json; charset=UTF-8"), ("Authorization", "Bearer \(tokenA)")],
                           body: body)
    }

    /// Malformed JSON: Google's reason, then the 20 bytes either side of the offending one
    /// (JSON-escaped here, as in the body) and a caret under it; no FcmError, no violations.
    func malformed(_ reason: String, _ excerpt: String, caret: Int) -> String {
        V1Body.error(400, #"Invalid JSON payload received. \#(reason)\n\#(excerpt)\n"# + String(repeating: " ", count: caret) + "^",
                     "INVALID_ARGUMENT")
    }

    /// A wrongly typed value: the converter's text, one violation at the value's path.
    func typed(_ path: String, _ type: String, _ value: String) -> String {
        let message = "Invalid value at '\(path)' (\(type)), \(value)"
        return V1Body.error(400, message, "INVALID_ARGUMENT", violations: [(path, message)])
    }

    func testHostileBodiesAreInvalidArgumentAndNothingIsDelivered() throws {
        let deep = String(repeating: "[", count: 10000) + String(repeating: "]", count: 10000)
        let nines = String(repeating: "9", count: 5000)
        let count = "message.android.notification.notification_count"
        let batch: [(String, [UInt8], String)] = [
            ("invalid UTF-8", Array(#"{"message":{"token":"a1","data":{"k":""#.utf8) + [0xFF, 0xFE] + Array(#""}}}"#.utf8),
             malformed("Encountered non UTF-8 code points.", #"\":\"a1\",\"data\":{\"k\":\"\#u{FFFD}\#u{FFFD}\"}}}"#, caret: 20)),
            ("truncated", Array(#"{"message":{"token":"a1","data":{"#.utf8),
             malformed("Unexpected end of string. Expected a value.", #"token\":\"a1\",\"data\":{"#, caret: 20)),
            ("duplicate keys", Array(#"{"message":{"token":"a1","data":{"k":"1","k":"2"}}}"#.utf8),
             malformed(#"Duplicate key \"k\"."#, #"a1\",\"data\":{\"k\":\"1\",\"k\":\"2\"}}}"#, caret: 20)),
            ("duplicate message", Array(#"{"message":{"token":"a1"},"message":{"token":"a2"}}"#.utf8),
             malformed(#"Duplicate key \"message\"."#, #"age\":{\"token\":\"a1\"},\"message\":{\"token\":\""#, caret: 20)),
            ("BOM", [0xEF, 0xBB, 0xBF] + Array(#"{"message":{"token":"a1"}}"#.utf8),
             malformed("Unexpected token.", #"\#u{FEFF}{\"message\":{\"toke"#, caret: 0)),
            ("deep nesting", Array(#"{"message":{"token":"a1","webpush":{"notification":{"k":\#(deep)}}}}"#.utf8),
             malformed("Message too deep. Max recursion depth reached.", String(repeating: "[", count: 40), caret: 20)),
            ("huge number", Array(#"{"message":{"token":"a1","android":{"notification":{"notification_count":1e999999}}}}"#.utf8),
             typed(count, "TYPE_INT32", "1e999999")),
            ("huge integer", Array(#"{"message":{"token":"a1","android":{"notification":{"notification_count":\#(nines)}}}}"#.utf8),
             typed(count, "TYPE_INT32", String(repeating: "9", count: 256) + "…")),
            ("huge number for a duration", Array(#"{"message":{"token":"a1","android":{"ttl":1e999999}}}"#.utf8),
             typed("message.android.ttl", "type.googleapis.com/google.protobuf.Duration",
                   "Field 'ttl', Invalid data type for duration, value is 1e999999")),
            ("NUL escaped in the token", Array(#"{"message":{"token":"a\u0000b"}}"#.utf8),
             V1Body.error(400, "The registration token is not a valid FCM registration token", "INVALID_ARGUMENT",
                          fcm: "INVALID_ARGUMENT", violations: [("message.token", "Invalid registration token")])),
            ("NUL byte in a string", Array(#"{"message":{"token":"a"#.utf8) + [0] + Array(#"b"}}"#.utf8),
             malformed("Unexpected token.", #"message\":{\"token\":\"a\u0000b\"}}"#, caret: 20)),
            ("not JSON at all", Array("token=a1".utf8), malformed("Unexpected token.", "token=a1", caret: 1)),
            ("only whitespace", Array("   ".utf8), malformed("Unexpected end of string. Expected a value.", "   ", caret: 3)),
            ("top-level string", Array(#""message""#.utf8),
             V1Body.error(400, #"Invalid JSON payload received. Unknown name \"\": Root element must be a message."#, "INVALID_ARGUMENT")),
        ]
        for (name, body, expected) in batch {
            let r = try post(body)
            assertV1(r, 400, expected, name)
        }
        // Each refusal is one rejected record; no device got anything, and the server still sends.
        let records = items(try client.get("/api/v1/messages?transport=http_v1&limit=100"))
        XCTAssertEqual(records.count, batch.count)
        XCTAssertEqual(Set(records.map { $0["status"]?.stringValue }), ["rejected"])
        XCTAssertEqual(Set(records.map { $0["http_status"]?.numberValue?.int64 }), [400])
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a2/messages")).count, 0)
        _ = messageID(try v1Send(#"{"message":{"token":"a1","data":{"k":"fine"}}}"#))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 1)
    }

    /// A v1 send's `apns-expiration` and Web Push `TTL` headers may be any 64-bit number: each
    /// is delivered (the smallest as now or never, the largest held at most a century), and the
    /// server goes on (such a send once stopped it on an overflow).
    func testExtremeExpirationsAndTTLsAreDelivered() throws {
        let web = try client.post("/api/v1/devices", #"{"token":"w-extreme","sender_id":"111","app":"com.a.web","platform":"web"}"#)
        XCTAssertEqual(web.status, 201, web.text)
        let sends = [("ios-ok", #""apns":{"headers":{"apns-expiration":"-9223372036854775808"}}"#),
                     ("ios-ok", #""apns":{"headers":{"apns-expiration":"9223372036854775807"}}"#),
                     ("w-extreme", #""webpush":{"headers":{"TTL":"9223372036854775807"}}"#),
                     ("w-extreme", #""webpush":{"headers":{"TTL":"-9223372036854775808"}}"#)]
        let century = Date().timeIntervalSince1970 + Double(DeliveryOptions.longestTTLSeconds)
        for (token, block) in sends {
            _ = messageID(try v1Send(#"{"message":{"token":"\#(token)",\#(block),"data":{"k":"v"}}}"#))
            let entry = items(try client.get("/api/v1/devices/\(token)/messages")).first
            XCTAssertEqual(entry?["status"]?.stringValue, "delivered", "\(block): \(entry.map { JSONValue.object($0).serialized() } ?? "")")
            let expires = try XCTUnwrap(entry?["expires_at"]?.stringValue.flatMap(parseRFC3339))
            XCTAssertLessThanOrEqual(Double(expires) / 1000, century + 60, block)
        }
    }
}
