import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import Protobuf
import XCTest

/// FCM's device side through the real server (docs/real-clients.md): checkin's protobuf and
/// register3's form, answered byte for byte where clients parse them.
final class GCMTests: XCTestCase {
    var server: TestServer!

    override func setUpWithError() throws {
        server = try TestServer()
    }

    override func tearDown() {
        server?.stop()
    }

    /// An `AndroidCheckinRequest`: `id`, `security_token`, `checkin.chrome_build`.
    static func checkinRequest(id: UInt64 = 0, token: UInt64 = 0, channel: UInt64 = 5) -> [UInt8] {
        var build = ProtoWriter()
        build.varint(1, 3)
        build.string(2, "156.0.8078.114")
        build.varint(3, channel)
        var checkin = ProtoWriter()
        checkin.message(13, build.bytes)
        var w = ProtoWriter()
        if id != 0 { w.int64(2, Int64(id)) }
        w.message(4, checkin.bytes)
        if token != 0 { w.fixed64(13, token) }
        return w.bytes
    }

    /// Checks in: the android id and security token answered.
    func checkin(id: UInt64 = 0, token: UInt64 = 0, channel: UInt64 = 5) throws -> (UInt64, UInt64) {
        let r = try server.client().request("POST", "/checkin", headers: [("Content-Type", "application/x-protobuf"), ("User-Agent", "test-client")],
                                            body: Self.checkinRequest(id: id, token: token, channel: channel))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.headers["content-type"], "application/x-protobuf")
        var reader = ProtoReader(r.body)
        var fields: [Int: ProtoField] = [:]
        var order: [Int] = []
        while let f = try reader.next() {
            fields[f.number] = f
            order.append(f.number)
        }
        XCTAssertEqual(order, [1, 3, 7, 8, 9])
        XCTAssertEqual(fields[1]?.bool, true)
        XCTAssertEqual(fields[9]?.bool, false)
        let android = try XCTUnwrap(fields[7]?.fixed64)
        let secret = try XCTUnwrap(fields[8]?.fixed64)
        XCTAssertTrue(android > 0 && android < 1 << 63 && secret > 0 && secret < 1 << 63)
        return (android, secret)
    }

    func register(_ form: String, auth: (UInt64, UInt64)?) throws -> (Int, String) {
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let auth { headers.append(("Authorization", "AidLogin \(auth.0):\(auth.1)")) }
        let r = try server.client().request("POST", "/c2dm/register3", headers: headers, body: Array(form.utf8))
        return (r.status, r.text)
    }

    func testCheckinMakesAClientAndAPeriodicCheckinKeepsIt() throws {
        let (id, token) = try checkin()
        XCTAssertEqual(try checkin(id: id, token: token).0, id)
        let wrong = try server.client().request("POST", "/checkin", body: Self.checkinRequest(id: id, token: token &+ 1))
        XCTAssertEqual(wrong.status, 401)
        XCTAssertEqual(wrong.text, "the android id and security token do not match")
        XCTAssertEqual(wrong.headers["content-type"], "text/plain; charset=UTF-8")
        XCTAssertEqual(try server.client().request("POST", "/checkin", body: [0xFF, 0xFF, 0xFF]).status, 400)
        // `checkin` (4) is required: an empty body, or an id alone, is no AndroidCheckinRequest.
        XCTAssertEqual(try server.client().request("POST", "/checkin", body: []).status, 400)
        let idOnly = try server.client().request("POST", "/checkin", body: [0x10, 0x00])
        XCTAssertEqual(idOnly.status, 400)
        XCTAssertEqual(idOnly.text, "the body is no AndroidCheckinRequest (checkin.proto)")
        XCTAssertEqual(try server.client().request("GET", "/checkin").status, 405)
        let client = try XCTUnwrap(server.client().request("GET", "/api/v1/clients/\(id)").object)
        XCTAssertEqual(client["kind"]?.stringValue, "gcm")
        XCTAssertEqual(client["user_agent"]?.stringValue, "test-client")
        XCTAssertEqual(client["checkin"]?.objectValue?["channel"]?.stringValue, "CHANNEL_UNKNOWN")
        XCTAssertEqual(client["checkin"]?.objectValue?["chrome_version"]?.stringValue, "156.0.8078.114")
    }

    func testRegister3AnswersTokensAndMakesDevices() throws {
        XCTAssertEqual(try register("app=org.chromium.linux&sender=745476177629", auth: nil).1, "Error=AUTHENTICATION_FAILED")
        XCTAssertEqual(try register("app=org.chromium.linux&sender=745476177629", auth: nil).0, 401)
        let auth = try checkin()
        XCTAssertEqual(try register("sender=745476177629", auth: auth).1, "Error=INVALID_PARAMETERS")
        XCTAssertEqual(try register("app=org.chromium.linux&sender=abc", auth: auth).1, "Error=INVALID_SENDER")
        XCTAssertEqual(try register("app=org.chromium.linux&sender=745476177629&device=1", auth: auth).1, "Error=INVALID_PARAMETERS")

        // Google's own sender: a token, no device.
        let (status, google) = try register("app=org.chromium.linux&device=\(auth.0)&sender=745476177629", auth: auth)
        XCTAssertEqual(status, 200)
        XCTAssertTrue(google.hasPrefix("token="), google)
        let token = String(google.dropFirst(6))
        XCTAssertEqual(token.count, 153)
        XCTAssertTrue(token.contains(":APA91b"))
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(token)").status, 404)
        XCTAssertEqual(try register("app=org.chromium.linux&device=\(auth.0)&sender=745476177629", auth: auth).1, google, "the same again")

        // A Web Push registration: a web device whose endpoint Chromium builds.
        let key = try P256TestKey.publicBase64URL() + "="
        let wp = try register("app=org.chromium.linux&device=\(auth.0)&sender=\(key)&X-subtype=wp:http://localhost:8300/%2318F2B1F7-5C6B-4E5A-8C9D-0123456789AB-V2", auth: auth).1
        let wpToken = String(wp.dropFirst(6))
        let d = try XCTUnwrap(server.client().request("GET", "/api/v1/devices/\(pathEncode(wpToken))").object)
        XCTAssertEqual(d["platform"]?.stringValue, "web")
        XCTAssertEqual(d["app"]?.stringValue, "http://localhost:8300/")
        XCTAssertEqual(d["application_server_key"]?.stringValue, String(key.dropLast()))
        XCTAssertEqual(d["web_push"]?.objectValue?["endpoint"]?.stringValue, "https://jmt17.google.com/fcm/send/\(wpToken)")
        XCTAssertEqual(d["client"]?.objectValue?["kind"]?.stringValue, "gcm")
        XCTAssertEqual(d["client"]?.objectValue?["id"]?.stringValue, String(auth.0))
        // FCM's sends cannot name a browser's Web Push subscription.
        let legacy = try server.client().postJSON("/fcm/send", #"{"to":"\#(wpToken)","data":{"a":"b"}}"#,
                                                   headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
        XCTAssertEqual(legacy.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue, "InvalidRegistration", legacy.text)
        let record = try XCTUnwrap(server.client().request("GET", "/api/v1/messages?token=\(pathEncode(wpToken))").object)
        let first = try XCTUnwrap(record["items"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(first["error_detail"]?.stringValue, "a Web Push subscription: reach it through its endpoint")

        // A configured project's sender: an android device of it.
        let android = String(try register("app=com.example.demo&device=\(auth.0)&sender=123456789012", auth: auth).1.dropFirst(6))
        let a = try XCTUnwrap(server.client().request("GET", "/api/v1/devices/\(pathEncode(android))").object)
        XCTAssertEqual(a["platform"]?.stringValue, "android")
        XCTAssertEqual(a["sender_id"]?.stringValue, "123456789012")

        // delete=true: deleted=<app>, or token=<first> for Instance ID; the device unregistered.
        XCTAssertEqual(try register("app=com.example.demo&device=\(auth.0)&sender=123456789012&delete=true", auth: auth).1, "deleted=com.example.demo")
        let gone = try XCTUnwrap(server.client().request("GET", "/api/v1/devices/\(pathEncode(android))").object)
        XCTAssertEqual(gone["state"]?.stringValue, "unregistered")
        XCTAssertEqual(try register("app=com.example.demo&device=\(auth.0)&sender=*&delete=true&appid=abc&scope=GCM", auth: auth).1, "token=")
    }

    /// What firebase-messaging sets up before an FCM registration: a checkin, a `wp:` registration
    /// (`subscription`, its token), an installation `fid` (its auth and refresh tokens), and the
    /// FCM registration body (`web`) naming the subscription's endpoint.
    struct FirebaseSetup {
        let auth: (UInt64, UInt64)
        let subtype: String
        let subscription: String
        let api: [(String, String)]
        let fis: String
        let refresh: String
        let web: String
        var headers: [(String, String)] { api + [("x-goog-firebase-installations-auth", fis)] }
    }

    func firebaseSetup(fid: String, subtypeID: String) throws -> FirebaseSetup {
        let auth = try checkin()
        let key = try P256TestKey.publicBase64URL()
        let subtype = "wp:receiver.push.com%23" + subtypeID
        let wp = String(try register("app=org.chromium.linux&device=\(auth.0)&sender=\(key)&X-subtype=\(subtype)", auth: auth).1.dropFirst(6))
        let api = [("x-goog-api-key", "any")]
        let inst = try server.client().postJSON("/v1/projects/demo-project/installations",
                                                #"{"fid":"\#(fid)","appId":"1:123456789012:web:abc","authVersion":"FIS_v2","sdkVersion":"w:0.4.5"}"#,
                                                headers: api)
        XCTAssertEqual(inst.status, 200, inst.text)
        let web = #"{"web":{"applicationPubKey":null,"auth":"Lw6xhutboQsc_bM3TxwZUA==","endpoint":"https://fcm.googleapis.com/fcm/send/\#(wp)","p256dh":"\#(key)"}}"#
        return FirebaseSetup(auth: auth, subtype: subtype, subscription: wp, api: api,
                             fis: try XCTUnwrap(inst.object?["authToken"]?.objectValue?["token"]?.stringValue),
                             refresh: try XCTUnwrap(inst.object?["refreshToken"]?.stringValue), web: web)
    }

    /// An FCM registration (firebase-messaging's) over a `wp:` registration: deleted, it is a
    /// record (404 to its calls) and registering again makes a new token that sends reach; it
    /// ends with the subscription it travels over.
    func testAnFCMRegistrationEndsWhenDeletedAndWithItsSubscription() throws {
        let setup = try firebaseSetup(fid: "cAbCdEfGhIjKlMnOpQrStU", subtypeID: "3a0d1c8e-0b5e-4a43-9d0b-1f2a3b4c5d6e")
        let (auth, subtype, wp, headers, web) = (setup.auth, setup.subtype, setup.subscription, setup.headers, setup.web)
        var answered = ""
        func registerFCM() throws -> String {
            let r = try server.client().postJSON("/v1/projects/demo-project/registrations", web, headers: headers)
            XCTAssertEqual(r.status, 200, r.text)
            answered = r.text
            return try XCTUnwrap(r.object?["token"]?.stringValue)
        }
        func send(_ token: String) throws -> String? {
            let r = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"a":"b"}}"#,
                                                 headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
            return r.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue ?? (r.object?["success"]?.numberValue?.text == "1" ? "ok" : r.text)
        }
        func state(_ token: String) throws -> String? {
            try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").object?["state"]?.stringValue
        }
        let first = try registerFCM()
        // Google's shape: the installation's FID, `:APA91b`, 124 characters of base64url.
        XCTAssertEqual(first.count, 153, first)
        XCTAssertTrue(first.hasPrefix("cAbCdEfGhIjKlMnOpQrStU:APA91b"), first)
        XCTAssertEqual(try registerFCM(), first, "the same installation and endpoint again")
        // GET answers the object the POST answered: `web` as sent (its keys padded as they came).
        let got = try server.client().request("GET", "/v1/projects/demo-project/registrations/\(first)", headers: headers)
        XCTAssertEqual(got.text, answered)
        XCTAssertEqual(got.object?["web"]?.objectValue?["auth"]?.stringValue, "Lw6xhutboQsc_bM3TxwZUA==")
        XCTAssertEqual(try send(first), "ok")
        let path = "/v1/projects/demo-project/registrations/\(pathEncode(first))"
        XCTAssertEqual(try server.client().request("DELETE", path, headers: headers).text, "{}")
        XCTAssertEqual(try state(first), "unregistered")
        for (method, body) in [("GET", ""), ("PATCH", web), ("DELETE", "")] {
            let r = try server.client().request(method, path, headers: headers + [("Content-Type", "application/json")], body: Array(body.utf8))
            XCTAssertEqual(r.status, 404, "\(method) \(r.text)")
            XCTAssertEqual(r.object?["error"]?.objectValue?["status"]?.stringValue, "NOT_FOUND", method)
        }
        let second = try registerFCM()
        XCTAssertNotEqual(second, first, "a deleted registration stays deleted: registering again makes a new one")
        XCTAssertEqual(try send(second), "ok")
        XCTAssertEqual(try send(first), "NotRegistered")

        // The `wp:` registration it travels over goes (register3 delete): so does it.
        XCTAssertEqual(try register("app=org.chromium.linux&device=\(auth.0)&sender=*&X-subtype=\(subtype)&delete=true", auth: auth).1,
                       "deleted=org.chromium.linux")
        XCTAssertEqual(try state(wp), "unregistered")
        XCTAssertEqual(try state(second), "unregistered")
        XCTAssertEqual(try send(second), "NotRegistered")
    }

    /// The control API's `web-push/expire` of the `wp:` registration an FCM registration travels
    /// over ends the FCM registration too, as deleting it does: `unregistered`, NotRegistered.
    func testAnFCMRegistrationEndsWhenItsSubscriptionIsExpired() throws {
        let setup = try firebaseSetup(fid: "cZyXwVuTsRqPoNmLkJiHgF", subtypeID: "7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f")
        let made = try server.client().postJSON("/v1/projects/demo-project/registrations", setup.web, headers: setup.headers)
        let token = try XCTUnwrap(made.object?["token"]?.stringValue, made.text)
        let expired = try server.client().postJSON("/api/v1/devices/\(pathEncode(setup.subscription))/web-push/expire", "")
        XCTAssertEqual(expired.status, 200, expired.text)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").object?["state"]?.stringValue, "unregistered")
        let r = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"a":"b"}}"#,
                                             headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
        XCTAssertEqual(r.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue, "NotRegistered", r.text)
    }

    /// Deleting an installation ends its FCM registrations as their own DELETE does: they are
    /// `unregistered` and sends to them answer NotRegistered; its tokens then answer 401.
    func testDeletingAnInstallationUnregistersItsFCMRegistrations() throws {
        let setup = try firebaseSetup(fid: "dAbCdEfGhIjKlMnOpQrStU", subtypeID: "3a0d1c8e-0b5e-4a43-9d0b-1f2a3b4c5d6f")
        let (wp, api, refresh) = (setup.subscription, setup.api, setup.refresh)
        let made = try server.client().postJSON("/v1/projects/demo-project/registrations", setup.web, headers: setup.headers)
        XCTAssertEqual(made.status, 200, made.text)
        let token = try XCTUnwrap(made.object?["token"]?.stringValue)
        func send() throws -> String? {
            let r = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"a":"b"}}"#,
                                                 headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
            return r.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue ?? r.object?["success"]?.numberValue?.text
        }
        XCTAssertEqual(try send(), "1")
        let gone = try server.client().request("DELETE", "/v1/projects/demo-project/installations/dAbCdEfGhIjKlMnOpQrStU",
                                               headers: api + [("Authorization", "FIS_v2 \(refresh)")])
        XCTAssertEqual(gone.status, 200, gone.text)
        XCTAssertEqual(gone.text, "{}")
        let device = try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))")
        XCTAssertEqual(device.status, 200, device.text)
        XCTAssertEqual(device.object?["state"]?.stringValue, "unregistered")
        XCTAssertEqual(device.object?["client"]?.objectValue?["kind"]?.stringValue, "fcm")
        XCTAssertEqual(try send(), "NotRegistered")
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(wp)").object?["state"]?.stringValue, "registered",
                       "the subscription it rode stays")
        let again = try server.client().request("POST", "/v1/projects/demo-project/installations/dAbCdEfGhIjKlMnOpQrStU/authTokens:generate",
                                                headers: api + [("Authorization", "FIS_v2 \(refresh)"), ("Content-Type", "application/json")],
                                                body: Array("{}".utf8))
        XCTAssertEqual(again.status, 401, again.text)
    }

    func testRegister3FaultsAnswerInItsShape() throws {
        let auth = try checkin()
        let f = try server.client().postJSON("/api/v1/faults", #"{"when":{"path":"/c2dm/register3"},"then":{"error":"PHONE_REGISTRATION_ERROR"},"times":1}"#)
        XCTAssertEqual(f.status, 201, f.text)
        XCTAssertEqual(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1, "Error=PHONE_REGISTRATION_ERROR")
        XCTAssertTrue(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1.hasPrefix("token="))
        let bad = try server.client().postJSON("/api/v1/faults", #"{"when":{"path":"/c2dm/register3"},"then":{"error":"NotRegistered"}}"#)
        XCTAssertEqual(bad.status, 400, bad.text)
        let s = try server.client().postJSON("/api/v1/faults", #"{"when":{"path":"/checkin"},"then":{"status":503,"retry_after_s":7},"times":1}"#)
        XCTAssertEqual(s.status, 201, s.text)
        let r = try server.client().request("POST", "/checkin", body: Self.checkinRequest())
        XCTAssertEqual(r.status, 503)
        XCTAssertEqual(r.headers["retry-after"], "7")
        // A fault without a path leaves the device side alone.
        _ = try server.client().postJSON("/api/v1/faults", #"{"then":{"status":500}}"#)
        _ = try checkin()
    }
}

/// A VAPID public key for tests.
enum P256TestKey {
    static func publicBase64URL() throws -> String {
        // An uncompressed point on P-256 (the curve's generator).
        let g: [UInt8] = [0x04,
                          0x6B, 0x17, 0xD1, 0xF2, 0xE1, 0x2C, 0x42, 0x47, 0xF8, 0xBC, 0xE6, 0xE5, 0x63, 0xA4, 0x40, 0xF2,
                          0x77, 0x03, 0x7D, 0x81, 0x2D, 0xEB, 0x33, 0xA0, 0xF4, 0xA1, 0x39, 0x45, 0xD8, 0x98, 0xC2, 0x96,
                          0x4F, 0xE3, 0x42, 0xE2, 0xFE, 0x1A, 0x7F, 0x9B, 0x8E, 0xE7, 0xEB, 0x4A, 0x7C, 0x0F, 0x9E, 0x16,
                          0x2B, 0xCE, 0x33, 0x57, 0x6B, 0x31, 0x5E, 0xCE, 0xCB, 0xB6, 0x40, 0x68, 0x37, 0xBF, 0x51, 0xF5]
        return base64URLEncode(g)
    }
}
