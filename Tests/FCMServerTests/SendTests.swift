import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// `/fcm/send` to tokens through a real socket: answers, every error row, both formats.
final class SendTests: ServerTestCase {
    func testSingleTokenAnswerShape() throws {
        let r = try client.sendJSON(#"{"to":"a1","data":{"score":"3x1"}}"#)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        let o = try XCTUnwrap(r.object)
        XCTAssertEqual(o.keys, ["multicast_id", "success", "failure", "canonical_ids", "results"])
        let mc = try XCTUnwrap(o["multicast_id"]?.numberValue)
        XCTAssertTrue(mc.isInteger && mc.int64 != nil && mc.int64! > 0, "multicast_id is an int64 JSON number: \(mc.text)")
        XCTAssertEqual(o["success"]?.numberValue?.int64, 1)
        XCTAssertEqual(o["failure"]?.numberValue?.int64, 0)
        XCTAssertEqual(o["canonical_ids"]?.numberValue?.int64, 0)
        let res = results(r)
        XCTAssertEqual(res.first?.keys, ["message_id"])
        XCTAssertTrue(isMessageID(res.first?["message_id"]?.stringValue), r.text)
        // Byte-exact envelope around the generated values.
        let id = res.first!["message_id"]!.stringValue!
        XCTAssertEqual(r.text, "{\"multicast_id\":\(mc.text),\"success\":1,\"failure\":0,\"canonical_ids\":0,\"results\":[{\"message_id\":\"\(id)\"}]}")
        // /gcm/send is the same endpoint.
        XCTAssertEqual(results(try client.sendJSON(#"{"to":"a1"}"#, path: "/gcm/send")).first?.keys, ["message_id"])
    }

    func testMulticastKeepsRequestOrderAndCounts() throws {
        let r = try client.sendJSON(#"{"registration_ids":["a1","bad token","b1","a2"],"data":{"k":"v"}}"#)
        let res = results(r)
        XCTAssertEqual(res.count, 4)
        XCTAssertTrue(isMessageID(res[0]["message_id"]?.stringValue))
        XCTAssertEqual(res[1]["error"]?.stringValue, "InvalidRegistration")
        XCTAssertEqual(res[2]["error"]?.stringValue, "MismatchSenderId")
        XCTAssertTrue(isMessageID(res[3]["message_id"]?.stringValue))
        XCTAssertNotEqual(res[0]["message_id"], res[3]["message_id"], "each recipient gets its own id")
        XCTAssertEqual(r.object?["success"]?.numberValue?.int64, 2)
        XCTAssertEqual(r.object?["failure"]?.numberValue?.int64, 2)
    }

    func testThousandTokenMulticast() throws {
        var tokens = ["a1"]
        for i in 1..<1000 { tokens.append("auto-\(i)") }
        let body = "{\"registration_ids\":[" + tokens.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        let res = results(try client.sendJSON(body))
        XCTAssertEqual(res.count, 1000)
        XCTAssertEqual(Set(res.compactMap { $0["message_id"]?.stringValue }).count, 1000)
        let tooMany = "{\"registration_ids\":[" + (tokens + ["x"]).map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        let r = try client.sendJSON(tooMany)
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(r.text, "Number of messages on bulk (1001) exceeds maximum allowed (1000)\n")
    }

    // MARK: Table 9, JSON

    func testErrorRowsJSON() throws {
        let rows: [(String, String, String?)] = [
            ("MissingRegistration", #"{"data":{"a":"b"}}"#, nil),
            ("MissingRegistration", #"{"registration_ids":[]}"#, nil),
            ("InvalidRegistration", #"{"to":"has space"}"#, nil),
            ("InvalidRegistration", #"{"to":""}"#, nil),
            ("InvalidRegistration", "{\"to\":\"\(String(repeating: "a", count: 4097))\"}", nil),
            ("InvalidPackageName", #"{"to":"a1","restricted_package_name":"com.other"}"#, nil),
            ("MismatchSenderId", #"{"to":"b1"}"#, nil),
            ("MessageTooBig", "{\"to\":\"a1\",\"data\":{\"k\":\"\(String(repeating: "x", count: 4096))\"}}", nil),
            ("InvalidDataKey", #"{"to":"a1","data":{"from":"x"}}"#, nil),
            ("InvalidDataKey", #"{"to":"a1","data":{"message_type":"x"}}"#, nil),
            ("InvalidDataKey", #"{"to":"a1","data":{"google.sent_time":"x"}}"#, nil),
            ("InvalidDataKey", #"{"to":"a1","data":{"gcm.notification":"x"}}"#, nil),
            ("InvalidTtl", #"{"to":"a1","time_to_live":2419201}"#, nil),
            ("InvalidTtl", #"{"to":"a1","time_to_live":-1}"#, nil),
            ("InvalidTtl", #"{"to":"a1","time_to_live":3.5}"#, nil),
            ("InvalidApnsCredential", #"{"to":"ios-nocred","notification":{"title":"t"}}"#, nil),
            ("InvalidApnsCredential", #"{"to":"ios-nocred","content_available":true,"data":{"k":"v"}}"#, nil),
        ]
        for (want, body, key) in rows {
            let r = try client.sendJSON(body, key: key ?? "key-111")
            XCTAssertEqual(singleError(r), want, body)
            XCTAssertEqual(r.headers["content-type"], jsonType)
        }
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"ios-ok","notification":{"title":"t"}}"#)))
        // A data message without content_available never goes through APNs: FCM delivers it to
        // the app itself, whatever the APNs credential (seeds Table 1), in either format.
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"ios-nocred","data":{"k":"v"}}"#)))
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"ios-nocred","content_available":false,"data":{"k":"v"}}"#)))
        XCTAssertTrue(try client.sendPlain("registration_id=ios-nocred&data.k=v").text.hasPrefix("id=0:"))
        XCTAssertEqual(items(try client.get("/api/v1/devices/ios-nocred/messages")).count, 3)
    }

    func testNotRegisteredForUninstalledAndForUnknownInRejectMode() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        XCTAssertEqual(singleError(try client.sendJSON(#"{"to":"a2"}"#)), "NotRegistered")
        XCTAssertEqual(try client.sendPlain("registration_id=a2").text, "Error=NotRegistered\n")

        let strict = try TestServer(fixtures: [errorTableFixture], unknownTokens: "reject")
        defer { strict.stop() }
        let c = strict.client()
        XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"never-seen"}"#)), "NotRegistered")
        XCTAssertEqual(singleError(try c.sendJSON(#"{"to":"bad token"}"#)), "InvalidRegistration", "malformed stays InvalidRegistration")
        XCTAssertEqual(try c.get("/api/v1/devices/never-seen").status, 404, "reject mode creates no device")
    }

    func testUnknownTokenRegistersInDefaultMode() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"fresh-token","restricted_package_name":"com.a"}"#)))
        let d = try client.get("/api/v1/devices/fresh-token")
        XCTAssertEqual(d.status, 200)
        XCTAssertEqual(d.object?["app"]?.stringValue, "com.a")
        XCTAssertEqual(d.object?["sender_id"]?.stringValue, "111")
        XCTAssertEqual(items(try client.get("/api/v1/devices/fresh-token/messages")).count, 1)
    }

    func testUnauthorized() throws {
        let html = "<HTML>\n<HEAD>\n<TITLE>Unauthorized</TITLE>\n</HEAD>\n<BODY BGCOLOR=\"#FFFFFF\" TEXT=\"#000000\">\n<H1>Unauthorized</H1>\n<H2>Error 401</H2>\n</BODY>\n</HTML>\n"
        for r in [try client.sendJSON(#"{"to":"a1"}"#, key: nil), try client.sendJSON(#"{"to":"a1"}"#, key: "nope"),
                  try client.sendPlain("registration_id=a1", key: nil), try client.sendPlain("registration_id=a1", key: "nope"),
                  try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer xyz"), ("Content-Type", "application/json")],
                                     body: Array(#"{"to":"a1"}"#.utf8))] {
            XCTAssertEqual(r.status, 401)
            XCTAssertEqual(r.headers["content-type"], "text/html; charset=UTF-8")
            XCTAssertEqual(r.text, html)
        }
        // 401 wins over a broken body.
        XCTAssertEqual(try client.sendJSON("{broken", key: "nope").status, 401)
        // firebase-admin's Bearer form takes any token (fcm-legacy.md: "Bearer <anything>"), but
        // only with access_token_auth, in the JSON body or as a header (what firebase-admin sends);
        // a made-up token stands for the first project (V1AuthTests: a real one for its own).
        let bearer = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer ya29.token"), ("Content-Type", "application/json")],
                                        body: Array(#"{"to":"a1","access_token_auth":true}"#.utf8))
        let header = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer ya29.token"), ("access_token_auth", "true"),
                                                                      ("Content-Type", "application/json")],
                                        body: Array(#"{"to":"a1"}"#.utf8))
        let plain = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer ya29.token"), ("access_token_auth", "true")],
                                       body: Array("registration_id=a1".utf8))
        for r in [bearer, header] {
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertNil(singleError(r), r.text)
        }
        XCTAssertEqual(plain.status, 200)
        XCTAssertTrue(plain.text.hasPrefix("id=0:"), plain.text)
        XCTAssertEqual(singleError(try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer x"), ("access_token_auth", "true"),
                                                                                    ("Content-Type", "application/json")],
                                                      body: Array(#"{"to":"b1"}"#.utf8))), "MismatchSenderId", "b1 is not the first project's")
        let falseHeader = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer ya29.token"), ("access_token_auth", "false"),
                                                                           ("Content-Type", "application/json")],
                                             body: Array(#"{"to":"a1"}"#.utf8))
        let empty = try client.request("POST", "/fcm/send", headers: [("Authorization", "Bearer "), ("access_token_auth", "true"),
                                                                     ("Content-Type", "application/json")],
                                       body: Array(#"{"to":"a1"}"#.utf8))
        for r in [falseHeader, empty] {
            XCTAssertEqual(r.status, 401)
            XCTAssertEqual(r.text, html)
        }
    }

    func testBadRequestsAnswerPlainText400() throws {
        let rows: [(String, String)] = [
            (#"{"to":"#, "JSON_PARSING_ERROR: Unexpected token END OF FILE at position 6.\n"),
            (#"{"to":"a1","to":"a2"}"#, "JSON_PARSING_ERROR: Duplicate key \"to\" at position 11.\n"),
            (#"{"to":"a1","collapse_key":null}"#, "Field \"collapse_key\" must be a JSON java.lang.String: null\n"),
            (#"{"to":"a1","time_to_live":"abc"}"#, "Field \"time_to_live\" must be a JSON java.lang.Number: abc\n"),
            (#"{"registration_ids":"a1"}"#, "\"registration_ids\" field is not a JSON array\n"),
            (#"{"to":"a1","registration_ids":["a2"]}"#, "Must use either \"registration_ids\" field or \"to\" field or \"condition\", not more than one\n"),
            ("[]", "JSON_PARSING_ERROR: Expected a JSON object, got array.\n"),
            ("", "JSON_PARSING_ERROR: Unexpected token END OF FILE at position 0.\n"),
        ]
        for (body, text) in rows {
            let r = try client.sendJSON(body)
            XCTAssertEqual(r.status, 400, body)
            XCTAssertEqual(r.headers["content-type"], "text/plain; charset=UTF-8")
            XCTAssertEqual(r.text, text, body)
        }
        let utf8 = try client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=key-111")],
                                      body: Array(#"{"to":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
        XCTAssertEqual(utf8.status, 400)
        XCTAssertTrue(utf8.text.hasPrefix("JSON_PARSING_ERROR: Invalid UTF-8"), utf8.text)
    }

    func testInvalidParameters() throws {
        let r = try client.sendJSON(#"{"to":"a1","time_to_leave":60}"#)
        XCTAssertEqual(r.status, 400)
        XCTAssertEqual(r.headers["content-type"], jsonType)
        XCTAssertEqual(r.object?["error"]?.stringValue, "InvalidParameters")
        XCTAssertEqual(r.object?["error_description"]?.stringValue, "Unknown parameter \"time_to_leave\"")
        let plain = try client.sendPlain("registration_id=a1&priority=high")
        XCTAssertEqual(plain.status, 400, "InvalidParameters is 400 + error in plain text too")
        XCTAssertEqual(plain.text, "Error=InvalidParameters\n")
    }

    // MARK: Plain text

    func testPlainTextSuccessAndErrors() throws {
        let ok = try client.sendPlain("collapse_key=score_update&time_to_live=108&data.score=4x8&registration_id=a1")
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.headers["content-type"], "text/plain; charset=UTF-8")
        XCTAssertTrue(ok.text.hasPrefix("id=0:") && ok.text.hasSuffix("\n"), ok.text)
        XCTAssertTrue(isMessageID(String(ok.text.dropFirst(3).dropLast())), ok.text)
        // No Content-Type at all is plain text too.
        XCTAssertTrue(try client.sendPlain("registration_id=a1", contentType: nil).text.hasPrefix("id=0:"))

        let rows: [(String, String)] = [
            ("data.score=1", "MissingRegistration"),
            ("registration_id=bad%20token", "InvalidRegistration"),
            ("registration_id=a1&restricted_package_name=com.other", "InvalidPackageName"),
            ("registration_id=b1", "MismatchSenderId"),
            ("registration_id=a1&data.k=\(String(repeating: "x", count: 4096))", "MessageTooBig"),
            ("registration_id=a1&data.from=x", "InvalidDataKey"),
            ("registration_id=a1&data.gcm.x=y", "InvalidDataKey"),
            ("registration_id=a1&time_to_live=2419201", "InvalidTtl"),
            ("registration_id=a1&time_to_live=abc", "InvalidTtl"),
            ("registration_id=a1&data.x=%ff", "InvalidParameters"),
        ]
        for (body, code) in rows {
            let r = try client.sendPlain(body)
            XCTAssertEqual(r.status, code == "InvalidParameters" ? 400 : 200, body)
            XCTAssertEqual(r.text, "Error=\(code)\n", body)
        }
    }

    func testContentTypeChoosesTheFormat() throws {
        // `application/json` in any case, with blanks and parameters, is JSON; anything else is
        // plain text (form-encoded), where a JSON body is no valid parameter list.
        let json: [String?] = ["application/json", "Application/JSON", " application/json ", "application/json;charset=UTF-8",
                               "application/json ; charset=utf-8", "\tAPPLICATION/JSON\t;"]
        let plain: [String?] = [nil, "", "text/plain", "application/jsonx", "application/json-patch+json", "application/json x",
                                "application/jso", "x-application/json"]
        for (ct, isJSON) in json.map({ ($0, true) }) + plain.map({ ($0, false) }) {
            var headers = [("Authorization", "key=key-111")]
            if let ct { headers.append(("Content-Type", ct)) }
            let r = try client.request("POST", "/fcm/send", headers: headers, body: Array(#"{"to":"a1"}"#.utf8))
            XCTAssertEqual(r.status, isJSON ? 200 : 400, "\(ct ?? "none")")
            if isJSON {
                XCTAssertEqual(results(r).first?.keys, ["message_id"], "\(ct ?? "none"): \(r.text)")
            } else {
                XCTAssertEqual(r.headers["content-type"], "text/plain; charset=UTF-8", ct ?? "none")
                XCTAssertEqual(r.text, "Error=InvalidParameters\n", ct ?? "none")
            }
        }
    }

    func testCanonicalIDAfterRefresh() throws {
        let fresh = try client.post("/api/v1/devices/a1:refresh")
        XCTAssertEqual(fresh.status, 200)
        let newToken = try XCTUnwrap(fresh.object?["token"]?.stringValue)
        XCTAssertNotEqual(newToken, "a1")
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["state"]?.stringValue, "refreshed")
        XCTAssertEqual(try client.get("/api/v1/devices/a1").object?["canonical_token"]?.stringValue, newToken)

        let r = try client.sendJSON(#"{"registration_ids":["a1","a2"]}"#)
        let res = results(r)
        XCTAssertEqual(r.object?["canonical_ids"]?.numberValue?.int64, 1)
        XCTAssertEqual(res[0].keys, ["message_id", "registration_id"])
        XCTAssertEqual(res[0]["registration_id"]?.stringValue, newToken)
        XCTAssertNil(res[1]["registration_id"])

        let plain = try client.sendPlain("registration_id=a1")
        let lines = plain.text.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, plain.text)
        XCTAssertEqual(lines.last.map(String.init), "registration_id=\(newToken)")

        // The new device got both; the old inbox none.
        XCTAssertEqual(items(try client.get("/api/v1/devices/\(newToken)/messages")).count, 2)
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        // The records name the token the sender used, the new one as canonical, and `?token=`
        // finds them by either.
        let byOld = items(try client.get("/api/v1/messages?token=a1"))
        XCTAssertEqual(byOld.count, 2)
        let single = try XCTUnwrap(byOld.first)
        XCTAssertEqual(single["target"]?.objectValue?["value"]?.stringValue, "a1")
        let recipient = try XCTUnwrap(single["recipients"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(recipient["token"]?.stringValue, "a1")
        XCTAssertEqual(recipient["canonical_token"]?.stringValue, newToken)
        XCTAssertEqual(items(try client.get("/api/v1/messages?token=\(newToken)")).count, 2)
        XCTAssertEqual(items(try client.get("/api/v1/messages?token=a2")).count, 1)
    }

    func testDryRunValidatesAndStoresNothing() throws {
        let r = try client.sendJSON(#"{"registration_ids":["a1","b1","brand-new"],"dry_run":true,"data":{"x":"y"}}"#)
        let res = results(r)
        XCTAssertEqual(res[0]["message_id"]?.stringValue, "fake_message_id")
        XCTAssertEqual(res[1]["error"]?.stringValue, "MismatchSenderId", "a dry run is validated like a real send")
        XCTAssertEqual(res[2]["message_id"]?.stringValue, "fake_message_id")
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).count, 0)
        XCTAssertEqual(try client.get("/api/v1/devices/brand-new").status, 404, "a dry run registers nobody")
        XCTAssertEqual(items(try client.get("/api/v1/messages")).count, 0)
        XCTAssertEqual(try client.sendPlain("registration_id=a1&dry_run=true").text, "id=fake_message_id\n")
    }

    func testOptionsAreRecorded() throws {
        let r = try client.sendJSON(#"{"to":"a1","collapse_key":"c","priority":"high","time_to_live":60,"content_available":true,"mutable_content":true,"delay_while_idle":true,"notification":{"title":"t"},"data":{"k":"v"}}"#)
        let id = try XCTUnwrap(results(r).first?["message_id"]?.stringValue)
        let rec = try client.get("/api/v1/messages/\(pathEncode(id))")
        XCTAssertEqual(rec.status, 200, rec.text)
        let o = try XCTUnwrap(rec.object)
        XCTAssertEqual(o["message_id"]?.stringValue, id)
        XCTAssertEqual(o["options"]?.serialized(),
                       #"{"collapse_key":"c","priority":"high","time_to_live":60,"restricted_package_name":null,"content_available":true,"mutable_content":true,"dry_run":false,"delay_while_idle":true}"#)
        XCTAssertEqual(o["data"]?.serialized(), #"{"k":"v"}"#)
        XCTAssertEqual(o["notification"]?.serialized(), #"{"title":"t"}"#)
        XCTAssertEqual(o["transport"]?.stringValue, "http")
        XCTAssertEqual(o["format"]?.stringValue, "json")
        XCTAssertEqual(o["target"]?.serialized(), #"{"kind":"token","value":"a1"}"#)
        XCTAssertEqual(o["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "delivered")
        let inbox = items(try client.get("/api/v1/devices/a1/messages"))
        XCTAssertEqual(inbox.last?["collapse_key"]?.stringValue, "c")
        XCTAssertEqual(inbox.last?["priority"]?.stringValue, "high")
    }

    /// `collapse_key` may appear in the data, but the device gets FCM's value (seeds Table 9).
    func testCollapseKeyInDataCarriesTheMessagesCollapseKey() throws {
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","collapse_key":"fcm","data":{"collapse_key":"mine","k":"v"}}"#)))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).last?["data"]?.serialized(),
                       #"{"collapse_key":"fcm","k":"v"}"#)
        XCTAssertTrue(try client.sendPlain("registration_id=a1&collapse_key=plain&data.collapse_key=mine").text.hasPrefix("id=0:"))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).last?["data"]?.serialized(), #"{"collapse_key":"plain"}"#)
        // Without a collapse key of the message, the entry is the app server's own.
        XCTAssertNil(singleError(try client.sendJSON(#"{"to":"a1","data":{"collapse_key":"mine"}}"#)))
        XCTAssertEqual(items(try client.get("/api/v1/devices/a1/messages")).last?["data"]?.serialized(), #"{"collapse_key":"mine"}"#)
    }
}
