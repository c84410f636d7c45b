import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import Platform
@testable import TLS
@testable import WebPush
import XCTest

/// The Web Push endpoint through the real server (docs/spec/webpush.md sections 2 to 4): bodies
/// encrypted here for the subscription's keys with `WebPushCrypto`, VAPID JWTs signed here,
/// answers checked byte for byte over HTTP/1.1 and, through curl, h2c.
final class WebPushTests: XCTestCase {
    var server: TestServer!
    let vapidKey = try! P256PrivateKey()

    override func setUpWithError() throws {
        server = try TestServer()
    }

    override func tearDown() {
        server?.stop()
    }

    /// A web device and what a sender reads of its subscription.
    struct Subscription {
        let token: String
        let endpoint: String
        let path: String
        let p256dh: P256PublicKey
        let auth: [UInt8]
    }

    func subscribe(online: Bool = true, boundTo key: P256PrivateKey? = nil) throws -> Subscription {
        try Self.subscribe(on: server, online: online, boundTo: key)
    }

    /// Makes a web device on `server` (bound to `key` when given) and reads its subscription.
    static func subscribe(on server: TestServer, online: Bool = true, boundTo key: P256PrivateKey? = nil) throws -> Subscription {
        let extra = key.map { #", "application_server_key":"\#($0.publicKey.base64URL)""# } ?? ""
        let d = try WebPushSubscriptionTests.createWebDevice(server.client(), extra, online: online)
        let sub = try XCTUnwrap(d["web_push"]?.objectValue)
        let endpoint = try XCTUnwrap(sub["endpoint"]?.stringValue)
        let keys = try XCTUnwrap(sub["keys"]?.objectValue)
        return Subscription(token: try XCTUnwrap(d["token"]?.stringValue), endpoint: endpoint,
                            path: String(endpoint.dropFirst("http://127.0.0.1:\(server.port)".count)),
                            p256dh: try P256PublicKey(base64URL: try XCTUnwrap(keys["p256dh"]?.stringValue)),
                            auth: try XCTUnwrap(base64URLDecode(Array(try XCTUnwrap(keys["auth"]?.stringValue).utf8))))
    }

    var origin: String { "http://127.0.0.1:\(server.port)" }

    /// A `Location`'s message id as the control API names it (`%25` back to `%`).
    func unescaped(_ s: String) -> String { s.replacingOccurrences(of: "%25", with: "%") }

    /// A VAPID JWT: ES256 over the claims given (those left out take good values).
    func jwt(aud: String? = nil, exp: Int64? = nil, sub: String? = "mailto:ops@example.com", alg: String = "ES256",
             signer: P256PrivateKey? = nil, now: Int64 = Int64(Date().timeIntervalSince1970)) throws -> String {
        var claims = [#""aud":"\#(aud ?? origin)""#, #""exp":\#(exp ?? now + 12 * 3600)"#]
        if let sub { claims.append(#""sub":"\#(sub)""#) }
        let header = #"{"typ":"JWT","alg":"\#(alg)"}"#
        let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(("{" + claims.joined(separator: ",") + "}").utf8))
        return input + "." + base64URLEncode(try (signer ?? vapidKey).signES256(Array(input.utf8)))
    }

    func vapid(_ token: String? = nil, key: P256PrivateKey? = nil) throws -> (String, String) {
        ("Authorization", "vapid t=\(try token ?? jwt()), k=\((key ?? vapidKey).publicKey.base64URL)")
    }

    func encrypt(_ text: String, for s: Subscription) throws -> [UInt8] {
        try WebPushCrypto.encrypt(aes128gcm: Array(text.utf8), to: s.p256dh, authSecret: s.auth)
    }

    /// Pushes go over h2c with prior knowledge (curl) instead of HTTP/1.1.
    var overH2C = false

    func post(_ path: String, _ headers: [(String, String)], _ body: [UInt8] = []) throws -> WireResponse {
        try request("POST", path, headers, body)
    }

    /// A request to the push service, over HTTP/1.1 or (`overH2C`) h2c.
    func request(_ method: String, _ path: String, _ headers: [(String, String)] = [], _ body: [UInt8] = []) throws -> WireResponse {
        guard overH2C else { return try server.client().request(method, path, headers: headers, body: body) }
        var args = ["-sS", "-i", "--max-time", "20", "--http2-prior-knowledge", "-X", method]
        // `Name;` sends a header with an empty value (`Name:` would remove it).
        for (n, v) in headers { args += ["-H", v.isEmpty ? "\(n);" : "\(n): \(v)"] }
        let file = NSTemporaryDirectory() + "wp-body-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        if !body.isEmpty {
            try Data(body).write(to: URL(fileURLWithPath: file))
            args += ["--data-binary", "@\(file)"]
        }
        args.append("http://127.0.0.1:\(server.port)\(path)")
        let r = try runProcess(try HTTP2Tests.tool("curl"), args)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("HTTP/2 "), r.stdout)
        return curlAnswer(r.stdout)
    }

    func get(_ path: String) throws -> JSONObject {
        try XCTUnwrap(try server.client().request("GET", path).object, path)
    }

    /// `{"code","errno","error","message"}` with that status and errno.
    func assertRefused(_ r: WireResponse, _ status: Int, _ errno: Int, _ reason: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, status, r.text, file: file, line: line)
        XCTAssertEqual(r.headers["content-type"], "application/json", file: file, line: line)
        let o = r.object
        XCTAssertEqual(o?.members.map(\.key), ["code", "errno", "error", "message"], r.text, file: file, line: line)
        XCTAssertEqual(o?["code"], .number(JSONNumber(Int64(status))), file: file, line: line)
        XCTAssertEqual(o?["errno"], .number(JSONNumber(Int64(errno))), r.text, file: file, line: line)
        XCTAssertEqual(o?["error"]?.stringValue, reason, file: file, line: line)
        XCTAssertFalse(o?["message"]?.stringValue?.isEmpty ?? true, file: file, line: line)
    }

    /// The newest inbox entry of a device.
    func newestEntry(_ token: String) throws -> JSONObject {
        let items = try XCTUnwrap(try get("/api/v1/devices/\(token)/messages?order=newest")["items"]?.arrayValue)
        return try XCTUnwrap(items.first?.objectValue)
    }

    // MARK: Delivery

    func testAnEncryptedSignedPushIsDecryptedAndDelivered() throws {
        let s = try subscribe(boundTo: vapidKey)
        let note = #"{"title":"Hello","body":"from the site","icon":"/i.png"}"#
        let r = try post(s.path, [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Urgency", "high"), ("Topic", "news"), try vapid()],
                         try encrypt(note, for: s))
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(r.body, [])
        XCTAssertEqual(r.headers["ttl"], "60")
        let location = try XCTUnwrap(r.headers["location"])
        XCTAssertTrue(location.hasPrefix(origin + "/m/0:"), location)
        XCTAssertTrue(location.contains("%25"), "the id's % is escaped: \(location)")
        let messageID = unescaped(String(location.dropFirst((origin + "/m/").count)))

        let entry = try newestEntry(s.token)
        XCTAssertEqual(entry["message_id"]?.stringValue, messageID)
        XCTAssertEqual(entry["status"]?.stringValue, "delivered")
        XCTAssertEqual(entry["transport"]?.stringValue, "webpush")
        XCTAssertEqual(entry["via"]?.objectValue?["transport"]?.stringValue, "webpush")
        let block = try XCTUnwrap(entry["webpush"]?.objectValue)
        XCTAssertEqual(block["headers"], .object(JSONObject([("TTL", .string("60")), ("Urgency", .string("high")), ("Topic", .string("news"))])))
        XCTAssertEqual(block["vapid"]?.objectValue?["subject"]?.stringValue, "mailto:ops@example.com")
        XCTAssertEqual(block["vapid"]?.objectValue?["key"]?.stringValue, vapidKey.publicKey.base64URL)
        XCTAssertEqual(block["content_encoding"]?.stringValue, "aes128gcm")
        XCTAssertEqual(block["ciphertext_bytes"], .number(JSONNumber(Int64(try encrypt(note, for: s).count))))
        XCTAssertEqual(block["plaintext"]?.stringValue, note)
        XCTAssertEqual(block["decrypt_error"], .null)
        // The browser-notification preview: the web effective payload's notification.
        let effective = try XCTUnwrap(entry["effective"]?.objectValue?["webpush"]?.objectValue)
        XCTAssertEqual(effective["notification"]?.objectValue?["title"]?.stringValue, "Hello")
        XCTAssertEqual(effective["headers"]?.objectValue?["TTL"]?.stringValue, "60")

        let record = try get("/api/v1/messages/\(messageID.replacingOccurrences(of: "%", with: "%25"))")
        XCTAssertEqual(record["transport"]?.stringValue, "webpush")
        XCTAssertEqual(record["status"]?.stringValue, "accepted")
        XCTAssertEqual(record["webpush"]?.objectValue?["plaintext"]?.stringValue, note)
        XCTAssertEqual(record["answer"]?.objectValue?["status"], .number(JSONNumber(Int64(201))))

        // The older alias reaches the same subscription.
        let alias = try post("/fcm/send/" + s.path.dropFirst(4), [("TTL", "0"), try vapid()])
        XCTAssertEqual(alias.status, 201, alias.text)
        XCTAssertEqual(alias.headers["ttl"], "0")
        // ... while /fcm/send itself stays the legacy send.
        XCTAssertEqual(try post("/fcm/send", [("TTL", "0")]).status, 401)

        let health = try XCTUnwrap(get("/api/v1/health")["webpush"]?.objectValue)
        XCTAssertEqual(health["pushes"], .number(JSONNumber(2)))
        XCTAssertEqual(health["endpoint_base"]?.stringValue, origin)
    }

    func testAESGCMBinaryPlaintextAndTheOlderVAPIDScheme() throws {
        let s = try subscribe()
        let plain: [UInt8] = [0xff, 0x00, 0xfe, 0x01]
        let m = try WebPushCrypto.encrypt(aesgcm: plain, to: s.p256dh, authSecret: s.auth)
        let r = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aesgcm"), ("Encryption", m.encryption),
                                  ("Crypto-Key", m.cryptoKey + ";p256ecdsa=" + vapidKey.publicKey.base64URL),
                                  ("Authorization", "WebPush " + (try jwt()))], m.body)
        XCTAssertEqual(r.status, 201, r.text)
        let block = try XCTUnwrap(try newestEntry(s.token)["webpush"]?.objectValue)
        XCTAssertEqual(block["plaintext"], .null)
        XCTAssertEqual(block["plaintext_base64"]?.stringValue, base64URLEncode(plain))
        XCTAssertEqual(block["content_encoding"]?.stringValue, "aesgcm")
        XCTAssertEqual(block["vapid"]?.objectValue?["scheme"]?.stringValue, "WebPush")
        XCTAssertEqual(block["headers"]?.objectValue?["Urgency"]?.stringValue, "normal", "absent = normal, recorded as such")
    }

    /// TTL on the mock's clock for an offline device, Topic replacement, TTL 0 dropped at once,
    /// DELETE of a held message, delivery when the device comes back.
    func testOfflineTTLTopicDeleteAndExpiry() throws {
        let s = try subscribe(online: false)
        func push(_ text: String, ttl: String, topic: String? = nil) throws -> String {
            var h = [("TTL", ttl), ("Content-Encoding", "aes128gcm")]
            if let topic { h.append(("Topic", topic)) }
            let r = try post(s.path, h, try encrypt(text, for: s))
            XCTAssertEqual(r.status, 201, r.text)
            return unescaped(String(try XCTUnwrap(r.headers["location"]).dropFirst((origin + "/m/").count)))
        }
        func status(_ id: String) throws -> String? {
            let items = try XCTUnwrap(try get("/api/v1/devices/\(s.token)/messages")["items"]?.arrayValue)
            return items.compactMap(\.objectValue).first { $0["message_id"]?.stringValue == id }?["status"]?.stringValue
        }
        let first = try push("one", ttl: "3600", topic: "score")
        let second = try push("two", ttl: "3600", topic: "score")
        XCTAssertEqual(try status(first), "collapsed", "a pending message with the same topic is replaced")
        XCTAssertEqual(try status(second), "pending")
        let now = try push("now or never", ttl: "0")
        XCTAssertEqual(try status(now), "expired")
        let short = try push("short", ttl: "60")
        let deleted = try push("deleted", ttl: "600")
        // DELETE of the Location: 204, then 404 (nothing held under it any more).
        let del = try server.client().request("DELETE", "/m/" + deleted.replacingOccurrences(of: "%", with: "%25"))
        XCTAssertEqual(del.status, 204, del.text)
        XCTAssertEqual(try status(deleted), "deleted")
        assertRefused(try server.client().request("DELETE", "/m/" + deleted.replacingOccurrences(of: "%", with: "%25")), 404, 102, "Not Found")
        assertRefused(try server.client().request("DELETE", "/m/nonsense"), 404, 102, "Not Found")
        assertRefused(try server.client().request("GET", "/m/nonsense"), 405, 999, "Method Not Allowed")
        // The mock's clock past the short TTL: expired; the hour-long one is still held.
        XCTAssertEqual(try server.client().postJSON("/api/v1/clock", #"{"advance_s":61}"#).status, 200)
        XCTAssertEqual(try status(short), "expired")
        XCTAssertEqual(try status(second), "pending")
        XCTAssertEqual(try server.client().request("PATCH", "/api/v1/devices/\(s.token)", headers: [("Content-Type", "application/json")],
                                                  body: Array(#"{"online":true}"#.utf8)).status, 200)
        XCTAssertEqual(try status(second), "delivered")
        // A DELETE after delivery: 404.
        assertRefused(try server.client().request("DELETE", "/m/" + second.replacingOccurrences(of: "%", with: "%25")), 404, 102, "Not Found")
    }

    /// A hundred and one pushes held for an offline device: FCM's rules purge them for a
    /// `deleted_messages` notice, which is the service's: a DELETE of its id takes nothing back,
    /// before a restart and after one (the notice read back from the store).
    func testADeletedMessagesNoticeIsNotTheSendersToDelete() throws {
        let dir = try temporaryFolder()
        try restart(dir)
        let s = try subscribe(online: false)
        let body = try encrypt("held", for: s)
        for _ in 0...100 {
            XCTAssertEqual(try post(s.path, [("TTL", "3600"), ("Content-Encoding", "aes128gcm")], body).status, 201)
        }
        let items = try XCTUnwrap(try get("/api/v1/devices/\(s.token)/messages?limit=500")["items"]?.arrayValue).compactMap(\.objectValue)
        let notice = try XCTUnwrap(items.first { $0["message_type"]?.stringValue == "deleted_messages" }, "\(items.count) entries")
        let id = try XCTUnwrap(notice["message_id"]?.stringValue)
        XCTAssertEqual(notice["status"]?.stringValue, "pending")
        assertRefused(try server.client().request("DELETE", "/m/" + id.replacingOccurrences(of: "%", with: "%25")), 404, 102, "Not Found")
        try restart(dir)
        assertRefused(try server.client().request("DELETE", "/m/" + id.replacingOccurrences(of: "%", with: "%25")), 404, 102, "Not Found")
        let after = try XCTUnwrap(try get("/api/v1/devices/\(s.token)/messages?limit=500")["items"]?.arrayValue).compactMap(\.objectValue)
        XCTAssertEqual(after.first { $0["message_id"]?.stringValue == id }?["status"]?.stringValue, "pending")
    }

    // MARK: Errors

    func testEveryErrorRowAnswersAutopushsShapeOverH2C() throws {
        overH2C = true
        try testEveryErrorRowAnswersAutopushsShape()
    }

    func testVAPIDRulesOverH2C() throws {
        overH2C = true
        try testVAPIDRulesOnTheMovedClock()
    }

    func testEveryErrorRowAnswersAutopushsShape() throws {
        let s = try subscribe()
        let body = try encrypt("hi", for: s)
        let enc = ("Content-Encoding", "aes128gcm")
        assertRefused(try post("/wp/" + String(repeating: "A", count: 86), [("TTL", "5"), enc], body), 404, 102, "Not Found")
        assertRefused(try post("/wp/short", [("TTL", "5"), enc], body), 404, 102, "Not Found")
        assertRefused(try post(s.path, [enc], body), 400, 111, "Bad Request")
        for ttl in ["-1", "ten", "1.5", ""] { assertRefused(try post(s.path, [("TTL", ttl), enc], body), 400, 112, "Bad Request") }
        assertRefused(try post(s.path, [("TTL", "5")], body), 400, 110, "Bad Request")
        assertRefused(try post(s.path, [("TTL", "5"), ("Content-Encoding", "gzip")], body), 400, 110, "Bad Request")
        assertRefused(try post(s.path, [("TTL", "5"), enc, ("Urgency", "urgent")], body), 400, 114, "Bad Request")
        assertRefused(try post(s.path, [("TTL", "5"), enc, ("Topic", "has space")], body), 400, 113, "Bad Request")
        assertRefused(try post(s.path, [("TTL", "5"), enc, ("Topic", String(repeating: "t", count: 33))], body), 400, 113, "Bad Request")
        assertRefused(try post(s.path, [("TTL", "5"), enc], [UInt8](repeating: 1, count: 4097)), 413, 104, "Payload Too Large")
        let exact = try post(s.path, [("TTL", "5"), enc], [UInt8](repeating: 1, count: 4096))
        XCTAssertEqual(exact.status, 201, "4,096 bytes are taken (and do not decrypt)")
        let wrong = try request("GET", s.path)
        assertRefused(wrong, 405, 999, "Method Not Allowed")
        XCTAssertEqual(wrong.headers["allow"], "POST")
        // A TTL over four weeks is lowered, and the answer says so.
        XCTAssertEqual(try post(s.path, [("TTL", "99999999"), enc], body).headers["ttl"], "2419200")
        // Exactly the body, once.
        XCTAssertEqual(try post(s.path, [enc], body).text,
                       #"{"code":400,"errno":111,"error":"Bad Request","message":"the TTL header is required: the seconds the push service may keep the message"}"#)

        // 410: ended, uninstalled, deleted.
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(s.token)/web-push/expire").status, 200)
        assertRefused(try post(s.path, [("TTL", "5"), enc], body), 410, 103, "Gone")
        let u = try subscribe()
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(u.token):unregister").status, 200)
        assertRefused(try post(u.path, [("TTL", "5"), enc], body), 410, 106, "Gone")
        let d = try subscribe()
        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/devices/\(d.token)").status, 204)
        assertRefused(try post(d.path, [("TTL", "5"), enc], body), 410, 106, "Gone")

        // Refusals are recorded under the subscription's project.
        let rejected = try XCTUnwrap(try get("/api/v1/messages?transport=webpush&status=rejected")["items"]?.arrayValue)
        XCTAssertTrue(rejected.contains { $0.objectValue?["error"]?.stringValue == "invalidTopic" })
    }

    // MARK: VAPID

    func testVAPIDRulesOnTheMovedClock() throws {
        let bound = try subscribe(boundTo: vapidKey)
        let body = try encrypt("hi", for: bound)
        func send(_ auth: (String, String)?, to s: Subscription? = nil, extra: [(String, String)] = []) throws -> WireResponse {
            try post((s ?? bound).path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")] + (auth.map { [$0] } ?? []) + extra, body)
        }
        XCTAssertEqual(try send(try vapid()).status, 201)
        XCTAssertEqual(try send(("Authorization", "vapid t=\(try jwt()),k=\(vapidKey.publicKey.base64URL)")).status, 201, "py-vapid's spelling")
        assertRefused(try send(nil), 401, 109, "Unauthorized")
        let other = try P256PrivateKey()
        assertRefused(try send(try vapid(try jwt(signer: other), key: other)), 403, 109, "Forbidden")
        assertRefused(try send(try vapid(try jwt(signer: other))), 401, 109, "Unauthorized")  // signed by another key than k
        assertRefused(try send(try vapid(try jwt(aud: "https://fcm.googleapis.com"))), 401, 109, "Unauthorized")
        let now = Int64(Date().timeIntervalSince1970)
        assertRefused(try send(try vapid(try jwt(exp: now + 86_400 + 120))), 401, 109, "Unauthorized")
        assertRefused(try send(try vapid(try jwt(exp: now - 1))), 401, 109, "Unauthorized")
        assertRefused(try send(try vapid(try jwt(sub: nil))), 401, 109, "Unauthorized")
        assertRefused(try send(try vapid(try jwt(sub: "ops@example.com"))), 401, 109, "Unauthorized")
        // Hostile: not JWTs, alg none or HS256, a huge token, a key that is no point.
        for token in ["garbage", "a.b.c", "...", try jwt(alg: "none"), try jwt(alg: "HS256"), String(repeating: "x", count: 20_000)] {
            assertRefused(try send(try vapid(token)), 401, 109, "Unauthorized")
        }
        assertRefused(try send(("Authorization", "vapid t=\(try jwt()), k=AAAA")), 401, 109, "Unauthorized")
        assertRefused(try send(("Authorization", "Bearer abc")), 401, 109, "Unauthorized")
        // A subscription without a key takes unsigned pushes, but checks a signature that is sent.
        let open = try subscribe()
        let openBody = try encrypt("hi", for: open)
        XCTAssertEqual(try post(open.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], openBody).status, 201)
        assertRefused(try post(open.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm"), ("Authorization", "vapid t=x, k=y")], openBody),
                      401, 109, "Unauthorized")
        XCTAssertEqual(try post(open.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm"), try vapid(try jwt(signer: other), key: other)],
                                openBody).status, 201)
        // A token verified once is judged again on the moved clock: 13 h later it has expired.
        let token = try jwt(exp: now + 3600)
        XCTAssertEqual(try send(try vapid(token)).status, 201)
        XCTAssertEqual(try server.client().postJSON("/api/v1/clock", #"{"advance_s":3601}"#).status, 200)
        assertRefused(try send(try vapid(token)), 401, 109, "Unauthorized")
        // A fresh one on the moved clock is good; one of real time is now too old.
        XCTAssertEqual(try send(try vapid(try jwt(now: now + 3601))).status, 201)
    }

    // MARK: Decryption

    /// Records sealed by hand with the subscription's keys (the right keys, wrong contents).
    func sealed(_ records: [[UInt8]], rs: Int, for s: Subscription) throws -> [UInt8] {
        WebPushCrypto.sealRecords(records, sender: try P256PrivateKey(), receiver: s.p256dh, authSecret: s.auth,
                                  salt: [UInt8](repeating: 9, count: 16), recordSize: rs)
    }

    func testUndecryptableBodiesAreTakenAndMarked() throws {
        let s = try subscribe()
        let stranger = try P256PrivateKey()
        func withRecordSize(_ rs: UInt32, _ body: [UInt8]) -> [UInt8] {
            var b = body
            b[16..<20] = [UInt8(rs >> 24), UInt8(rs >> 16 & 0xff), UInt8(rs >> 8 & 0xff), UInt8(rs & 0xff)]
            return b
        }
        let good = try encrypt("hello", for: s)
        // Three records of 30 bytes: a record size that moves their bounds breaks the first tag.
        let records = try WebPushCrypto.encrypt(aes128gcm: [UInt8](repeating: 5, count: 30), to: s.p256dh, authSecret: s.auth, recordSize: 30)
        let aesgcm = try WebPushCrypto.encrypt(aesgcm: Array("hi".utf8), to: s.p256dh, authSecret: s.auth)
        let cases: [(String, [UInt8], [(String, String)], String)] = [
            ("wrong key", try WebPushCrypto.encrypt(aes128gcm: Array("x".utf8), to: stranger.publicKey, authSecret: s.auth), [],
             "does not authenticate"),
            ("wrong auth", try WebPushCrypto.encrypt(aes128gcm: Array("x".utf8), to: s.p256dh, authSecret: [UInt8](repeating: 0, count: 16)), [],
             "does not authenticate"),
            ("bad padding", try sealed([[0, 0, 0]], rs: 4096, for: s), [], "bad padding"),
            ("unknown delimiter", try sealed([Array("ok".utf8) + [3]], rs: 4096, for: s), [], "bad padding"),
            ("truncated record", Array(good.dropLast(good.count - 86 - 10)), [], "truncated"),
            ("header only", Array(good.prefix(86)), [], "truncated"),
            ("short header", Array(good.prefix(20)), [], "shorter than its aes128gcm header"),
            ("rs too small", withRecordSize(17, good), [], "record size 17 is too small"),
            ("rs 0", withRecordSize(0, good), [], "record size 0 is too small"),
            ("rs 2^32-1", withRecordSize(UInt32.max, records), [], "does not authenticate"),
            ("rs 19", withRecordSize(19, records), [], "does not authenticate"),
            ("aesgcm without Encryption", aesgcm.body, [("Crypto-Key", aesgcm.cryptoKey)], "missing the Encryption header"),
            ("aesgcm without Crypto-Key", aesgcm.body, [("Encryption", aesgcm.encryption)], "missing the Crypto-Key header"),
            ("aesgcm rs 0", aesgcm.body, [("Encryption", aesgcm.encryption + ";rs=0"), ("Crypto-Key", aesgcm.cryptoKey)], "too small"),
            ("aesgcm rs 2^32", aesgcm.body, [("Encryption", aesgcm.encryption + ";rs=4294967296"), ("Crypto-Key", aesgcm.cryptoKey)],
             "not a number below 2^32"),
        ]
        for (name, body, extra, reason) in cases {
            let encoding = extra.isEmpty ? "aes128gcm" : "aesgcm"
            let r = try post(s.path, [("TTL", "60"), ("Content-Encoding", encoding)] + extra, body)
            XCTAssertEqual(r.status, 201, "\(name): \(r.text)")
            let entry = try newestEntry(s.token)
            XCTAssertEqual(entry["status"]?.stringValue, "undecryptable", name)
            let block = try XCTUnwrap(entry["webpush"]?.objectValue, name)
            XCTAssertEqual(block["plaintext"], .null, name)
            XCTAssertEqual(block["ciphertext_base64"]?.stringValue, base64URLEncode(body), name)
            let error = try XCTUnwrap(block["decrypt_error"]?.stringValue, name)
            XCTAssertTrue(error.contains(reason), "\(name): \(error)")
        }
        let health = try XCTUnwrap(get("/api/v1/health")["webpush"]?.objectValue)
        XCTAssertEqual(health["undecryptable"], .number(JSONNumber(Int64(cases.count))))
        XCTAssertEqual(try get("/api/v1/messages?status=undecryptable")["items"]?.arrayValue?.count, cases.count)
    }

    // MARK: Faults

    func testFaultsAnswerInThePushServicesShape() throws {
        let s = try subscribe()
        let body = try encrypt("hi", for: s)
        let add = try server.client().postJSON("/api/v1/faults",
                                               #"{"when":{"transport":"webpush"},"then":{"status":503,"retry_after_s":7},"times":1}"#)
        XCTAssertEqual(add.status, 201, add.text)
        let r = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], body)
        assertRefused(r, 503, 201, "Service Unavailable")
        XCTAssertEqual(r.headers["retry-after"], "7")
        XCTAssertEqual(try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], body).status, 201, "the fault fired once")
    }

    func testDelayAndDroppedConnectionFaults() throws {
        let s = try subscribe()
        let body = try encrypt("hi", for: s)
        XCTAssertEqual(try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"webpush"},"then":{"delay_ms":400},"times":1}"#).status, 201)
        let start = Date()
        XCTAssertEqual(try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], body).status, 201)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.35, "answered late")
        XCTAssertEqual(try server.client().postJSON("/api/v1/faults",
                                                    #"{"when":{"transport":"webpush"},"then":{"close_connection":true},"times":1}"#).status, 201)
        XCTAssertThrowsError(try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], body), "no answer")
        let rejected = try XCTUnwrap(try get("/api/v1/messages?transport=webpush&status=rejected")["items"]?.arrayValue)
        XCTAssertEqual(rejected.first?.objectValue?["error"]?.stringValue, "ConnectionClosed")
        // Other transports' faults leave pushes alone.
        XCTAssertEqual(try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"status":500}}"#).status, 201)
        XCTAssertEqual(try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], body).status, 201)
    }

    /// The event stream hears of a push and its delivery; a long poll on the inbox returns with it.
    func testEventsAndLongPolls() throws {
        let s = try subscribe(online: false)
        let sse = try SSEClient(port: server.port)
        XCTAssertEqual(try sse.status(), 200)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? get("/api/v1/health")["event_readers"]?.numberValue?.int64) != 1 {}
        let poll = DispatchQueue(label: "poll")
        let polled = Locked<WireResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let port = server.port
        let token = s.token
        poll.async {
            polled.withLock { $0 = try? HTTPTestClient(port: port).request("GET", "/api/v1/devices/\(token)/messages?wait=10") }
            done.signal()
        }
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(try post(s.path, [("TTL", "60"), ("Content-Encoding", "aes128gcm")], try encrypt("evented", for: s)).status, 201)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        let items = try XCTUnwrap(polled.withLock { $0 }?.object?["items"]?.arrayValue)
        XCTAssertEqual(items.first?.objectValue?["webpush"]?.objectValue?["plaintext"]?.stringValue, "evented")
        let accepted = try XCTUnwrap(try sse.next())
        XCTAssertEqual(accepted.event, "message.accepted")
        XCTAssertTrue(accepted.data.contains(#""transport":"webpush""#), accepted.data)
        XCTAssertEqual(try server.client().request("PATCH", "/api/v1/devices/\(s.token)", headers: [("Content-Type", "application/json")],
                                                  body: Array(#"{"online":true}"#.utf8)).status, 200)
        var names: [String] = []
        while let e = try sse.next(timeout: 2) {
            names.append(e.event)
            if e.event == "message.delivered" { break }
        }
        XCTAssertTrue(names.contains("message.delivered"), "\(names)")
        sse.disconnect()
    }

    /// Hostile input gets a clear answer, never a 5xx: a body over the server's limit, a huge
    /// header, paths that are not subscriptions.
    func testHostileInput() throws {
        let s = try subscribe(boundTo: vapidKey)
        let big = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], [UInt8](repeating: 7, count: 2 << 20))
        assertRefused(big, 413, 104, "Payload Too Large")
        let hugeTopic = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm"), ("Topic", String(repeating: "t", count: 6000))],
                                 try encrypt("x", for: s))
        XCTAssertEqual(hugeTopic.status, 400, hugeTopic.text)
        let hugeAuth = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm"),
                                         ("Authorization", "vapid t=" + String(repeating: "e", count: 7000) + ", k=x")],
                                try encrypt("x", for: s))
        assertRefused(hugeAuth, 401, 109, "Unauthorized")
        for path in ["/wp/" + String(repeating: "%", count: 90), "/wp/" + String(repeating: "A", count: 600), "/fcm/send/x"] {
            assertRefused(try post(path, [("TTL", "5")]), 404, 102, "Not Found")
        }
        // A JWT whose parts are not JSON, or whose claims have the wrong types.
        let odd = [base64URLEncode(Array("[1]".utf8)), base64URLEncode(Array(#"{"aud":5,"exp":"soon","sub":[]}"#.utf8))]
        for claims in odd {
            let header = base64URLEncode(Array(#"{"alg":"ES256"}"#.utf8))
            let input = header + "." + claims
            let token = input + "." + base64URLEncode(try vapidKey.signES256(Array(input.utf8)))
            assertRefused(try post(s.path, [("TTL", "5"), try vapid(token)]), 401, 109, "Unauthorized")
        }
    }

    // MARK: HTTPS

    /// An unmodified client (`--web-push-origin https://fcm.googleapis.com`): the endpoint on
    /// Google's host reached through the
    /// local CA (curl `--connect-to`, the URL, `Host` and SNI Google's), over h2 (ALPN) and
    /// HTTP/1.1; VAPID's `aud` is Google's origin and `Location` points there.
    func testUnmodifiedClientOnGooglesHostThroughTheLocalCA() throws {
        server.stop()
        let dir = NSTemporaryDirectory() + "fcm-mock-wp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        server = try TestServer(db: dir + "/db.sqlite",
                                extraArguments: ["--https-port", "0", "--web-push-origin", "https://fcm.googleapis.com"])
        let httpsPort = try XCTUnwrap(server.app.httpsPort)
        let ca = try XCTUnwrap(get("/api/v1/health")["tls_ca"]?.stringValue)
        let s = try subscribe(boundTo: vapidKey)
        XCTAssertTrue(s.endpoint.hasPrefix("https://fcm.googleapis.com/wp/"), s.endpoint)
        let file = dir + "/body"
        try Data(try encrypt(#"{"title":"through the CA"}"#, for: s)).write(to: URL(fileURLWithPath: file))
        let token = try jwt(aud: "https://fcm.googleapis.com")
        for version in ["--http2", "--http1.1"] {
            let r = try runProcess(try HTTP2Tests.tool("curl"), [
                "-sS", "-i", "--max-time", "20", version, "--cacert", ca,
                "--connect-to", "fcm.googleapis.com:443:127.0.0.1:\(httpsPort)",
                "-H", "TTL: 30", "-H", "Content-Encoding: aes128gcm",
                "-H", "Authorization: vapid t=\(token), k=\(vapidKey.publicKey.base64URL)",
                "--data-binary", "@\(file)", s.endpoint,
            ])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout.hasPrefix(version == "--http2" ? "HTTP/2 201" : "HTTP/1.1 201"), r.stdout)
            XCTAssertTrue(curlAnswer(r.stdout).headers["location"]?.hasPrefix("https://fcm.googleapis.com/m/0:") == true, r.stdout)
            XCTAssertEqual(try newestEntry(s.token)["webpush"]?.objectValue?["plaintext"]?.stringValue, #"{"title":"through the CA"}"#)
        }
        // A JWT for the plain port's origin is refused on Google's.
        let wrong = try runProcess(try HTTP2Tests.tool("curl"), [
            "-sS", "--max-time", "20", "--cacert", ca, "--connect-to", "fcm.googleapis.com:443:127.0.0.1:\(httpsPort)",
            "-H", "TTL: 30", "-H", "Authorization: vapid t=\(try jwt()), k=\(vapidKey.publicKey.base64URL)", "-X", "POST", s.endpoint,
        ])
        XCTAssertTrue(wrong.stdout.hasPrefix(#"{"code":401,"errno":109,"error":"Unauthorized","#), wrong.stdout)
    }

    // MARK: HTTP/2

    /// The same endpoint over h2c with prior knowledge (curl): 201 with its headers, and a refusal.
    func testPushOverH2C() throws {
        overH2C = true
        let s = try subscribe(boundTo: vapidKey)
        let body = try encrypt(#"{"title":"h2"}"#, for: s)
        let ok = try post(s.path, [("TTL", "30"), ("Content-Encoding", "aes128gcm"), try vapid()], body)
        XCTAssertEqual(ok.status, 201, ok.text)
        XCTAssertTrue(ok.headers["location"]?.hasPrefix("\(origin)/m/0:") == true, "\(ok.headers)")
        XCTAssertEqual(ok.headers["ttl"], "30")
        XCTAssertEqual(ok.body, [])
        XCTAssertEqual(try newestEntry(s.token)["webpush"]?.objectValue?["plaintext"]?.stringValue, #"{"title":"h2"}"#)
        let refused = try post(s.path, [("Content-Encoding", "aes128gcm"), try vapid()], body)
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.text,
                       #"{"code":400,"errno":111,"error":"Bad Request","message":"the TTL header is required: the seconds the push service may keep the message"}"#)
        XCTAssertEqual(try post(s.path, [("TTL", "30"), ("Content-Encoding", "aes128gcm")], body).status, 401)
    }
}
