@testable import RoomKit
import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMModel
import FCMServer
import FCMTesting
import Foundation
import Platform
import XCTest

/// One access-log line per HTTP request and per XMPP stanza, as text or JSON, with no secret.
final class AccessLogTests: XCTestCase {
    /// Reads the server's stderr until `enough` holds for the lines so far (or 10 s pass).
    private func logLines(_ s: BinaryServer, until enough: ([String]) -> Bool) -> [String] {
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            text += String(decoding: s.takeStderr(), as: UTF8.self)
            let lines = text.split(separator: "\n").map(String.init)
            if enough(lines) { return lines }
            usleep(20_000)
        }
        return text.split(separator: "\n").map(String.init)
    }

    /// HTTP and XMPP traffic against a server logging as `format`; returns its log lines.
    private func traffic(format: String) throws -> [String] {
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--log-format", format])
        defer { s.stop() }
        let http = s.client()
        let sent = try http.postJSON("/fcm/send", #"{"to":"demo-android-1","data":{"k":"v"}}"#,
                                     headers: [("Authorization", "key=\(DemoProject.serverKey)")])
        XCTAssertEqual(sent.status, 200)
        XCTAssertEqual(try http.postJSON("/fcm/send", "{}", headers: [("Authorization", "key=wrong-key-0123456789")]).status, 401)
        XCTAssertEqual(try http.request("GET", "/api/v1/health").status, 200)
        let x = try XMPPTestClient(port: s.xmppPort)
        XCTAssertThrowsError(try XMPPTestClient(port: s.xmppPort).login(user: DemoProject.senderID, password: "not-the-key-123456"))
        _ = try x.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        x.sendDownstream(#"{"to":"demo-android-1","message_id":"log-1"}"#)
        XCTAssertEqual(try x.nextGCM()?["message_type"]?.stringValue, "ack")
        x.sendDownstream(#"{"to":"/topics/bad name","message_id":"log-2"}"#)
        XCTAssertEqual(try x.nextGCM()?["message_type"]?.stringValue, "nack")
        return logLines(s) { lines in
            lines.contains { $0.contains("xmpp") && $0.contains("log-2") }
        }
    }

    func testTextLines() throws {
        let lines = try traffic(format: "text")
        let http = lines.filter { $0.contains(" info http ") }
        XCTAssertEqual(http.count, 3, lines.joined(separator: "\n"))
        // Every line starts with its time, RFC 3339 in UTC with milliseconds, close to now.
        let now = wallClockMicros() / 1000
        for l in lines {
            let ts = String(l.prefix { $0 != " " })
            XCTAssertEqual(ts.count, 24, l)
            XCTAssertTrue(ts.hasSuffix("Z"), l)
            let ms = try XCTUnwrap(parseRFC3339(ts), l)
            XCTAssertLessThan(abs(now - ms), 60_000, l)
            XCTAssertEqual(rfc3339(millis: ms), ts, l)
        }
        XCTAssertTrue(http[0].contains("method=POST path=/fcm/send status=200 bytes=") && http[0].contains(" auth=key=***-key"), http[0])
        XCTAssertTrue(http[1].contains("status=401") && http[1].contains("auth=key=***6789"), http[1])
        XCTAssertTrue(http[2].contains("method=GET path=/api/v1/health status=200") && http[2].hasSuffix("auth=-"), http[2])
        let xmpp = lines.filter { $0.contains(" info xmpp ") }
        XCTAssertTrue(xmpp.contains { $0.contains("stanza=auth") && $0.contains("result=not-authorized") }, xmpp.joined(separator: "\n"))
        XCTAssertTrue(xmpp.contains { $0.contains("stanza=auth user=\(DemoProject.senderID) result=success") })
        // One line per downstream stanza, with its answer.
        XCTAssertEqual(xmpp.filter { $0.contains("message_id=log-1") }.count, 1, xmpp.joined(separator: "\n"))
        XCTAssertTrue(xmpp.contains { $0.contains("dir=in") && $0.contains("message_type=downstream message_id=log-1 to=demo-android-1 result=ack") },
                      xmpp.joined(separator: "\n"))
        XCTAssertTrue(xmpp.contains { $0.contains("dir=in") && $0.contains("message_type=downstream message_id=log-2") && $0.contains("result=nack error=INVALID_JSON") },
                      xmpp.joined(separator: "\n"))
        for l in lines {
            XCTAssertFalse(l.contains("demo-server-key") || l.contains("wrong-key") || l.contains("not-the-key"), "a secret in the log: \(l)")
        }
    }

    func testJSONLines() throws {
        let lines = try traffic(format: "json")
        var kinds: [String: Int] = [:]
        for l in lines {
            let o = try XCTUnwrap(try JSONParser.parse(l).objectValue, l)
            XCTAssertNotNil(o["ts"]?.stringValue)
            XCTAssertNotNil(o["level"]?.stringValue)
            kinds[o["msg"]?.stringValue ?? "", default: 0] += 1
            if o["msg"]?.stringValue == "http" {
                XCTAssertNotNil(o["status"]?.stringValue, l)
                XCTAssertNotNil(o["ms"]?.stringValue, l)
            }
            XCTAssertFalse(l.contains("demo-server-key") || l.contains("wrong-key") || l.contains("not-the-key"), "a secret in the log: \(l)")
        }
        XCTAssertEqual(kinds["http"], 3)
        XCTAssertEqual(kinds["xmpp"], 4, "2 auth + 2 downstream")
    }

    func testMasking() {
        XCTAssertEqual(Log.maskCredential(nil), "-")
        XCTAssertEqual(Log.maskCredential(""), "-")
        XCTAssertEqual(Log.maskCredential("key=AAAAfcmmock:demo-server-key"), "key=***-key")
        XCTAssertEqual(Log.maskCredential("KEY=short"), "key=***")
        XCTAssertEqual(Log.maskCredential("Bearer s3cret-token-value"), "Bearer ***")
        XCTAssertEqual(Log.maskCredential("s3cret"), "***")
        // Two Authorization headers joined: the end may be the second one's secret.
        XCTAssertEqual(Log.maskCredential("key=AAAAfcmmock:demo-server-key, Bearer x"), "key=***")
    }

    func testFormatFromEnvironment() throws {
        // `--auto-register` (the contracts' name) is `--unknown-tokens register`; `=false` rejects.
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: [:]).unknownTokens, .register)
        XCTAssertEqual(try Configuration.parse(arguments: ["--auto-register"], environment: [:]).unknownTokens, .register)
        XCTAssertEqual(try Configuration.parse(arguments: ["--auto-register=false"], environment: [:]).unknownTokens, .reject)
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_AUTO_REGISTER": "false"]).unknownTokens, .reject)
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_LOG_FORMAT": "json"]).logFormat, "json")
        XCTAssertThrowsError(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_LOG_FORMAT": "xml"]))
        XCTAssertEqual(try Configuration.parse(arguments: ["--log-format", "text"], environment: ["FCM_MOCK_LOG_FORMAT": "json"]).logFormat,
                       "text", "flags win")
    }

    /// Lines are written in batches; the last ones still reach stderr when the process exits.
    func testBufferedLinesAreWrittenBeforeExit() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let c = s.client()
        for _ in 0..<200 { XCTAssertEqual(try c.request("GET", "/api/v1/health").status, 200) }
        XCTAssertEqual(s.stop(), 0)
        let lines = String(decoding: s.takeStderr(), as: UTF8.self).split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.contains(" info http method=GET path=/api/v1/health status=200") }.count, 200)
        XCTAssertTrue(lines.last?.contains("stopping on signal 15") == true || lines.contains { $0.contains("stopping on signal 15") },
                      lines.suffix(3).joined(separator: "\n"))
    }

    func testQuietAtWarning() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--log-level", "warning"])
        defer { s.stop() }
        XCTAssertEqual(try s.client().request("GET", "/api/v1/health").status, 200)
        usleep(200_000)
        let text = String(decoding: s.takeStderr(), as: UTF8.self)
        XCTAssertFalse(text.contains(" http "), text)
    }
}
