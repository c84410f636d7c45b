import XCTest

@testable import FCMCore
@testable import FCMV1

/// Shared checks for the v1 parser tests: each asserts the whole outcome, message and violations.
class V1ParserTestCase: XCTestCase {
    let token = "dXk1:APA91bHexampletoken"

    func parse(_ body: String) -> V1ParseOutcome {
        V1Parser.parse(Array(body.utf8))
    }

    /// `{"message": {"token": …, <members>}}`.
    func message(_ members: String) -> String {
        #"{"message":{"token":"\#(token)""# + (members.isEmpty ? "" : "," + members) + "}}"
    }

    @discardableResult
    func expectSend(_ body: String, file: StaticString = #filePath, line: UInt = #line) -> V1Send? {
        switch parse(body) {
        case .send(let send): return send
        case let outcome:
            XCTFail("\(body): expected a send, got \(outcome)", file: file, line: line)
            return nil
        }
    }

    /// An `invalidPayload` whose one violation names `field` with the message as description.
    func expectPayload(_ body: String, _ message: String, field: String?,
                       file: StaticString = #filePath, line: UInt = #line) {
        guard case .invalidPayload(let got, let violations) = parse(body) else {
            XCTFail("\(body): expected invalidPayload, got \(parse(body))", file: file, line: line)
            return
        }
        XCTAssertEqual(got, message, body, file: file, line: line)
        XCTAssertEqual(violations, field.map { [FieldViolation(field: $0, description: message)] } ?? [],
                       body, file: file, line: line)
    }

    /// An `invalidArgument` with this message and one violation at `field`.
    func expectInvalid(_ body: String, _ message: String, field: String, description: String? = nil,
                       file: StaticString = #filePath, line: UInt = #line) {
        guard case .invalidArgument(let got, let violations) = parse(body) else {
            XCTFail("\(body): expected invalidArgument, got \(parse(body))", file: file, line: line)
            return
        }
        XCTAssertEqual(got, message, body, file: file, line: line)
        XCTAssertEqual(violations.map(\.field), [field], body, file: file, line: line)
        if let description {
            XCTAssertEqual(violations.first?.description, description, body, file: file, line: line)
        } else {
            XCTAssertFalse(violations.first?.description.isEmpty ?? true, body, file: file, line: line)
        }
    }
}

/// Targets, data, notification and the send they build.
final class V1ParserTests: V1ParserTestCase {
    func testTokenSend() throws {
        let send = try XCTUnwrap(expectSend(#"{"message":{"token":"\#(token)","data":{"k":"v"},"notification":{"title":"T","body":"B"}}}"#))
        XCTAssertEqual(send.request.target, .token(token))
        XCTAssertFalse(send.byFID)
        XCTAssertFalse(send.validateOnly)
        XCTAssertEqual(send.request.format, .json)
        XCTAssertEqual(send.request.data, JSONObject([("k", .string("v"))]))
        XCTAssertEqual(send.request.notification, JSONObject([("title", .string("T")), ("body", .string("B"))]))
        XCTAssertEqual(send.request.options.timeToLive, SendOptions.defaultTimeToLive)
        XCTAssertNil(send.request.options.priority)
        XCTAssertFalse(send.request.options.dryRun)
        XCTAssertEqual(send.request.platforms, PlatformConfigs())
    }

    func testTargets() {
        XCTAssertEqual(expectSend(#"{"message":{"topic":"news"}}"#)?.request.target, .topic("news"))
        XCTAssertEqual(expectSend(#"{"message":{"topic":"/topics/news"}}"#)?.request.target, .topic("news"))
        XCTAssertEqual(expectSend(#"{"message":{"condition":"'a' in topics && 'b' in topics"}}"#)?.request.target,
                       .condition("'a' in topics && 'b' in topics"))
        let fid = "cXk1bWFrZS1hLWZpZC0xMg"
        let send = expectSend(#"{"message":{"fid":"\#(fid)"}}"#)
        XCTAssertEqual(send?.request.target, .token(fid))
        XCTAssertEqual(send?.byFID, true)
    }

    func testMissingTarget() {
        for body in [#"{}"#, #"{"message":{}}"#, #"{"message":null}"#, #"{"message":{"token":null,"data":{"a":"b"}}}"#] {
            expectInvalid(body, "Recipient of the message is not set.", field: "message",
                          description: "Recipient of the message is not set.")
        }
    }

    func testTwoTargetsAreAOneofError() {
        expectPayload(#"{"message":{"token":"\#(token)","topic":"news"}}"#,
                      "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set 'topic'",
                      field: "message")
        expectPayload(#"{"message":{"condition":"'a' in topics","fid":"cXk1bWFrZS1hLWZpZC0xMg"}}"#,
                      "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set 'fid'",
                      field: "message")
    }

    func testBadTargets() {
        for bad in ["", "has space", "ü"] {
            expectInvalid(#"{"message":{"token":"\#(bad)"}}"#, "The registration token is not a valid FCM registration token",
                          field: "message.token", description: "Invalid registration token")
        }
        for bad in ["", "/topics/", "a b", "news!", String(repeating: "x", count: 901)] {
            expectInvalid(#"{"message":{"topic":"\#(bad)"}}"#, "Invalid topic name", field: "message.topic")
        }
        XCTAssertNotNil(expectSend(#"{"message":{"topic":"\#(String(repeating: "x", count: 900))"}}"#))
        for bad in ["", "bXk1bWFrZS1hLWZpZC0xMg", "gXk1bWFrZS1hLWZpZC0xMg", "cXk1bWFrZS1hLWZpZC0x", "cXk1bWFrZS1hLWZpZC0xM+"] {
            expectInvalid(#"{"message":{"fid":"\#(bad)"}}"#, "The Firebase installation ID is not a valid FID", field: "message.fid")
        }
    }

    func testConditionRules() {
        let five = "'a' in topics && ('b' in topics || 'c' in topics) && 'd' in topics || 'e' in topics"
        XCTAssertNotNil(expectSend(#"{"message":{"condition":"\#(five)"}}"#))
        expectInvalid(#"{"message":{"condition":"\#(five) || 'f' in topics"}}"#, "Invalid condition expression provided.",
                      field: "message.condition", description: "A condition may name at most 5 topics; this one names 6")
        expectInvalid(#"{"message":{"condition":"'a' in topics || 'A' in topics"}}"#, "Invalid condition expression provided.",
                      field: "message.condition", description: "Topic 'A' appears more than once in the condition")
        for bad in ["", "'a' in topic", "'a' in topics &&", "a in topics", "'a b' in topics"] {
            expectInvalid(#"{"message":{"condition":"\#(bad)"}}"#, "Invalid condition expression provided.", field: "message.condition")
        }
    }

    func testReservedDataKeys() {
        for key in ["from", "notification", "message_type", "google.x", "gcm.n", "google", "gcm"] {
            expectInvalid(message(#""data":{"ok":"1","\#(key)":"v"}"#), "Invalid data payload key: \(key)", field: "message.data")
            expectInvalid(message(#""android":{"data":{"\#(key)":"v"}}"#), "Invalid data payload key: \(key)",
                          field: "message.android.data")
            expectInvalid(message(#""webpush":{"data":{"\#(key)":"v"}}"#), "Invalid data payload key: \(key)",
                          field: "message.webpush.data")
        }
        for key in ["From", "fromage", "my_google", "collapse_key", "notifications"] {
            XCTAssertNotNil(expectSend(message(#""data":{"\#(key)":"v"}"#)), key)
        }
    }

    func testDataValuesMustBeStrings() {
        expectPayload(message(#""data":{"a":"x","k":1}"#), "Invalid value at 'message.data[1].value' (TYPE_STRING), 1",
                      field: "message.data[1].value")
        expectPayload(message(#""data":{"k":true}"#), "Invalid value at 'message.data[0].value' (TYPE_STRING), true",
                      field: "message.data[0].value")
        expectPayload(message(#""data":{"k":{"x":1}}"#),
                      "Invalid value at 'message.data[0].value' (TYPE_STRING), Starting an object on a scalar field",
                      field: "message.data[0].value")
        expectPayload(message(#""android":{"data":{"k":2.5}}"#),
                      "Invalid value at 'message.android.data[0].value' (TYPE_STRING), 2.5", field: "message.android.data[0].value")
        expectPayload(message(#""data":"x""#),
                      "Invalid value at 'message.data' (type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry), \"x\"",
                      field: "message.data")
        expectPayload(message(#""data":["x"]"#), "Invalid value at 'message.data' (Map), Cannot bind a list to map.",
                      field: "message.data")
        // A null entry is absent.
        XCTAssertEqual(expectSend(message(#""data":{"a":null,"b":"2"}"#))?.request.data, JSONObject([("b", .string("2"))]))
    }

    func testNotification() {
        let send = expectSend(message(#""notification":{"title":"T","body":null,"image":"https://x.test/i.png"}"#))
        XCTAssertEqual(send?.request.notification,
                       JSONObject([("title", .string("T")), ("image", .string("https://x.test/i.png"))]))
        XCTAssertNil(expectSend(message(#""notification":{}"#))?.request.notification)
        expectPayload(message(#""notification":{"title":5}"#), "Invalid value at 'message.notification.title' (TYPE_STRING), 5",
                      field: "message.notification.title")
        expectPayload(message(#""notification":"hi""#),
                      "Invalid value at 'message.notification' (type.googleapis.com/google.firebase.fcm.v1.Notification), \"hi\"",
                      field: "message.notification")
        expectPayload(message(#""notification":{"title":["a"]}"#),
                      "Invalid JSON payload received. Unknown name \"title\" at 'message.notification': Proto field is not repeating, cannot start list.",
                      field: "message.notification")
        expectInvalid(message(#""notification":{"image":"http://x.test/i.png"}"#), "Invalid image URL: \"http://x.test/i.png\"",
                      field: "message.notification.image", description: "image must be an HTTPS URL")
    }

    func testUnknownFields() {
        expectPayload(message(#""android":{"foo":1}"#),
                      "Invalid JSON payload received. Unknown name \"foo\" at 'message.android': Cannot find field.",
                      field: "message.android")
        expectPayload(#"{"message":{"tokens":["a"]}}"#,
                      "Invalid JSON payload received. Unknown name \"tokens\" at 'message': Cannot find field.", field: "message")
        expectPayload(message(#""android":{"notification":{"fooBar":"x"}}"#),
                      "Invalid JSON payload received. Unknown name \"foo_bar\" at 'message.android.notification': Cannot find field.",
                      field: "message.android.notification")
        expectPayload(#"{"validate":true}"#, "Invalid JSON payload received. Unknown name \"validate\": Cannot find field.", field: "")
        // `name` is an output field of the REST Message, not something firebase-admin sends.
        expectPayload(message(#""name":"x""#), "Invalid JSON payload received. Unknown name \"name\" at 'message': Cannot find field.",
                      field: "message")
        // Names match by their bytes: U+212A KELVIN SIGN is canonically equivalent to "K" (Swift's
        // `==` would call it `collapseKey`), but it is not the field's name.
        expectPayload(message(#""android":{"collapse\#u{212A}ey":"c"}"#),
                      "Invalid JSON payload received. Unknown name \"collapse\u{212A}ey\" at 'message.android': Cannot find field.",
                      field: "message.android")
    }

    func testReservedDataKeysCompareBytes() {
        // `google` then a combining accent: a different last character to Swift's `hasPrefix`,
        // but the key starts with the reserved bytes, as FCM's servers compare it.
        expectInvalid(message(#""data":{"google\#u{301}x":"v"}"#), "Invalid data payload key: google\u{301}x",
                      field: "message.data",
                      description: "The key \"google\u{301}x\" is reserved: data keys may not be from, notification or message_type, nor start with google or gcm")
        XCTAssertTrue(SendParser.isReservedDataKey("gcm.x"))
        XCTAssertTrue(SendParser.isReservedDataKey("from"))
        XCTAssertFalse(SendParser.isReservedDataKey("fromage"))
        XCTAssertFalse(SendParser.isReservedDataKey("notification"))
        XCTAssertTrue(V1Rules.isReservedDataKey("notification"))
        XCTAssertFalse(V1Rules.isReservedDataKey(""))
    }

    func testMalformedJSON() {
        guard case .invalidPayload(let text, let violations) = parse(#"{"message": ]}"#) else {
            return XCTFail("expected invalidPayload")
        }
        XCTAssertEqual(text, "Invalid JSON payload received. Unexpected token.\n{\"message\": ]}\n            ^")
        XCTAssertEqual(violations, [])
        guard case .invalidPayload(let truncated, _) = parse(#"{"message": {"#) else { return XCTFail("expected invalidPayload") }
        XCTAssertTrue(truncated.hasPrefix("Invalid JSON payload received. Unexpected end of string."), truncated)
        guard case .invalidPayload(let root, let none) = parse("[1]") else { return XCTFail("expected invalidPayload") }
        XCTAssertEqual(root, "Invalid JSON payload received. Unknown name \"\": Root element must be a message.")
        XCTAssertEqual(none, [])
        // Only 20 bytes either side are quoted back.
        let long = String(repeating: " ", count: 50) + "x" + String(repeating: " ", count: 50)
        guard case .invalidPayload(let excerpt, _) = parse(long) else { return XCTFail("expected invalidPayload") }
        XCTAssertEqual(excerpt, "Invalid JSON payload received. Unexpected token.\n"
                       + String(repeating: " ", count: 20) + "x" + String(repeating: " ", count: 19) + "\n"
                       + String(repeating: " ", count: 20) + "^")
    }

    func testValidateOnly() {
        for body in [#"{"validate_only":true,"message":{"topic":"a"}}"#, #"{"validateOnly":"true","message":{"topic":"a"}}"#] {
            let send = expectSend(body)
            XCTAssertEqual(send?.validateOnly, true, body)
            XCTAssertEqual(send?.request.options.dryRun, true, body)
        }
        expectPayload(#"{"validate_only":"yes","message":{"topic":"a"}}"#, "Invalid value at 'validate_only' (TYPE_BOOL), \"yes\"",
                      field: "validate_only")
    }
}
