import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// The device side's HTTP surfaces: faults by transport, register3's sender rules on `delete`,
/// a client registering again after the control API dropped its device, and a PATCH of an FCM
/// registration (docs/real-clients.md).
extension GCMTests {
    func fault(_ json: String) throws {
        let r = try server.client().postJSON("/api/v1/faults", json)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func deviceState(_ token: String) throws -> String? {
        try server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").object?["state"]?.stringValue
    }

    /// A legacy send to `token`: "ok" or the recipient's error.
    func legacySend(_ token: String) throws -> String? {
        let r = try server.client().postJSON("/fcm/send", #"{"to":"\#(token)","data":{"a":"b"}}"#,
                                             headers: [("Authorization", "key=AAAAfcmmock:demo-server-key")])
        return r.object?["results"]?.arrayValue?.first?.objectValue?["error"]?.stringValue
            ?? (r.object?["success"]?.numberValue?.text == "1" ? "ok" : r.text)
    }

    /// The device-side surfaces are HTTP: a fault naming one with `when.transport` `http` fires
    /// there as one without a transport does; one naming another transport never does.
    func testDeviceSideFaultsFireForTheHTTPTransportOnly() throws {
        let auth = try checkin()
        try fault(#"{"when":{"transport":"xmpp","path":"/checkin"},"then":{"status":500}}"#)
        try fault(#"{"when":{"transport":"apns","path":"/c2dm/register3"},"then":{"status":500}}"#)
        try fault(#"{"when":{"transport":"http_v1","path":"/v1/projects/*/installations"},"then":{"status":500}}"#)
        _ = try checkin()
        XCTAssertTrue(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1.hasPrefix("token="))
        let inst = try server.client().postJSON("/v1/projects/demo-project/installations",
                                                #"{"appId":"1:123456789012:web:abc","authVersion":"FIS_v2"}"#, headers: [("x-goog-api-key", "any")])
        XCTAssertEqual(inst.status, 200, inst.text)

        try fault(#"{"when":{"transport":"http","path":"/checkin"},"then":{"status":503,"retry_after_s":3},"times":1}"#)
        let r = try server.client().request("POST", "/checkin", body: Self.checkinRequest())
        XCTAssertEqual(r.status, 503)
        XCTAssertEqual(r.text, "fault f4 answered HTTP 503")
        XCTAssertEqual(r.headers["retry-after"], "3")
        try fault(#"{"when":{"transport":"http","path":"/c2dm/register3"},"then":{"error":"QUOTA_EXCEEDED"},"times":1}"#)
        let q = try register("app=org.chromium.linux&sender=745476177629", auth: auth)
        XCTAssertEqual(q.0, 200)
        XCTAssertEqual(q.1, "Error=QUOTA_EXCEEDED")
        try fault(#"{"when":{"transport":"http","path":"/v1/projects/*/installations"},"then":{"status":429},"times":1}"#)
        let i = try server.client().postJSON("/v1/projects/demo-project/installations",
                                             #"{"appId":"1:123456789012:web:abc","authVersion":"FIS_v2"}"#, headers: [("x-goog-api-key", "any")])
        XCTAssertEqual(i.status, 429)
        XCTAssertEqual(i.text, #"{"error":{"code":429,"message":"fault f6 answered HTTP 429","status":"RESOURCE_EXHAUSTED"}}"#)
        // Spent, they leave the surfaces alone again.
        _ = try checkin()
        XCTAssertTrue(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1.hasPrefix("token="))
    }

    /// `delete=true` takes a sender as a registration does (`*` besides): anything else is
    /// `Error=INVALID_SENDER` (a key in standard base64 too); a key deletes the registration made
    /// with it, padded or not.
    func testRegister3DeleteChecksAndNormalisesTheSender() throws {
        let auth = try checkin()
        for form in ["app=com.example.demo&sender=abc&delete=true", "app=com.example.demo&sender=12ab&delete=true&appid=x&scope=GCM",
                     "app=org.chromium.linux&sender=*"] {
            let r = try server.client().request("POST", "/c2dm/register3", headers: [("Authorization", "AidLogin \(auth.0):\(auth.1)")],
                                                body: Array(form.utf8))
            XCTAssertEqual(r.status, 200, form)
            XCTAssertEqual(r.text, "Error=INVALID_SENDER", form)
            XCTAssertEqual(r.headers["content-type"], "text/plain; charset=UTF-8", form)
        }
        // A key in standard base64 (`+`, `/`) is no base64url key.
        var urlKey = try P256TestKey.publicBase64URL()
        while !urlKey.contains(where: { $0 == "-" || $0 == "_" }) { urlKey = try P256TestKey.publicBase64URL() }
        let standard = urlKey.replacingOccurrences(of: "-", with: "%2B").replacingOccurrences(of: "_", with: "%2F")
        XCTAssertEqual(try register("app=org.chromium.linux&sender=\(standard)&X-subtype=wp:http://localhost:8300/%23x-V2", auth: auth).1,
                       "Error=INVALID_SENDER")
        let key = try P256TestKey.publicBase64URL() + "="
        let subtype = "wp:http://localhost:8300/%2318F2B1F7-5C6B-4E5A-8C9D-0123456789AB-V2"
        let made = try register("app=org.chromium.linux&sender=\(key)&X-subtype=\(subtype)&appid=i1&scope=GCM", auth: auth).1
        XCTAssertTrue(made.hasPrefix("token="), made)
        let token = String(made.dropFirst(6))
        // Padded as the registration was (`%3D` for `=`): the same registration.
        XCTAssertEqual(try register("app=org.chromium.linux&sender=\(key.dropLast())%3D&X-subtype=\(subtype)&delete=true&appid=i1&scope=GCM",
                                    auth: auth).1, made)
        XCTAssertEqual(try deviceState(token), "unregistered")
        XCTAssertEqual(try register("app=org.chromium.linux&sender=*&X-subtype=\(subtype)&delete=true", auth: auth).1,
                       "deleted=org.chromium.linux")
    }

    /// A registration whose device the control API unregistered or deleted is no longer the
    /// same again: the client registering again gets a new token whose device takes sends, the
    /// old registration replaced, also after a restart.
    func testRegisteringAgainAfterTheControlAPIDroppedTheDeviceRecovers() throws {
        let dir = NSTemporaryDirectory() + "fcm-mock-gcm-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        server.stop()
        server = try TestServer(db: dir + "/db.sqlite")
        let auth = try checkin()
        let android = "app=com.example.demo&device=\(auth.0)&sender=123456789012"
        let web = "app=org.chromium.linux&sender=\(try P256TestKey.publicBase64URL())&X-subtype=wp:http://localhost:8300/%23A-V2"
        func token(_ form: String) throws -> String {
            let r = try register(form, auth: auth)
            XCTAssertTrue(r.1.hasPrefix("token="), r.1)
            return String(r.1.dropFirst(6))
        }
        let first = try token(android), firstWeb = try token(web)
        XCTAssertEqual(try token(android), first)
        for t in [first, firstWeb] {
            XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(pathEncode(t)):unregister").status, 200)
        }
        let second = try token(android), secondWeb = try token(web)
        XCTAssertNotEqual(second, first)
        XCTAssertNotEqual(secondWeb, firstWeb)
        XCTAssertEqual(try token(android), second, "the same again while its device is registered")
        XCTAssertEqual(try deviceState(second), "registered")
        XCTAssertEqual(try legacySend(second), "ok")
        XCTAssertEqual(try legacySend(first), "NotRegistered")
        let d = try XCTUnwrap(server.client().request("GET", "/api/v1/devices/\(pathEncode(secondWeb))").object)
        XCTAssertEqual(d["state"]?.stringValue, "registered")
        XCTAssertEqual(d["web_push"]?.objectValue?["endpoint"]?.stringValue, "https://jmt17.google.com/fcm/send/\(secondWeb)")

        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/devices/\(pathEncode(second))").status, 204)
        let third = try token(android)
        XCTAssertNotEqual(third, second)
        XCTAssertEqual(try legacySend(third), "ok")
        func registrations() throws -> [String] {
            let c = try XCTUnwrap(server.client().request("GET", "/api/v1/clients/\(auth.0)").object)
            return (c["registrations"]?.arrayValue ?? []).compactMap { $0.objectValue?["token"]?.stringValue }.sorted()
        }
        XCTAssertEqual(try registrations(), [third, secondWeb].sorted(), "the replaced registrations are gone")

        server.stop()
        server = try TestServer(db: dir + "/db.sqlite")
        XCTAssertEqual(try registrations(), [third, secondWeb].sorted())
        XCTAssertEqual(try token(android), third)
        XCTAssertEqual(try token(web), secondWeb)
    }

    /// A PATCH updates the registration at its path: the same token, the new `web`, travelling
    /// over the subscription the new endpoint names (and ending with that one, not the former).
    func testPatchingAnFCMRegistrationKeepsItsToken() throws {
        let setup = try firebaseSetup(fid: "eAbCdEfGhIjKlMnOpQrStU", subtypeID: "3a0d1c8e-0b5e-4a43-9d0b-1f2a3b4c5d70")
        let key = try P256TestKey.publicBase64URL()
        let otherSubtype = "wp:receiver.push.com%2300000000-0b5e-4a43-9d0b-1f2a3b4c5d70"
        let other = String(try register("app=org.chromium.linux&device=\(setup.auth.0)&sender=\(key)&X-subtype=\(otherSubtype)",
                                        auth: setup.auth).1.dropFirst(6))
        let made = try server.client().postJSON("/v1/projects/demo-project/registrations", setup.web, headers: setup.headers)
        let token = try XCTUnwrap(made.object?["token"]?.stringValue)
        let path = "/v1/projects/demo-project/registrations/\(pathEncode(token))"
        let web = #"{"applicationPubKey":null,"auth":"AAECAwQFBgcICQoLDA0ODw","endpoint":"https://fcm.googleapis.com/fcm/send/\#(other)","p256dh":"\#(key)"}"#
        let patched = try server.client().request("PATCH", path, headers: setup.headers, body: Array(#"{"web":\#(web)}"#.utf8))
        XCTAssertEqual(patched.status, 200, patched.text)
        XCTAssertEqual(patched.text, #"{"name":"projects/demo-project/registrations/\#(token)","token":"\#(token)","web":\#(web)}"#)
        XCTAssertEqual(try server.client().request("GET", path, headers: setup.headers).text, patched.text)
        let listed = try XCTUnwrap(server.client().request("GET", "/api/v1/devices?client_kind=fcm&client_id=eAbCdEfGhIjKlMnOpQrStU").object)
        XCTAssertEqual(listed["items"]?.arrayValue?.count, 1, "no second device")
        let d = try XCTUnwrap(server.client().request("GET", "/api/v1/devices/\(pathEncode(token))").object)
        XCTAssertEqual(d["client"]?.objectValue?["via"]?.stringValue, other)
        XCTAssertEqual(d["client"]?.objectValue?["endpoint"]?.stringValue, "https://fcm.googleapis.com/fcm/send/\(other)")
        XCTAssertEqual(d["web_push"]?.objectValue?["keys"]?.objectValue?["auth"]?.stringValue, "AAECAwQFBgcICQoLDA0ODw")

        let nowhere = web.replacingOccurrences(of: other, with: "nothing-served-here")
        let refused = try server.client().request("PATCH", path, headers: setup.headers, body: Array(#"{"web":\#(nowhere)}"#.utf8))
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(refused.text, #"{"error":{"code":400,"message":"Request contains an invalid argument: web.endpoint: no subscription the mock serves has this endpoint","status":"INVALID_ARGUMENT"}}"#)

        // It travels over the new subscription: the former one ending leaves it, this one ending ends it.
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(pathEncode(setup.subscription)):unregister").status, 200)
        XCTAssertEqual(try deviceState(token), "registered")
        XCTAssertEqual(try legacySend(token), "ok")
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(pathEncode(other)):unregister").status, 200)
        XCTAssertEqual(try deviceState(token), "unregistered")
        XCTAssertEqual(try legacySend(token), "NotRegistered")
    }
}
