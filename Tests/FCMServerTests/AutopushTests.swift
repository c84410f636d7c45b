import FCMCore
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import HTTPServer
@testable import TLS
import XCTest

/// Firefox's push service through the real server (docs/real-clients.md): a raw WebSocket client
/// speaking autopush on `/autopush`, pushes sent through `/wp/{id}` with VAPID, answers checked
/// byte for byte where autopush fixes them, and what the control API says happened.
final class AutopushTests: XCTestCase {
    var server: TestServer!
    let vapidKey = try! P256PrivateKey()
    let channel = "5f3c1a9e-2b4d-4c6e-8f0a-1b2c3d4e5f60"

    override func setUpWithError() throws {
        server = try TestServer()
    }

    override func tearDown() {
        server?.stop()
    }

    var origin: String { "http://127.0.0.1:\(server.port)" }

    // MARK: Helpers

    func connect(path: String = "/autopush", protocols: String? = "push-notification", host: String? = nil) throws -> WebSocketTestClient {
        let ws = try WebSocketTestClient(port: server.port, path: path, protocols: protocols, host: host)
        XCTAssertEqual(ws.status, 101, ws.head)
        return ws
    }

    /// Connects and says hello (with `uaid` when given); returns the client and its uaid.
    func hello(uaid: String? = nil) throws -> (WebSocketTestClient, String) {
        let ws = try connect()
        let extra = uaid.map { #","uaid":"\#($0)""# } ?? ""
        ws.send(text: #"{"messageType":"hello","broadcasts":{},"use_webpush":true\#(extra)}"#)
        let text = try XCTUnwrap(try ws.nextText())
        let o = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let id = try XCTUnwrap(o["uaid"] as? String)
        XCTAssertEqual(text, #"{"messageType":"hello","uaid":"\#(id)","status":200,"use_webpush":true,"broadcasts":{}}"#)
        return (ws, id)
    }

    /// Registers `channel` (with the VAPID key) and returns the push endpoint.
    func register(_ ws: WebSocketTestClient, channel: String? = nil, key: String? = nil) throws -> String {
        let ch = channel ?? self.channel
        let k = key ?? vapidKey.publicKey.base64URL + "="  // Firefox pads it
        // An empty `key` here leaves it out, as Firefox does without an applicationServerKey.
        ws.send(text: k.isEmpty ? #"{"channelID":"\#(ch)","messageType":"register"}"#
                                : #"{"channelID":"\#(ch)","messageType":"register","key":"\#(k)"}"#)
        let text = try XCTUnwrap(try ws.nextText())
        let endpoint = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["pushEndpoint"] as? String, text)
        XCTAssertEqual(text, #"{"messageType":"register","channelID":"\#(ch)","status":200,"pushEndpoint":"\#(endpoint)"}"#)
        return endpoint
    }

    func jwt(aud: String? = nil) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let header = #"{"typ":"JWT","alg":"ES256"}"#
        let claims = #"{"aud":"\#(aud ?? origin)","exp":\#(now + 3600),"sub":"mailto:ops@example.com"}"#
        let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try vapidKey.signES256(Array(input.utf8)))
    }

    /// Pushes `body` to `endpoint` (aes128gcm unless headers say otherwise); the answer.
    func push(_ endpoint: String, _ body: [UInt8] = Array("ciphertext-for-the-browser".utf8), ttl: Int = 60,
              headers: [(String, String)] = [("Content-Encoding", "aes128gcm")]) throws -> WireResponse {
        let path = String(endpoint.dropFirst(origin.count))
        return try server.client().request("POST", path, headers: [("TTL", String(ttl)), ("Authorization", "vapid t=\(try jwt()), k=\(vapidKey.publicKey.base64URL)")] + headers, body: body)
    }

    func get(_ path: String) throws -> JSONObject {
        try XCTUnwrap(try server.client().request("GET", path).object, path)
    }

    func device(channelEndpoint endpoint: String) throws -> JSONObject {
        let id = String(endpoint.split(separator: "/").last ?? "")
        let items = try XCTUnwrap(try get("/api/v1/devices?web_push_id=\(id)")["items"]?.arrayValue)
        return try XCTUnwrap(items.first?.objectValue)
    }

    func entry(_ token: String, _ messageID: String) throws -> JSONObject {
        try get("/api/v1/devices/\(token)/messages/\(pathEncode(messageID))")
    }

    func messageID(_ r: WireResponse) throws -> String {
        let location = try XCTUnwrap(r.headers["location"], r.text)
        return String(location.dropFirst((origin + "/m/").count)).replacingOccurrences(of: "%25", with: "%")
    }

    // MARK: Hello, register, push, ack

    func testHelloRegisterPushAndAckMakeADeliveredRelayedEntry() throws {
        let (ws, uaid) = try hello()
        XCTAssertEqual(ws.header("sec-websocket-protocol"), "push-notification")
        XCTAssertEqual(uaid.count, 32)
        let endpoint = try register(ws)
        XCTAssertTrue(endpoint.hasPrefix(origin + "/wp/"), endpoint)
        XCTAssertEqual(endpoint.count - (origin + "/wp/").count, 86)

        let d = try device(channelEndpoint: endpoint)
        XCTAssertEqual(d["platform"]?.stringValue, "web")
        XCTAssertEqual(d["state"]?.stringValue, "registered")
        XCTAssertEqual(d["online"], .bool(true))
        XCTAssertEqual(d["application_server_key"]?.stringValue, vapidKey.publicKey.base64URL)
        let sub = try XCTUnwrap(d["web_push"]?.objectValue)
        XCTAssertEqual(sub["endpoint"]?.stringValue, endpoint)
        XCTAssertEqual(sub["keys"], .null)
        let client = try XCTUnwrap(d["client"]?.objectValue)
        XCTAssertEqual(client["kind"]?.stringValue, "autopush")
        XCTAssertEqual(client["id"]?.stringValue, uaid)
        XCTAssertEqual(client["connected"], .bool(true))
        XCTAssertEqual(client["channel_id"]?.stringValue, channel)
        let token = try XCTUnwrap(d["token"]?.stringValue)

        let body = Array("ciphertext-for-the-browser".utf8)
        let r = try push(endpoint, body)
        XCTAssertEqual(r.status, 201, r.text)
        let mid = try messageID(r)
        let note = try XCTUnwrap(try ws.nextText())
        XCTAssertEqual(note, #"{"messageType":"notification","channelID":"\#(channel)","version":"\#(mid)","data":"\#(base64URLEncode(body))","headers":{"encoding":"aes128gcm"}}"#)
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "sent")

        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        try waitFor("delivered") { try entry(token, mid)["status"]?.stringValue == "delivered" }
        let e = try entry(token, mid)
        XCTAssertNotNil(e["delivered_at"]?.stringValue)
        let cd = try XCTUnwrap(e["client_delivery"]?.objectValue)
        XCTAssertEqual(cd["kind"]?.stringValue, "autopush")
        XCTAssertEqual(cd["version"]?.stringValue, mid)
        XCTAssertEqual(cd["sends"], .number(JSONNumber(1)))
        XCTAssertEqual(cd["ack"]?.objectValue?["code"], .number(JSONNumber(100)))
        XCTAssertEqual(cd["ack"]?.objectValue?["by"]?.stringValue, "ack")
        XCTAssertEqual(cd["rejection"], .null)
        let block = try XCTUnwrap(e["webpush"]?.objectValue)
        XCTAssertEqual(block["relayed"], .bool(true))
        XCTAssertEqual(block["plaintext"], .null)
        XCTAssertEqual(block["decrypt_error"], .null)
        XCTAssertEqual(block["ciphertext_base64"]?.stringValue, base64URLEncode(body))
        // The record's recipient says the same.
        let record = try get("/api/v1/messages/\(pathEncode(mid))")
        let recipient = try XCTUnwrap(record["recipients"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(recipient["status"]?.stringValue, "delivered")
        XCTAssertEqual(recipient["client_delivery"]?.objectValue?["ack"]?.objectValue?["code"], .number(JSONNumber(100)))
        // The records of real clients' deliveries, by the client's kind.
        let mine = try XCTUnwrap(try get("/api/v1/messages?client_kind=autopush")["items"]?.arrayValue)
        XCTAssertEqual(mine.compactMap { $0.objectValue?["message_id"]?.stringValue }, [mid])
        XCTAssertEqual(try get("/api/v1/messages?client_kind=gcm")["items"]?.arrayValue?.count, 0)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/messages?client_kind=phone").status, 400)
        XCTAssertEqual(try get("/api/v1/messages?status=delivered&client_kind=autopush")["items"]?.arrayValue?.count, 1)
    }

    func testAnAckIsCommittedAloneOrWithTheNextWrite() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)

        // Nothing else is written after the ack: it is committed on its own, and a long poll on
        // the delivered entries sees it.
        let first = try messageID(try push(endpoint))
        _ = try XCTUnwrap(try ws.nextText())
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(first)","code":100}]}"#)
        let polled = try get("/api/v1/devices/\(token)/messages?status=delivered&wait=10")
        XCTAssertEqual(polled["items"]?.arrayValue?.compactMap { $0.objectValue?["message_id"]?.stringValue }, [first])

        // A write right after the ack (the ack read first: the ping after it is answered in
        // order) carries it: by the time that write is answered, the entry reads delivered.
        let second = try messageID(try push(endpoint))
        _ = try XCTUnwrap(try ws.nextText())
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(second)","code":100}]}"#)
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
        let made = try server.client().postJSON("/api/v1/devices", #"{"sender_id":"\#(DemoProject.senderID)","platform":"android"}"#)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(try entry(token, second)["status"]?.stringValue, "delivered")
    }

    func testAnAesgcmPushCarriesItsEncryptionAndCryptoKeyAndAPushWithoutBodyCarriesNeither() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let jwtText = try jwt()
        let r = try server.client().request("POST", String(endpoint.dropFirst(origin.count)),
                                            headers: [("TTL", "60"), ("Content-Encoding", "aesgcm"), ("Encryption", "salt=c2FsdHNhbHRzYWx0c2FsdA"),
                                                      ("Crypto-Key", "dh=BDd3_hVL9fZi9Ybo2UUzA284WG5FZR30_95YeZJsiApwXKpNcF1rRPF3foIiBHXRdJI2Qhumhf6_LFTeZaNndIo;p256ecdsa=\(vapidKey.publicKey.base64URL)"),
                                                      ("Authorization", "WebPush \(jwtText)")],
                                            body: [1, 2, 3, 4])
        XCTAssertEqual(r.status, 201, r.text)
        let o = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(try ws.nextText()).utf8)) as? [String: Any])
        let h = try XCTUnwrap(o["headers"] as? [String: String])
        XCTAssertEqual(h["encoding"], "aesgcm")
        XCTAssertEqual(h["encryption"], "salt=c2FsdHNhbHRzYWx0c2FsdA")
        XCTAssertTrue(h["crypto_key"]?.hasPrefix("dh=BDd3") == true)

        let empty = try push(endpoint, [], headers: [])
        XCTAssertEqual(empty.status, 201, empty.text)
        let text = try XCTUnwrap(try ws.nextText())
        XCTAssertEqual(text, #"{"messageType":"notification","channelID":"\#(channel)","version":"\#(try messageID(empty))"}"#)
    }

    func testAckCodesAndANackAfterAnAckSetClientRejected() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let a = try messageID(try push(endpoint))
        _ = try ws.nextText()
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(a)","code":101}]}"#)
        try waitFor("client_rejected") { try entry(token, a)["status"]?.stringValue == "client_rejected" }
        let rejected = try XCTUnwrap(try entry(token, a)["client_delivery"]?.objectValue)
        XCTAssertEqual(rejected["ack"]?.objectValue?["code"], .number(JSONNumber(101)))
        XCTAssertEqual(rejected["rejection"]?.objectValue?["code"], .number(JSONNumber(101)))
        XCTAssertEqual(rejected["rejection"]?.objectValue?["reason"]?.stringValue, "the browser could not decrypt it")

        let b = try messageID(try push(endpoint))
        _ = try ws.nextText()
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(b)"}]}"#)
        try waitFor("delivered") { try entry(token, b)["status"]?.stringValue == "delivered" }
        let deliveredAt = try entry(token, b)["delivered_at"]?.stringValue
        ws.send(text: #"{"messageType":"nack","version":"\#(b)","code":301}"#)
        try waitFor("client_rejected after the nack") { try entry(token, b)["status"]?.stringValue == "client_rejected" }
        let e = try entry(token, b)
        XCTAssertEqual(e["delivered_at"]?.stringValue, deliveredAt)
        XCTAssertEqual(e["client_delivery"]?.objectValue?["rejection"]?.objectValue?["code"], .number(JSONNumber(301)))
        XCTAssertEqual(e["client_delivery"]?.objectValue?["ack"]?.objectValue?["code"], .number(JSONNumber(100)))
        // A rejection is no error of the record.
        let record = try get("/api/v1/messages/\(pathEncode(b))")
        XCTAssertEqual(record["error"], .null)
        // An ack for a version this connection never sent is ignored; the connection stays.
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"0:1%abc","code":100}]}"#)
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
    }

    // MARK: Offline, reconnect, takeover

    func testHeldPushesGoOutAfterTheNextHelloAndUnackedOnesAreResentWithTheSameVersion() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        // Written, not acknowledged, then the connection drops: back to pending.
        let first = try messageID(try push(endpoint))
        _ = try ws.nextText()
        ws.sendRaw(WebSocketTestClient.frame(opcode: 8, [0x03, 0xE8]))
        XCTAssertEqual(try ws.waitForClose()?.code, 1000)
        try waitFor("pending again") { try entry(token, first)["status"]?.stringValue == "pending" }
        XCTAssertEqual(try get("/api/v1/devices/\(token)")["online"], .bool(false))
        // Offline: held; TTL 0 is expired at once.
        let second = try messageID(try push(endpoint))
        XCTAssertEqual(try entry(token, second)["status"]?.stringValue, "pending")
        let zero = try messageID(try push(endpoint, ttl: 0))
        XCTAssertEqual(try entry(token, zero)["status"]?.stringValue, "expired")

        let (again, same) = try hello(uaid: uaid)
        XCTAssertEqual(same, uaid)
        let n1 = try again.nextJSON()
        let n2 = try again.nextJSON()
        XCTAssertEqual(n1["version"] as? String, first)
        XCTAssertEqual(n2["version"] as? String, second)
        XCTAssertEqual(try entry(token, first)["client_delivery"]?.objectValue?["sends"], .number(JSONNumber(2)))
        again.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(first)","code":100},{"channelID":"\#(channel)","version":"\#(second)","code":100}]}"#)
        try waitFor("both delivered") {
            try entry(token, first)["status"]?.stringValue == "delivered" && entry(token, second)["status"]?.stringValue == "delivered"
        }
    }

    func testANewerHelloOfTheSameUAIDClosesTheOlderAndTakesOverItsUnacked() throws {
        let (old, uaid) = try hello()
        let endpoint = try register(old)
        let mid = try messageID(try push(endpoint))
        _ = try old.nextText()
        let (new, _) = try hello(uaid: uaid)
        XCTAssertEqual(try new.nextJSON()["version"] as? String, mid)
        let closed = try old.waitForClose()
        XCTAssertEqual(closed?.code, 1000)
        // The same channel again from the same uaid answers the same endpoint.
        XCTAssertEqual(try register(new), endpoint)
    }

    func testAnUnknownUAIDGetsANewOneAndItsChannelsAreNotItsOwn() throws {
        let (ws, uaid) = try hello(uaid: "0123456789abcdef0123456789abcdef")
        XCTAssertNotEqual(uaid, "0123456789abcdef0123456789abcdef")
        _ = try register(ws)
        let (other, _) = try hello()
        other.send(text: #"{"channelID":"\#(channel)","messageType":"register"}"#)
        XCTAssertEqual(try other.nextText(), #"{"messageType":"register","channelID":"\#(channel)","status":409,"reason":"channelID in use"}"#)
    }

    func testUnregisterEndsTheSubscriptionWith410Errno106() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        // Held while the device is held offline: dropped when the channel unregisters.
        _ = try server.client().request("PATCH", "/api/v1/devices/\(token)", headers: [("Content-Type", "application/json")],
                                        body: Array(#"{"online":false}"#.utf8))
        let held = try messageID(try push(endpoint))
        ws.send(text: #"{"channelID":"\#(channel)","messageType":"unregister","code":200}"#)
        XCTAssertEqual(try ws.nextText(), #"{"messageType":"unregister","channelID":"\#(channel)","status":200}"#)
        let d = try device(channelEndpoint: endpoint)
        XCTAssertEqual(d["state"]?.stringValue, "unregistered")
        XCTAssertEqual(d["client"]?.objectValue?["unregister_code"], .number(JSONNumber(200)))
        let r = try push(endpoint)
        XCTAssertEqual(r.status, 410, r.text)
        XCTAssertEqual(r.object?["errno"], .number(JSONNumber(106)))
        let dropped = try entry(token, held)
        XCTAssertEqual(dropped["status"]?.stringValue, "dropped")
        XCTAssertEqual(dropped["error_detail"]?.stringValue, "the channel unregistered")
        // An unknown channel is answered 200 all the same.
        ws.send(text: #"{"channelID":"00000000-0000-4000-8000-000000000000","messageType":"unregister","code":200}"#)
        XCTAssertEqual(try ws.nextText(), #"{"messageType":"unregister","channelID":"00000000-0000-4000-8000-000000000000","status":200}"#)
    }

    // MARK: Refusals

    func testRefusedRequestsGetAutopushsShapeAndTheConnectionStays() throws {
        let (ws, _) = try hello()
        ws.send(text: #"{"messageType":"register"}"#)
        XCTAssertEqual(try ws.nextText(), #"{"messageType":"register","status":401,"reason":"missing channelID"}"#)
        ws.send(text: #"{"messageType":"register","channelID":"5F3C1A9E-2B4D-4C6E-8F0A-1B2C3D4E5F60"}"#)
        XCTAssertEqual(try ws.nextText(),
                       #"{"messageType":"register","channelID":"5F3C1A9E-2B4D-4C6E-8F0A-1B2C3D4E5F60","status":401,"reason":"Bad UUID format, use lower case, dashed format"}"#)
        // No P-256 point: too short, empty (Firefox leaves `key` out instead), or in standard
        // base64 (`+`, `/`) rather than base64url.
        var standard = vapidKey.publicKey.base64URL
        while !standard.contains(where: { $0 == "-" || $0 == "_" }) { standard = try P256TestKey.publicBase64URL() }
        standard = standard.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        for key in ["AAAA", "", standard] {
            ws.send(text: #"{"messageType":"register","channelID":"\#(channel)","key":"\#(key)"}"#)
            let bad = try XCTUnwrap(try ws.nextText())
            XCTAssertTrue(bad.hasPrefix(#"{"messageType":"register","channelID":"\#(channel)","status":400,"reason":"invalid key: "#), bad)
        }
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
        ws.send(text: #"{"messageType":"broadcast_subscribe","broadcasts":{"remote-settings/monitor_changes":"v1"}}"#)
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
        // No key: a subscription without an applicationServerKey.
        let endpoint = try register(ws, channel: "11111111-2222-4333-8444-555555555555", key: "")
        XCTAssertEqual(try device(channelEndpoint: endpoint)["application_server_key"], .null)
    }

    /// An ack's update names its channel: one naming another channel of the uaid, or none, is not
    /// that version's ack (ignored, the push stays `sent`); the right one settles it.
    func testAnAckNamingAnotherChannelIsIgnored() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let other = "22222222-3333-4444-8555-666666666666"
        _ = try register(ws, channel: other)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let mid = try messageID(try push(endpoint))
        _ = try ws.nextText()
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(other)","version":"\#(mid)","code":100}]}"#)
        ws.send(text: #"{"messageType":"ack","updates":[{"version":"\#(mid)","code":100}]}"#)
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}")
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "sent")
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        try waitFor("delivered") { try entry(token, mid)["status"]?.stringValue == "delivered" }
    }

    /// The same channel registered again with another key answers the same endpoint, now bound
    /// to the newer key: pushes signed with the first are refused.
    func testRegisteringAChannelAgainWithAnotherKeyBindsTheNewKey() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        XCTAssertEqual(try push(endpoint).status, 201)
        XCTAssertTrue(try XCTUnwrap(try ws.nextText()).contains("notification"))
        let newer = try P256PrivateKey()
        XCTAssertEqual(try register(ws, key: newer.publicKey.base64URL), endpoint)
        XCTAssertEqual(try device(channelEndpoint: endpoint)["application_server_key"]?.stringValue, newer.publicKey.base64URL)
        XCTAssertEqual(try push(endpoint).status, 403, "signed with the key the channel no longer has")
    }

    func testClosesOfTheProtocol() throws {
        // A first message that is not hello: 1008.
        let a = try connect()
        a.send(text: #"{"messageType":"register","channelID":"\#(channel)"}"#)
        let ca = try XCTUnwrap(try a.waitForClose())
        XCTAssertEqual(ca.code, 1008)
        XCTAssertTrue(ca.reason.contains("hello"), ca.reason)
        // Not JSON, or not an object: 1007.
        let b = try connect()
        b.send(text: "not json")
        XCTAssertEqual(try b.waitForClose()?.code, 1007)
        let b2 = try connect()
        b2.send(text: "[1,2]")
        XCTAssertEqual(try b2.waitForClose()?.code, 1007)
        // hello without use_webpush: 401 then 1000.
        let c = try connect()
        c.send(text: #"{"messageType":"hello"}"#)
        XCTAssertEqual(try c.nextText(), #"{"messageType":"hello","status":401,"reason":"Simplepush not supported"}"#)
        XCTAssertEqual(try c.waitForClose()?.code, 1000)
        // A second hello: 401 duplicate hello, then 1000.
        let (d, _) = try hello()
        d.send(text: #"{"messageType":"hello","use_webpush":true}"#)
        XCTAssertEqual(try d.nextText(), #"{"messageType":"hello","status":401,"reason":"duplicate hello"}"#)
        XCTAssertEqual(try d.waitForClose()?.code, 1000)
        // An unknown messageType: 1008 naming it.
        let (e, _) = try hello()
        e.send(text: #"{"messageType":"subscribe"}"#)
        let ce = try XCTUnwrap(try e.waitForClose())
        XCTAssertEqual(ce.code, 1008)
        XCTAssertTrue(ce.reason.contains("subscribe"), ce.reason)
        // A binary message: 1003.
        let (f, _) = try hello()
        f.sendRaw(WebSocketTestClient.frame(opcode: 2, [1, 2, 3]))
        XCTAssertEqual(try f.waitForClose()?.code, 1003)
    }

    func testTheUpgradeItself() throws {
        // Without an upgrade: 426.
        let r = try server.client().request("GET", "/autopush")
        XCTAssertEqual(r.status, 426, r.text)
        XCTAssertEqual(r.headers["upgrade"], "websocket")
        // GET / offering push-notification is autopush; without it, the page.
        let root = try connect(path: "/")
        XCTAssertEqual(root.header("sec-websocket-protocol"), "push-notification")
        XCTAssertEqual(try server.client().request("GET", "/").status, 200)
        // A raw client offering no subprotocol is served too.
        let raw = try connect(protocols: nil)
        XCTAssertNil(raw.header("sec-websocket-protocol"))
        XCTAssertNil(raw.header("sec-websocket-extensions"))
        // An unknown project: 400.
        let unknown = try WebSocketTestClient(port: server.port, path: "/autopush?project=nope")
        XCTAssertEqual(unknown.status, 400, unknown.head)
    }

    func testEndpointsFollowTheOriginTheBrowserCameIn() throws {
        // Mozilla's own name gives Mozilla's endpoint form, which the mock also serves.
        let ws = try connect(host: "push.services.mozilla.com")
        ws.send(text: #"{"messageType":"hello","use_webpush":true}"#)
        _ = try ws.nextText()
        ws.send(text: #"{"channelID":"\#(channel)","messageType":"register"}"#)
        let o = try ws.nextJSON()
        let endpoint = try XCTUnwrap(o["pushEndpoint"] as? String)
        XCTAssertTrue(endpoint.hasPrefix("https://updates.push.services.mozilla.com/wpush/v2/"), endpoint)
        let id = String(endpoint.split(separator: "/").last ?? "")
        // Reached on the plain port as /wpush/v2/{id} (VAPID's aud is the origin it arrives on).
        let r = try server.client().request("POST", "/wpush/v2/\(id)", headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm"),
                                            ("Authorization", "vapid t=\(try jwt()), k=\(vapidKey.publicKey.base64URL)")], body: [9, 9])
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(try ws.nextJSON()["messageType"] as? String, "notification")
        // endpoint_base names the origin outright.
        let b = try connect(path: "/autopush?endpoint_base=https%3A%2F%2Fpush.example.test%3A8443&app=web.example")
        b.send(text: #"{"messageType":"hello","use_webpush":true}"#)
        _ = try b.nextText()
        b.send(text: #"{"channelID":"11111111-2222-4333-8444-555555555555","messageType":"register"}"#)
        let e2 = try XCTUnwrap(try b.nextJSON()["pushEndpoint"] as? String)
        XCTAssertTrue(e2.hasPrefix("https://push.example.test:8443/wp/"), e2)
        let id2 = String(e2.split(separator: "/").last ?? "")
        let d = try XCTUnwrap(try get("/api/v1/devices?web_push_id=\(id2)")["items"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(d["app"]?.stringValue, "web.example")
    }

    // MARK: Control API, faults, reset

    func testClientsListDisconnectWithBackoffAndDelete() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let list = try XCTUnwrap(try get("/api/v1/clients?kind=autopush&connected=true")["items"]?.arrayValue)
        // A list as every list: `limit` and `cursor` checked.
        XCTAssertEqual(try server.client().request("GET", "/api/v1/clients?limit=0").status, 400)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/clients?cursor=%25%25junk").status, 400)
        let c = try XCTUnwrap(list.first?.objectValue)
        XCTAssertEqual(c["id"]?.stringValue, uaid)
        XCTAssertEqual(c["kind"]?.stringValue, "autopush")
        XCTAssertEqual(c["connected"], .bool(true))
        XCTAssertEqual(c["devices"]?.arrayValue?.count, 1)
        XCTAssertEqual(c["connection"]?.objectValue?["tls"], .bool(false))
        let devices = try XCTUnwrap(try get("/api/v1/devices?client_kind=autopush&client_id=\(uaid)")["items"]?.arrayValue)
        XCTAssertEqual(devices.count, 1)
        // `any` keeps every real client's device, and only those (fake devices have no client).
        let any = try XCTUnwrap(try get("/api/v1/devices?client_kind=any&limit=1000")["items"]?.arrayValue)
        XCTAssertEqual(any.map { $0.objectValue?["token"] }, devices.map { $0.objectValue?["token"] })
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices?client_kind=pigeon").status, 400)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/clients/nope").status, 404)
        // A real client's device cannot be made through the control API.
        let made = try server.client().postJSON("/api/v1/devices", #"{"sender_id":"1234567890","platform":"web","client":{"kind":"autopush"}}"#)
        XCTAssertEqual(made.status, 400, made.text)

        let r = try server.client().postJSON("/api/v1/clients/\(uaid):disconnect", #"{"backoff":true}"#)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try ws.waitForClose()?.code, 4774)
        try waitFor("disconnected") { try get("/api/v1/clients/\(uaid)")["connected"] == .bool(false) }

        let (again, _) = try hello(uaid: uaid)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let events = try SSEClient(port: server.port)
        XCTAssertEqual(try events.status(), 200)
        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/clients/\(uaid)").status, 204)
        XCTAssertNotNil(try again.waitForClose())
        XCTAssertEqual(try push(endpoint).status, 410)
        // Its devices are gone, and their tokens are no unknown tokens to register: NotRegistered.
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").status, 404)
        let send = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"a":"b"}}"#,
                                                headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
        XCTAssertEqual(send.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue, "NotRegistered", send.text)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").status, 404, "not registered by the send")
        var closed = ""
        while closed.isEmpty, let e = try events.next(timeout: 5) {
            if e.event == "client.closed" { closed = e.data }
        }
        XCTAssertTrue(closed.contains(#""reason":"the client was deleted""#), closed)
        XCTAssertTrue(closed.contains(#""connected":false"#), closed)
    }

    /// A push written and not acknowledged when its client (or its device) is deleted is
    /// `deleted` on the records, not `sent` for ever; one it acknowledged stays `delivered`.
    func testDeletingAClientDeletesWhatItHadNotAcknowledged() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let taken = try push(endpoint)
        XCTAssertEqual(taken.status, 201, taken.text)
        let takenID = try messageID(taken)
        let first = try XCTUnwrap(try ws.nextText())
        let version = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])?["version"] as? String, first)
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(version)","code":100}]}"#)
        let takenToken = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        try waitFor("delivered") { try entry(takenToken, takenID)["status"]?.stringValue == "delivered" }
        let sent = try push(endpoint)
        XCTAssertEqual(sent.status, 201, sent.text)
        let id = try messageID(sent)
        let notification = try XCTUnwrap(try ws.nextText())
        XCTAssertTrue(notification.contains(#""messageType":"notification""#), notification)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        try waitFor("sent") { try entry(token, id)["status"]?.stringValue == "sent" }
        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/clients/\(uaid)").status, 204)
        let record = try get("/api/v1/messages/\(pathEncode(id))")
        XCTAssertEqual(record["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "deleted", "\(record)")
        let kept = try get("/api/v1/messages/\(pathEncode(takenID))")
        XCTAssertEqual(kept["recipients"]?.arrayValue?.first?.objectValue?["status"]?.stringValue, "delivered", "\(kept)")
    }

    func testHeldOnlineFalseWhileConnectedThenReleased() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let off = try server.client().request("PATCH", "/api/v1/devices/\(token)", headers: [("Content-Type", "application/json")],
                                              body: Array(#"{"online":false}"#.utf8))
        XCTAssertEqual(off.status, 200, off.text)
        let mid = try messageID(try push(endpoint))
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "pending")
        ws.send(text: "{}")
        XCTAssertEqual(try ws.nextText(), "{}", "nothing was written while held")
        _ = try server.client().request("PATCH", "/api/v1/devices/\(token)", headers: [("Content-Type", "application/json")],
                                        body: Array(#"{"online":true}"#.utf8))
        XCTAssertEqual(try ws.nextJSON()["version"] as? String, mid)
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "sent")
    }

    func testResetKeepsRealClientsAndClientsFalseForgetsThem() throws {
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        XCTAssertEqual(try server.client().request("POST", "/api/v1/reset").status, 204)
        XCTAssertEqual(try device(channelEndpoint: endpoint)["state"]?.stringValue, "registered")
        XCTAssertEqual(try push(endpoint).status, 201)
        XCTAssertEqual(try ws.nextJSON()["messageType"] as? String, "notification")
        XCTAssertEqual(try get("/api/v1/clients/\(uaid)")["connected"], .bool(true))

        XCTAssertEqual(try server.client().request("POST", "/api/v1/reset?clients=false").status, 204)
        XCTAssertNotNil(try ws.waitForClose())
        XCTAssertEqual(try server.client().request("GET", "/api/v1/clients/\(uaid)").status, 404)
        XCTAssertNotEqual(try push(endpoint).status, 201)
    }

    func testAutopushFaultsCloseTheConnectionOrDelayTheWrite() throws {
        let bad = try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"autopush"},"then":{"status":503}}"#)
        XCTAssertEqual(bad.status, 400, bad.text)
        let (ws, uaid) = try hello()
        let endpoint = try register(ws)
        let token = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let f = try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"autopush"},"then":{"close_connection":true},"times":1}"#)
        XCTAssertEqual(f.status, 201, f.text)
        let r = try push(endpoint)
        XCTAssertEqual(r.status, 201, r.text)
        let mid = try messageID(r)
        XCTAssertNotNil(try ws.waitForClose())
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "pending")
        // The fault that fired is on the record, as every fault's.
        let faultID = try XCTUnwrap(f.object?["id"]?.stringValue, f.text)
        XCTAssertEqual(try get("/api/v1/messages/\(pathEncode(mid))")["fault"]?.stringValue, faultID)
        let (again, _) = try hello(uaid: uaid)
        XCTAssertEqual(try again.nextJSON()["version"] as? String, mid)

        let delay = try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"autopush"},"then":{"delay_ms":300},"times":1}"#)
        XCTAssertEqual(delay.status, 201, delay.text)
        let started = Date()
        let late = try push(endpoint)
        XCTAssertEqual(late.status, 201)
        XCTAssertEqual(try again.nextJSON()["version"] as? String, try messageID(late))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3)
        XCTAssertEqual(try get("/api/v1/messages/\(pathEncode(try messageID(late)))")["fault"]?.stringValue, delay.object?["id"]?.stringValue)
    }

    /// An FCM registration over this channel: the entry shows what the mock encrypted (`via`,
    /// `encryption`, `plaintext`) while it is `sent`, before any ack, and after.
    func testAnFCMRegistrationsEntryShowsWhatWasEncryptedWhileSent() throws {
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let channelToken = try XCTUnwrap(try device(channelEndpoint: endpoint)["token"]?.stringValue)
        let api = [("x-goog-api-key", "any")]
        let inst = try server.client().postJSON("/v1/projects/demo-project/installations",
                                                #"{"fid":"dAbCdEfGhIjKlMnOpQrStU","appId":"1:123456789012:web:abc","authVersion":"FIS_v2"}"#,
                                                headers: api)
        let fis = try XCTUnwrap(inst.object?["authToken"]?.objectValue?["token"]?.stringValue, inst.text)
        let web = #"{"web":{"applicationPubKey":null,"auth":"Lw6xhutboQsc_bM3TxwZUA","endpoint":"\#(endpoint)","p256dh":"\#(vapidKey.publicKey.base64URL)"}}"#
        let reg = try server.client().postJSON("/v1/projects/demo-project/registrations", web,
                                               headers: api + [("x-goog-firebase-installations-auth", fis)])
        let token = try XCTUnwrap(reg.object?["token"]?.stringValue, reg.text)
        let send = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"k":"v"}}"#,
                                                headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
        let mid = try XCTUnwrap(send.object?["results"]?.arrayValue?.first?.objectValue?["message_id"]?.stringValue, send.text)
        let note = try XCTUnwrap(try ws.nextJSON() as [String: Any])
        XCTAssertEqual(note["version"] as? String, mid)
        XCTAssertEqual((note["headers"] as? [String: String])?["encoding"], "aesgcm")
        var cd: JSONObject?
        try waitFor("the entry shows the encryption while sent") {
            cd = try entry(token, mid)["client_delivery"]?.objectValue
            return cd?["encryption"]?.stringValue == "aesgcm"
        }
        XCTAssertEqual(try entry(token, mid)["status"]?.stringValue, "sent")
        XCTAssertEqual(cd?["via"]?.stringValue, channelToken)
        XCTAssertTrue(cd?["plaintext"]?.objectValue?["fcmMessageId"]?.stringValue == mid, "\(String(describing: cd))")
        XCTAssertEqual(cd?["ack"], .null)
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        try waitFor("delivered") { try entry(token, mid)["status"]?.stringValue == "delivered" }
        XCTAssertEqual(try entry(token, mid)["client_delivery"]?.objectValue?["encryption"]?.stringValue, "aesgcm")
    }

    func testEventsSayConnectedSentDeliveredAndClosed() throws {
        let events = try SSEClient(port: server.port)
        XCTAssertEqual(try events.status(), 200)
        let (ws, _) = try hello()
        let endpoint = try register(ws)
        let mid = try messageID(try push(endpoint))
        _ = try ws.nextText()
        ws.send(text: #"{"messageType":"ack","updates":[{"channelID":"\#(channel)","version":"\#(mid)","code":100}]}"#)
        var seen: [String] = []
        var deliveredData = ""
        while let e = try events.next(timeout: 5) {
            seen.append(e.event)
            if e.event == "message.delivered" {
                deliveredData = e.data
                break
            }
        }
        XCTAssertTrue(seen.contains("client.connected"), "\(seen)")
        XCTAssertTrue(seen.contains("message.sent"), "\(seen)")
        XCTAssertTrue(deliveredData.contains(#""client_delivery":{"kind":"autopush""#), deliveredData)
        ws.sendRaw(WebSocketTestClient.frame(opcode: 8, [0x03, 0xE8]))
        var closed = false
        while !closed, let e = try events.next(timeout: 5) { closed = e.event == "client.closed" }
        XCTAssertTrue(closed, "client.closed was published")
    }
}

/// A restart on a file store keeps the uaid, its channels and what they hold.
final class AutopushRestartTests: XCTestCase {
    func testAUAIDAndItsHeldPushesSurviveARestart() throws {
        let dir = NSTemporaryDirectory() + "autopush-restart-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/store.sqlite"
        let channel = "5f3c1a9e-2b4d-4c6e-8f0a-1b2c3d4e5f60"
        var server = try TestServer(db: db)
        var ws = try WebSocketTestClient(port: server.port)
        ws.send(text: #"{"messageType":"hello","use_webpush":true}"#)
        let uaid = try XCTUnwrap(try ws.nextJSON()["uaid"] as? String)
        ws.send(text: #"{"channelID":"\#(channel)","messageType":"register"}"#)
        let endpoint = try XCTUnwrap(try ws.nextJSON()["pushEndpoint"] as? String)
        let path = "/wp/" + String(endpoint.split(separator: "/").last ?? "")
        // Written and not acknowledged when the server stops.
        let r = try server.client().request("POST", path, headers: [("TTL", "600"), ("Content-Encoding", "aes128gcm")], body: [7, 7, 7])
        XCTAssertEqual(r.status, 201, r.text)
        let version = try XCTUnwrap(try ws.nextJSON()["version"] as? String)
        server.stop()
        // A stop closes its connections and holds the push again; a process that ends without
        // closing them (killed) leaves it `sent`, as here.
        let row = try XCTUnwrap(MessageID(version)?.micros)
        do {
            let c = try SQLiteConnection(path: db)
            XCTAssertEqual(try c.scalarText("SELECT status FROM deliveries WHERE id = ?", [.int(row)]), "pending")
            try c.run("UPDATE deliveries SET status = 'sent' WHERE id = ?", [.int(row)])
        }

        server = try TestServer(db: db)
        defer { server.stop() }
        // Its connection is gone: the push is held again, `pending` until the next hello.
        let id = String(endpoint.split(separator: "/").last ?? "")
        let token = try XCTUnwrap(try server.client().request("GET", "/api/v1/devices?web_push_id=\(id)").object?["items"]?
            .arrayValue?.first?.objectValue?["token"]?.stringValue)
        let held = try XCTUnwrap(try server.client().request("GET", "/api/v1/devices/\(token)/messages/\(pathEncode(version))").object)
        XCTAssertEqual(held["status"]?.stringValue, "pending")
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(token)/messages?status=sent").object?["items"]?.arrayValue?.count, 0)
        XCTAssertEqual(try SQLiteConnection(path: db).scalarText("SELECT status FROM deliveries WHERE id = ?", [.int(row)]), "pending")
        ws = try WebSocketTestClient(port: server.port)
        ws.send(text: #"{"messageType":"hello","use_webpush":true,"uaid":"\#(uaid)"}"#)
        XCTAssertEqual(try ws.nextJSON()["uaid"] as? String, uaid)
        let again = try ws.nextJSON()
        XCTAssertEqual(again["version"] as? String, version)
        XCTAssertEqual(again["data"] as? String, base64URLEncode([7, 7, 7]))
        XCTAssertEqual((again["headers"] as? [String: String])?["encoding"], "aes128gcm")
    }
}
