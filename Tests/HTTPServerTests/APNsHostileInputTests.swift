import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// Hostile input to APNs's `POST /3/device/{token}` through the real server over h2c, frames
/// written by hand: provider tokens of every broken shape, a 1 MB authorization header, header
/// floods and an HPACK bomb, payloads at the edges of their limits. Each gets a clear answer
/// (Apple's reason, or the HTTP/2 connection's own limit: 431, GOAWAY ENHANCE_YOUR_CALM or
/// COMPRESSION_ERROR), never
/// a 5xx, and the message list grows by exactly one record per refused or accepted send.
final class APNsHostileInputTests: XCTestCase {
    var server: TestServer!
    var key: P256PrivateKey!
    var keyID = ""
    let team = "TEAM123456"
    let topic = DemoProject.iosApp
    var device = ""

    override func setUpWithError() throws {
        server = try TestServer(unknownTokens: "reject")
        let made = try server.client().request("POST", "/api/v1/apns/keys", headers: [("Content-Type", "application/json")], body: Array(#"{"team_id":"\#(team)","bundle_ids":["\#(topic)"]}"#.utf8))
        XCTAssertEqual(made.status, 201, made.text)
        let o = try XCTUnwrap(JSONParser.parse(Array(made.text.utf8)).objectValue)
        keyID = try XCTUnwrap(o["key_id"]?.stringValue)
        key = try P256PrivateKey(pem: try XCTUnwrap(o["private_key_pem"]?.stringValue))
        let d = try XCTUnwrap(JSONParser.parse(Array(try server.client().request("GET", "/api/v1/devices/demo-ios-1").text.utf8)).objectValue)
        device = try XCTUnwrap(d["apns_token"]?.stringValue)
    }

    override func tearDown() {
        server?.stop()
    }

    static func b64(_ s: String) -> String { base64URLEncode(Array(s.utf8)) }

    /// A good provider token of the test's key.
    func token() throws -> String {
        let input = Self.b64(#"{"alg":"ES256","kid":"\#(keyID)"}"#) + "." + Self.b64(#"{"iss":"\#(team)","iat":\#(Int64(Date().timeIntervalSince1970))}"#)
        return input + "." + base64URLEncode(try key.signES256(Array(input.utf8)))
    }

    /// How many APNs records the server holds.
    func recordCount() throws -> Int {
        let r = try server.client().request("GET", "/api/v1/messages?transport=apns&limit=1000")
        XCTAssertEqual(r.status, 200, r.text)
        return try XCTUnwrap(JSONParser.parse(Array(r.text.utf8)).objectValue?["items"]?.arrayValue).count
    }

    /// A header block as HEADERS and CONTINUATION frames of at most 16,384 bytes (the default
    /// SETTINGS_MAX_FRAME_SIZE); false once the server stopped reading.
    @discardableResult
    static func headerFrames(_ c: H2RawClient, _ stream: Int32, _ block: [UInt8], endStream: Bool) -> Bool {
        var rest = block[...]
        var first = true
        repeat {
            let part = Array(rest.prefix(16_384))
            rest = rest.dropFirst(part.count)
            let flags = (rest.isEmpty ? H2RawClient.endHeaders : 0) | (first && endStream ? H2RawClient.endStream : 0)
            if !c.frame(first ? H2RawClient.headers : H2RawClient.continuation, flags, stream, part) { return false }
            first = false
        } while !rest.isEmpty
        return true
    }

    /// Sends one request per entry on one connection (streams 1, 3, …) and collects the answers.
    func send(_ requests: [(headers: [(String, String)], body: [UInt8])]) -> [H2RawClient.Answer] {
        guard let c = try? H2RawClient(port: server.port) else {
            XCTFail("no connection")
            return []
        }
        var streams: [Int32] = []
        for (i, r) in requests.enumerated() {
            let stream = Int32(2 * i + 1)
            streams.append(stream)
            Self.headerFrames(c, stream, H2RawClient.request("POST", "/3/device/\(device)", extra: r.headers), endStream: false)
            // The body in DATA frames of at most 16,384 bytes (the default SETTINGS_MAX_FRAME_SIZE).
            var rest = r.body[...]
            repeat {
                let part = rest.prefix(16_384)
                rest = rest.dropFirst(part.count)
                c.frame(H2RawClient.data, rest.isEmpty ? H2RawClient.endStream : 0, stream, Array(part))
            } while !rest.isEmpty
        }
        let answers = c.collect(Set(streams))
        return streams.map { answers[$0] ?? H2RawClient.Answer() }
    }

    func assertReason(_ a: H2RawClient.Answer, _ status: Int, _ reason: String, _ what: String, line: UInt = #line) {
        XCTAssertEqual(a.status, status, "\(what): \(a.text)", line: line)
        XCTAssertEqual(a.text, #"{"reason":"\#(reason)"}"#, what, line: line)
        XCTAssertEqual(a.headers.first { $0.0 == "content-type" }?.1, "application/json", what, line: line)
        XCTAssertTrue(isCanonicalUUID(a.headers.first { $0.0 == "apns-id" }?.1 ?? ""), what, line: line)
    }

    /// The answer's ids are one of a kind: sent as literals never indexed, so HPACK's table keeps
    /// what repeats (the status, the content type) and a client decodes every answer the same.
    func testTheAnswersIdsAreNeverIndexedAndTheRestIs() throws {
        let c = try H2RawClient(port: server.port)
        let auth = ("authorization", "bearer " + (try token()))
        var seen: [[(String, String, neverIndexed: Bool)]] = []
        for (i, body) in [#"{"aps":{"alert":"hi"}}"#, "", #"{"aps":{"alert":"again"}}"#].enumerated() {
            let stream = Int32(2 * i + 1)
            Self.headerFrames(c, stream, H2RawClient.request("POST", "/3/device/\(device)", extra: [("apns-topic", topic), auth]),
                              endStream: body.isEmpty)
            if !body.isEmpty { c.frame(H2RawClient.data, H2RawClient.endStream, stream, Array(body.utf8)) }
            while let f = c.readFrame() {
                if f.type == H2RawClient.headers, f.stream == stream {
                    seen.append(c.decodeNoting(f.payload))
                    break
                }
            }
        }
        XCTAssertEqual(seen.count, 3)
        for (i, fields) in seen.enumerated() {
            let status = fields.first { $0.0 == ":status" }?.1
            XCTAssertEqual(status, i == 1 ? "400" : "200", "\(fields)")
            let ids = fields.filter { $0.0 == "apns-id" || $0.0 == "apns-unique-id" }
            XCTAssertEqual(ids.count, i == 1 ? 1 : 2, "\(fields)")
            for id in ids {
                XCTAssertTrue(isCanonicalUUID(id.1), "\(id)")
                XCTAssertTrue(id.neverIndexed, "\(id.0) is sent never indexed: \(fields)")
            }
            XCTAssertTrue(fields.filter { !$0.0.hasPrefix("apns-") }.allSatisfy { !$0.neverIndexed }, "\(fields)")
        }
        XCTAssertEqual(try recordCount(), 3)
    }

    func testProviderTokensOfEveryBrokenShapeAreInvalidProviderToken() throws {
        let claims = Self.b64(#"{"iss":"\#(team)","iat":\#(Int64(Date().timeIntervalSince1970))}"#)
        let good = try token()
        let parts = good.split(separator: ".").map(String.init)
        func signed(_ header: String) throws -> String {
            let input = Self.b64(header) + "." + claims
            return input + "." + base64URLEncode(try key.signES256(Array(input.utf8)))
        }
        let shapes: [(String, String)] = [
            ("no dots", "bearer abcdef"),
            ("two parts", "bearer " + parts[0] + "." + parts[1]),
            ("four parts", "bearer " + good + ".x"),
            ("empty parts", "bearer .."),
            ("bad base64", "bearer !!!." + claims + ".@@@"),
            ("a header that is not JSON", "bearer " + Self.b64("nope") + "." + claims + "." + parts[2]),
            ("claims that are not JSON", "bearer " + parts[0] + "." + Self.b64("[1") + "." + parts[2]),
            ("alg none, no signature", "bearer " + Self.b64(#"{"alg":"none","kid":"\#(keyID)"}"#) + "." + claims + "."),
            ("alg HS256", "bearer " + (try signed(#"{"alg":"HS256","kid":"\#(keyID)"}"#))),
            ("alg RS256", "bearer " + (try signed(#"{"alg":"RS256","kid":"\#(keyID)"}"#))),
            ("no kid", "bearer " + (try signed(#"{"alg":"ES256"}"#))),
            ("a kid of no key", "bearer " + (try signed(#"{"alg":"ES256","kid":"NOSUCHKEY0"}"#))),
            ("a signature of the wrong length", "bearer " + parts[0] + "." + parts[1] + "." + String(parts[2].dropLast(4))),
            ("bearer alone", "bearer"),
            ("bearer and spaces", "bearer    x"),
            ("another scheme", "basic " + good),
            ("a huge token (48 KB)", "bearer " + parts[0] + "." + String(repeating: "A", count: 48_000) + "." + parts[2]),
            ("a token of punctuation", "bearer ~~~.###.***"),
        ]
        let before = try recordCount()
        let answers = send(shapes.map { ([("apns-topic", topic), ("authorization", $0.1)], Array(#"{"aps":{"alert":"x"}}"#.utf8)) })
        XCTAssertEqual(answers.count, shapes.count)
        for (a, shape) in zip(answers, shapes) {
            assertReason(a, 403, "InvalidProviderToken", shape.0)
        }
        let missing = send([([("apns-topic", topic)], Array("{}".utf8))])
        assertReason(missing[0], 403, "MissingProviderToken", "no authorization")
        XCTAssertEqual(try recordCount(), before + shapes.count + 1, "each refusal recorded once")
        // The good token still works after all that.
        XCTAssertEqual(send([([("apns-topic", topic), ("authorization", "bearer " + good)], Array("{}".utf8))])[0].status, 200)
    }

    func testA1MBAuthorizationHeaderEndsTheConnectionAndNothingIsRecorded() throws {
        let before = try recordCount()
        let c = try H2RawClient(port: server.port)
        let block = H2RawClient.request("POST", "/3/device/\(device)",
                                        extra: [("apns-topic", topic), ("authorization", "bearer " + String(repeating: "a", count: 1 << 20))])
        // HEADERS then CONTINUATION frames: the block outgrows the header list limit long
        // before its end.
        Self.headerFrames(c, 1, block, endStream: true)
        let goAway = try XCTUnwrap(c.readUntilGoAway(), "the connection answers with GOAWAY")
        // One field longer than HPACK's decoder takes (64 KiB) is a COMPRESSION_ERROR, before the
        // block's own bound (ENHANCE_YOUR_CALM, below) is reached.
        XCTAssertEqual(goAway.errorCode, 0x9, "COMPRESSION_ERROR")
        XCTAssertEqual(try recordCount(), before)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/health").status, 200)
    }

    func testHeaderFloodsAnswer431OrGoAwayAndReachNothing() throws {
        let before = try recordCount()
        let auth = ("authorization", "bearer " + (try token()))
        // 2,000 small headers: over the 64 KiB header list limit, within one frame's slack.
        var flood = [("apns-topic", topic), auth]
        for i in 0..<2_000 { flood.append(("x-flood-\(i)", "v")) }
        // An HPACK bomb: one 4 KB field entered in the table, then named by index 1,000 times
        // (4 MB decoded from about 5 KB sent).
        let c = try H2RawClient(port: server.port)
        var bomb = H2RawClient.request("POST", "/3/device/\(device)", extra: [("apns-topic", topic), auth])
        bomb += H2RawClient.indexedLiteral("x-bomb", String(repeating: "b", count: 4_000))
        for _ in 0..<1_000 { bomb += H2RawClient.indexed(62) }
        Self.headerFrames(c, 1, bomb, endStream: false)
        c.frame(H2RawClient.data, H2RawClient.endStream, 1, Array(#"{"aps":{"alert":"x"}}"#.utf8))
        let bombed = c.collect([1])[1]
        XCTAssertEqual(bombed?.status, 431, bombed?.text ?? "no answer")
        let flooded = send([(flood, Array(#"{"aps":{"alert":"x"}}"#.utf8))])
        XCTAssertEqual(flooded.first?.status, 431, flooded.first?.text ?? "")
        // 10,000 headers: a block beyond the limit and its slack ends the connection.
        var huge: [(String, String)] = [("apns-topic", topic), auth]
        for i in 0..<10_000 { huge.append(("x-flood-\(i)", "v")) }
        let c2 = try H2RawClient(port: server.port)
        Self.headerFrames(c2, 1, H2RawClient.request("POST", "/3/device/\(device)", extra: huge), endStream: true)
        XCTAssertEqual(c2.readUntilGoAway()?.errorCode, 0xb)
        XCTAssertEqual(try recordCount(), before, "nothing reached the send path")
        // The same connection's limits do not stop a plain send afterwards.
        XCTAssertEqual(send([([("apns-topic", topic), auth], Array(#"{"aps":{"alert":"x"}}"#.utf8))])[0].status, 200)
        XCTAssertEqual(try recordCount(), before + 1)
    }

    func testPayloadsAtTheEdgesOfTheirLimits() throws {
        func payload(_ n: Int) -> [UInt8] {
            let head = #"{"aps":{"alert":""#, tail = #""}}"#
            return Array((head + String(repeating: "x", count: n - head.utf8.count - tail.utf8.count) + tail).utf8)
        }
        let auth = ("authorization", "bearer " + (try token()))
        let alert = [("apns-topic", topic), auth]
        let voip = [("apns-topic", topic + ".voip"), ("apns-push-type", "voip"), auth]
        let before = try recordCount()
        let answers = send([(alert, payload(4_096)), (alert, payload(4_097)), (voip, payload(5_120)), (voip, payload(5_121)),
                            (alert, payload(5_120)), (voip, payload(20_000))])
        XCTAssertEqual(answers.map(\.status), [200, 413, 200, 413, 413, 413], answers.map(\.text).joined(separator: " | "))
        for i in [1, 3, 4, 5] { assertReason(answers[i], 413, "PayloadTooLarge", "answer \(i)") }
        XCTAssertEqual(try recordCount(), before + answers.count, "each send recorded once")
        let inbox = try server.client().request("GET", "/api/v1/devices/demo-ios-1/messages")
        XCTAssertEqual(try XCTUnwrap(JSONParser.parse(Array(inbox.text.utf8)).objectValue?["items"]?.arrayValue).count, 2)
    }
}
