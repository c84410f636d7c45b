import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
@testable import TLS
import XCTest

/// Hostile autopush clients through the real server (docs/real-clients.md, the table of hostile
/// input; contract §2.5): thousands of random autopush-like messages on several connections, each
/// answered, ignored or closing its own connection with a code of the table, and a well-behaved
/// client served afterwards; acknowledgements of another connection's versions change nothing.
final class AutopushAttackTests: XCTestCase {
    var server: TestServer!
    let vapidKey = try! P256PrivateKey()

    override func setUpWithError() throws {
        server = try TestServer()
    }

    override func tearDown() {
        server?.stop()
    }

    var origin: String { "http://127.0.0.1:\(server.port)" }

    // MARK: Helpers

    func hello() throws -> (WebSocketTestClient, String) {
        let ws = try WebSocketTestClient(port: server.port)
        XCTAssertEqual(ws.status, 101, ws.head)
        ws.send(text: #"{"messageType":"hello","broadcasts":{},"use_webpush":true}"#)
        let o = try ws.nextJSON()
        XCTAssertEqual(o["status"] as? Int, 200, "\(o)")
        return (ws, try XCTUnwrap(o["uaid"] as? String))
    }

    func register(_ ws: WebSocketTestClient, channel: String) throws -> String {
        ws.send(text: #"{"channelID":"\#(channel)","messageType":"register","key":"\#(vapidKey.publicKey.base64URL)"}"#)
        let o = try ws.nextJSON()
        XCTAssertEqual(o["status"] as? Int, 200, "\(o)")
        return try XCTUnwrap(o["pushEndpoint"] as? String, "\(o)")
    }

    func jwt() throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let header = #"{"typ":"JWT","alg":"ES256"}"#
        let claims = #"{"aud":"\#(origin)","exp":\#(now + 3600),"sub":"mailto:ops@example.com"}"#
        let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try vapidKey.signES256(Array(input.utf8)))
    }

    /// Pushes to `endpoint` with VAPID; the message id from `Location`.
    func push(_ endpoint: String) throws -> String {
        let path = String(endpoint.dropFirst(origin.count))
        let r = try server.client().request("POST", path, headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm"),
                                                                    ("Authorization", "vapid t=\(try jwt()), k=\(vapidKey.publicKey.base64URL)")],
                                            body: Array("ciphertext-for-the-browser".utf8))
        XCTAssertEqual(r.status, 201, r.text)
        let location = try XCTUnwrap(r.headers["location"], r.text)
        return String(location.dropFirst((origin + "/m/").count)).replacingOccurrences(of: "%25", with: "%")
    }

    func entry(token: String, _ messageID: String) throws -> JSONObject {
        try XCTUnwrap(try server.client().request("GET", "/api/v1/devices/\(token)/messages/\(pathEncode(messageID))").object)
    }

    func token(of endpoint: String) throws -> String {
        let id = String(endpoint.split(separator: "/").last ?? "")
        let items = try XCTUnwrap(try server.client().request("GET", "/api/v1/devices?web_push_id=\(id)").object?["items"]?.arrayValue)
        return try XCTUnwrap(items.first?.objectValue?["token"]?.stringValue)
    }

    /// The next text after `{}`: the connection answered what came before it, in order.
    func synced(_ ws: WebSocketTestClient) throws {
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
    }

    /// A well-behaved client: hello, register, a push by HTTP, the notification, the ack, delivered.
    func assertServed(_ label: String) throws {
        let (ws, _) = try hello()
        let channel = UUID().uuidString.lowercased()
        let endpoint = try register(ws, channel: channel)
        let tok = try token(of: endpoint)
        let mid = try push(endpoint)
        let note = try ws.nextJSON()
        XCTAssertEqual(note["messageType"] as? String, "notification", label)
        XCTAssertEqual(note["version"] as? String, mid, label)
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        try waitFor("delivered (\(label))") { try entry(token: tok, mid)["status"]?.stringValue == "delivered" }
    }

    // MARK: Fuzz

    /// What the contract lets the server do with one message of an open, greeted connection.
    enum Expected: CustomStringConvertible {
        /// Answered with this `messageType` and one of these statuses; the connection stays.
        case answer(String, Set<Int>)
        /// `{}` for `{}`.
        case pong
        /// Nothing; the connection stays.
        case ignored
        /// Closed with this code (after an answer of this `messageType` and status, if any).
        case close(UInt16, answer: String?)

        var description: String {
            switch self {
            case .answer(let t, let s): "answer \(t) \(s.sorted())"
            case .pong: "{}"
            case .ignored: "ignored"
            case .close(let c, let a): "close \(c)" + (a.map { " after \($0)" } ?? "")
            }
        }
    }

    /// SplitMix64: a seed in the failure message makes a run repeatable.
    struct Rand {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
        mutating func pick<T>(_ a: [T]) -> T { a[int(a.count)] }
    }

    static let knownTypes = ["hello", "register", "unregister", "ack", "nack", "broadcast_subscribe"]
    static let junkTypes = ["", "Register", "HELLO", "subscribe", "notification", "ping", "ack ", "пинг", "\\u0000", "null"]

    /// Channel ids: a few valid ones shared by the connections (a channel another uaid holds is
    /// 409), and ones autopush refuses.
    static let validChannels = (0..<6).map { String(format: "%08x-1f5c-4a7e-9b8a-2f0c1d2e3f%02x", $0 * 0x1111_1111, $0) }
    static let badChannels = ["NOT-A-UUID", "6D6B9A3E-1F5C-4A7E-9B8A-2F0C1D2E3F40", "6d6b9a3e1f5c4a7e9b8a2f0c1d2e3f40",
                              "6d6b9a3e-1f5c-4a7e-9b8a-2f0c1d2e3f4", "6d6b9a3e-1f5c-4a7e-9b8a-2f0c1d2e3f40 ", "",
                              "{6d6b9a3e-1f5c-4a7e-9b8a-2f0c1d2e3f40}", "6d6b9a3e-1f5c-4a7e-9b8a-2f0c1d2e3g40"]

    /// A JSON value of any type (nested up to `depth`).
    func junkValue(_ r: inout Rand, depth: Int = 3) -> String {
        switch r.int(depth > 0 ? 12 : 9) {
        case 0: return "null"
        case 1: return r.chance(50) ? "true" : "false"
        case 2: return String(r.int(1000) - 500)
        case 3: return r.pick(["123456789012345678901234567890123456789", "-9223372036854775809", "1e308", "-1e308",
                               "1.5e-320", "1E+400", "0.0000000000000000000001", "18446744073709551616"])
        case 4: return r.pick([#""""#, #""x""#, #""é😀""#, #""\"\\\/\b\f\n\r\t""#, #""\u0041\u00e9""#])
        case 5: return "\"" + String(repeating: "A", count: r.int(3000)) + "\""
        case 6: return r.pick(["[]", "{}", "[[[]]]", #"{"a":{"b":{"c":[]}}}"#])
        case 7: return "\"" + r.pick(Self.validChannels) + "\""
        case 8: return "\"" + r.pick(Self.badChannels) + "\""
        case 9: return "[" + (0..<r.int(5)).map { _ in junkValue(&r, depth: depth - 1) }.joined(separator: ",") + "]"
        case 10: return "{" + (0..<r.int(4)).map { "\"k\($0)\":" + junkValue(&r, depth: depth - 1) }.joined(separator: ",") + "}"
        default: return String(repeating: "[", count: 40) + String(repeating: "]", count: 40)  // deep, within 64
        }
    }

    /// One random message and what the contract lets the server do with it.
    func randomMessage(_ r: inout Rand) -> (String, Expected) {
        // Not an object, not JSON, too deep: 1007 (closes are a tenth or so of the messages).
        switch r.int(120) {
        case 0: return (r.pick(["[]", "[1,2]", "\"hello\"", "42", "null", "true"]), .close(1007, answer: nil))
        case 1: return (r.pick(["not json", "{", "{\"messageType\":}", "{'messageType':'hello'}", "{\"a\":01}", ""]), .close(1007, answer: nil))
        case 2:
            let n = 100 + r.int(20_000)
            return (#"{"messageType":"ack","updates":"# + String(repeating: "[", count: n) + String(repeating: "]", count: n) + "}",
                    .close(1007, answer: nil))
        case 3, 6, 7: return ("{}", .pong)
        case 4: return (#"{"messageType":\#(r.pick(["1", "null", "true", "[]", "{}", "\"register\"]"]))}"#, .close(1007, answer: nil))
        case 5: return (#"{"channelID":"\#(r.pick(Self.validChannels))"}"#, .close(1008, answer: nil))
        default: break
        }
        let type = r.chance(96) ? r.pick(r.chance(95) ? Array(Self.knownTypes.dropFirst()) : Self.knownTypes) : r.pick(Self.junkTypes)
        var members: [(String, String)] = [("messageType", "\"\(type)\"")]
        var expected: Expected
        switch type {
        case "hello":
            members.append(("use_webpush", r.chance(80) ? "true" : junkValue(&r)))
            if r.chance(50) { members.append(("uaid", r.chance(50) ? "\"0123456789abcdef0123456789abcdef\"" : junkValue(&r))) }
            expected = .close(1000, answer: "hello 401")
        case "register", "unregister":
            let channel: String?
            switch r.int(10) {
            case 0..<5: channel = "\"" + r.pick(Self.validChannels) + "\""
            case 5..<8: channel = "\"" + r.pick(Self.badChannels) + "\""
            case 8: channel = junkValue(&r)
            default: channel = nil
            }
            if let channel { members.append(("channelID", channel)) }
            let valid = channel.map { c in Self.validChannels.contains { "\"\($0)\"" == c } } ?? false
            if !valid {
                expected = .answer(type, [401])
            } else if type == "unregister" {
                expected = .answer(type, [200])
            } else {
                var statuses: Set<Int> = [200, 409]
                if r.chance(40) {
                    let key = r.chance(50) ? "\"" + r.pick(["BAD", "AAAA", "=", "not-a-key!", String(repeating: "B", count: 87)]) + "\"" : junkValue(&r)
                    members.append(("key", key))
                    // Nothing here is a P-256 point (an empty string neither: Firefox leaves `key` out).
                    statuses = [400, 409]
                }
                expected = .answer(type, statuses)
            }
            if r.chance(30) { members.append(("code", junkValue(&r))) }
        case "ack":
            if r.chance(90) {
                let updates = (0..<r.int(6)).map { _ -> String in
                    r.chance(70)
                        ? #"{"channelID":\#(r.chance(70) ? "\"" + r.pick(Self.validChannels) + "\"" : junkValue(&r)),"version":\#(r.chance(70) ? "\"v\(r.next())\"" : junkValue(&r)),"code":\#(junkValue(&r))}"#
                        : junkValue(&r)
                }
                members.append(("updates", r.chance(85) ? "[" + updates.joined(separator: ",") + "]" : junkValue(&r)))
            }
            expected = .ignored
        case "nack":
            members.append(("version", r.chance(60) ? "\"v\(r.next())\"" : junkValue(&r)))
            if r.chance(70) { members.append(("code", junkValue(&r))) }
            if r.chance(50) { members.append(("channelID", junkValue(&r))) }
            expected = .ignored
        case "broadcast_subscribe":
            if r.chance(70) { members.append(("broadcasts", junkValue(&r))) }
            expected = .ignored
        default:
            expected = .close(1008, answer: nil)
        }
        // Members autopush does not know, anywhere.
        for i in 0..<r.int(3) { members.append(("x\(i)", junkValue(&r))) }
        var order = members
        for i in order.indices.reversed() where i > 0 { order.swapAt(i, r.int(i + 1)) }
        return ("{" + order.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}", expected)
    }

    /// Sends `text` and checks what came against `expected`; false when the connection was closed.
    func check(_ ws: WebSocketTestClient, _ text: String, _ expected: Expected, _ label: String) throws -> Bool {
        // With `{}` behind it in the same write where `{}` is sent too (two writes would wait on
        // Nagle and a delayed ACK).
        let message = WebSocketTestClient.frame(opcode: 1, Array(text.utf8))
        let ping = WebSocketTestClient.frame(opcode: 1, Array("{}".utf8))
        switch expected {
        case .ignored, .close: ws.sendRaw(message + ping)
        case .pong, .answer: ws.sendRaw(message)
        }
        switch expected {
        case .pong:
            XCTAssertEqual(try ws.nextText(), "{}", label)
            return true
        case .ignored:
            // The `{}` after it: its `{}` must be the very next message.
            let next = try ws.nextText()
            XCTAssertEqual(next, "{}", "\(label): expected nothing before the {}")
            return next != nil
        case .answer(let type, let statuses):
            guard let answer = try ws.nextText() else {
                XCTFail("\(label): closed instead of an answer (\(expected))")
                return false
            }
            let o = try JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any]
            XCTAssertEqual(o?["messageType"] as? String, type, "\(label): \(answer)")
            let status = o?["status"] as? Int ?? -1
            XCTAssertTrue(statuses.contains(status), "\(label): \(answer) (expected \(expected))")
            if status != 200 { XCTAssertNotNil(o?["reason"] as? String, "\(label): \(answer)") }
            return true
        case .close(let code, let answer):
            if answer != nil {
                let a = try ws.nextText()
                XCTAssertEqual(a, #"{"messageType":"hello","status":401,"reason":"duplicate hello"}"#, label)
            }
            // The `{}` after it is not answered: the connection is closing.
            guard let f = try ws.next() else {
                XCTFail("\(label): the connection ended without a close frame (expected \(code))")
                return false
            }
            XCTAssertEqual(f.opcode, 8, "\(label): \(f.text.prefix(300)) instead of close \(code)")
            XCTAssertEqual(f.closeCode, Int(code), "\(label): closed \(f.closeCode) \(f.closeReason)")
            // The client's close answers it, and the server ends the TCP connection.
            ws.sendRaw(WebSocketTestClient.frame(opcode: 8, Array(f.payload.prefix(2))))
            XCTAssertEqual(try ws.next(), nil, "\(label): the TCP connection ends after the closing handshake")
            return false
        }
    }

    func testTwoThousandRandomMessagesOnSeveralConnectionsThenAWellBehavedClientIsServed() throws {
        let seed = ProcessInfo.processInfo.environment["AUTOPUSH_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        var r = Rand(state: seed)
        print("AutopushAttackTests fuzz seed \(seed) (AUTOPUSH_FUZZ_SEED=\(seed) repeats the run)")
        var connections: [WebSocketTestClient] = try (0..<6).map { _ in try hello().0 }
        var counts: [String: Int] = [:]
        let started = Date()
        for i in 0..<2000 {
            let (text, expected) = randomMessage(&r)
            let which = r.int(connections.count)
            let label = "seed \(seed), message \(i) on connection \(which): \(text.prefix(400))"
            if ProcessInfo.processInfo.environment["AUTOPUSH_FUZZ_TRACE"] != nil { FileHandle.standardError.write(Data((label + "\n").utf8)) }
            let open = try check(connections[which], text, expected, label)
            if !open { connections[which] = try hello().0 }
            let kind = "\(expected)".split(separator: " ").first.map(String.init) ?? ""
            counts[kind, default: 0] += 1
            if testRun?.failureCount ?? 0 > 20 { break }
        }
        print("fuzz: \(counts.sorted { $0.key < $1.key }) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        // Everything still open is still served, and a new client gets its push.
        for ws in connections { try synced(ws) }
        try assertServed("after the fuzz")
        let health = try XCTUnwrap(try server.client().request("GET", "/api/v1/health").object)
        XCTAssertEqual(health["status"]?.stringValue, "ok")
    }

    /// Frames no library would send, one connection each, then a well-behaved client is served.
    func testHostileFramesCloseTheirOwnConnectionWithTheTablesCodes() throws {
        let (bystander, _) = try hello()
        func closes(_ bytes: [UInt8], _ code: Int, afterHello: Bool = true, _ label: String) throws {
            let ws = afterHello ? try hello().0 : try WebSocketTestClient(port: server.port)
            ws.sendRaw(bytes)
            XCTAssertEqual(try ws.waitForClose()?.code, code, label)
            try synced(bystander)
        }
        let f = WebSocketTestClient.frame
        try closes(f(1, Array("{}".utf8), true, false, 0), 1002, "unmasked")
        try closes(f(1, Array("{}".utf8), true, true, 4), 1002, "RSV1")
        try closes(f(1, Array("{}".utf8), true, true, 1), 1002, "RSV3")
        try closes(f(3, [], true, true, 0), 1002, "opcode 3")
        try closes(f(11, [], true, true, 0), 1002, "opcode 11")
        try closes(f(9, [], false, true, 0), 1002, "a fragmented ping")
        try closes(f(9, [UInt8](repeating: 0x61, count: 126), true, true, 0), 1002, "a ping of 126 bytes")
        try closes(f(0, Array("{}".utf8), true, true, 0), 1002, "a continuation without a message")
        try closes(f(1, Array("{".utf8), false, true, 0) + f(1, Array("}".utf8), true, true, 0), 1002, "a new message inside a fragmented one")
        try closes(f(2, [1, 2, 3], true, true, 0), 1003, "binary")
        try closes(f(1, [0x7B, 0xFF, 0x7D], true, true, 0), 1007, "not UTF-8")
        // A header declaring 2^62 bytes, and none of them.
        try closes([0x81, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], 1009, "2^62 bytes declared")
        try closes(f(1, Array(("{\"x\":\"" + String(repeating: "a", count: 70 * 1024) + "\"}").utf8), true, true, 0), 1009, "70 KiB")
        var fragments: [UInt8] = []
        for i in 0..<7 { fragments += f(i == 0 ? 1 : 0, [UInt8](repeating: 0x20, count: 10 * 1024), i == 6, true, 0) }
        try closes(fragments, 1009, "70 KiB in 10 KiB fragments")
        try closes(f(1, Array(#"{"messageType":"register"}"#.utf8), true, true, 0), 1008, afterHello: false, "register before hello")
        try assertServed("after the hostile frames")
    }

    // MARK: Another connection's versions

    func testAcksAndNacksOfAnotherConnectionsVersionsAreIgnored() throws {
        let (owner, _) = try hello()
        let channel = "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
        let endpoint = try register(owner, channel: channel)
        let tok = try token(of: endpoint)
        let mid = try push(endpoint)
        let note = try owner.nextJSON()
        XCTAssertEqual(note["version"] as? String, mid)
        XCTAssertEqual(try entry(token: tok, mid)["status"]?.stringValue, "sent")

        // Another uaid's connection acknowledges the owner's version every way it can.
        let (other, _) = try hello()
        other.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        other.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":101}]}"#)
        other.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)"}]}"#)
        other.send(text: #"{"messageType":"nack","channelID":"\#(channel)","version":"\#(mid)","code":301}"#)
        try synced(other)  // all four were read and handled
        var e = try entry(token: tok, mid)
        XCTAssertEqual(e["status"]?.stringValue, "sent")
        XCTAssertEqual(e["delivered_at"], .null)
        XCTAssertEqual(e["client_delivery"]?.objectValue?["ack"], .null)
        XCTAssertEqual(e["client_delivery"]?.objectValue?["rejection"], .null)

        // The owner's ack counts; another connection's nack after it does not.
        owner.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        try waitFor("delivered") { try entry(token: tok, mid)["status"]?.stringValue == "delivered" }
        other.send(text: #"{"messageType":"nack","channelID":"\#(channel)","version":"\#(mid)","code":302}"#)
        try synced(other)
        e = try entry(token: tok, mid)
        XCTAssertEqual(e["status"]?.stringValue, "delivered")
        XCTAssertEqual(e["client_delivery"]?.objectValue?["rejection"], .null)
        XCTAssertEqual(e["client_delivery"]?.objectValue?["ack"]?.objectValue?["code"], .number(JSONNumber(100)))
        try synced(owner)
    }
}
