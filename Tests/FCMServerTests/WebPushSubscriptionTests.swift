import FCMCore
import FCMServer
import FCMTesting
import HTTPServer
import Foundation
import TLS
import XCTest

/// Web devices' push subscriptions through the control API (docs/spec/webpush.md section 1).
final class WebPushSubscriptionTests: XCTestCase {
    var server: TestServer!

    override func tearDown() {
        server?.stop()
    }

    static let sender = "123456789012"

    /// A new web device (with `extra` members in its creation body), as the control API answers it.
    static func createWebDevice(_ client: HTTPTestClient, _ extra: String = "", online: Bool = true) throws -> JSONObject {
        let r = try client.postJSON("/api/v1/devices",
                                    #"{"sender_id":"\#(sender)","platform":"web","app":"https://app.example","online":\#(online)\#(extra)}"#)
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(r.object)
    }

    func testAWebDeviceHasExactlyTheJSONOfPushSubscriptionToJSON() throws {
        server = try TestServer()
        let d = try Self.createWebDevice(server.client())
        let sub = try XCTUnwrap(d["web_push"]?.objectValue)
        XCTAssertEqual(sub.members.map(\.key), ["endpoint", "expirationTime", "keys"])
        XCTAssertEqual(sub["expirationTime"], .null)
        let endpoint = try XCTUnwrap(sub["endpoint"]?.stringValue)
        let prefix = "http://127.0.0.1:\(server.port)/wp/"
        XCTAssertTrue(endpoint.hasPrefix(prefix), endpoint)
        let id = String(endpoint.dropFirst(prefix.count))
        XCTAssertGreaterThanOrEqual(id.count, 64)
        XCTAssertTrue(id.utf8.allSatisfy { Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8).contains($0) })
        let keys = try XCTUnwrap(sub["keys"]?.objectValue)
        XCTAssertEqual(keys.members.map(\.key), ["p256dh", "auth"])
        let p256dh = try XCTUnwrap(keys["p256dh"]?.stringValue)
        let auth = try XCTUnwrap(keys["auth"]?.stringValue)
        XCTAssertFalse(p256dh.contains("=") || auth.contains("="), "base64url without padding")
        // A real P-256 point, and 16 bytes of auth secret.
        XCTAssertEqual(try P256PublicKey(base64URL: p256dh).rawPoint.count, 65)
        XCTAssertEqual(base64URLDecode(Array(auth.utf8))?.count, 16)
        XCTAssertEqual(d["web_push_expired"], .bool(false))
        XCTAssertEqual(d["application_server_key"], .null)
        // Nothing private is shown, and a second device gets other keys and another id.
        XCTAssertFalse(Array(d.members.map(\.key)).contains { $0.contains("private") })
        let other = try XCTUnwrap(try Self.createWebDevice(server.client())["web_push"]?.objectValue)
        XCTAssertNotEqual(other["endpoint"], sub["endpoint"])
        XCTAssertNotEqual(other["keys"], sub["keys"])
        // `?web_push_id=` finds the device by its endpoint's id; another id finds none.
        let found = try server.client().request("GET", "/api/v1/devices?web_push_id=\(id)").object?["items"]?.arrayValue
        XCTAssertEqual(found?.first?.objectValue?["token"], d["token"])
        XCTAssertEqual(found?.count, 1)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices?web_push_id=nope").object?["items"]?.arrayValue?.count, 0)
        // The read and the list show the same subscription; android devices have none.
        let token = try XCTUnwrap(d["token"]?.stringValue)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(token)").object?["web_push"], .object(sub))
        XCTAssertNil(try server.client().request("GET", "/api/v1/devices/demo-android-1").object?["web_push"])
    }

    func testEndpointBaseOnTheReadAndGooglesHostOnlyWhenAsked() throws {
        server = try TestServer()
        let d = try Self.createWebDevice(server.client())
        let token = try XCTUnwrap(d["token"]?.stringValue)
        let endpoint = try XCTUnwrap(d["web_push"]?.objectValue?["endpoint"]?.stringValue)
        let id = try XCTUnwrap(endpoint.components(separatedBy: "/wp/").last)
        let other = try server.client().request("GET", "/api/v1/devices/\(token)?endpoint_base=https%3A%2F%2Ffcm.googleapis.com%2F")
        XCTAssertEqual(other.object?["web_push"]?.objectValue?["endpoint"]?.stringValue, "https://fcm.googleapis.com/wp/" + id)
        for bad in ["ftp%3A%2F%2Fx", "https%3A%2F%2Fx%2Fpath", "127.0.0.1%3A80", "https%3A%2F%2F"] {
            let r = try server.client().request("GET", "/api/v1/devices/\(token)?endpoint_base=\(bad)")
            XCTAssertEqual(r.status, 400, bad)
            XCTAssertTrue(r.text.contains("endpoint_base"), r.text)
        }
        server.stop()
        let dir = NSTemporaryDirectory() + "fcm-mock-wp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // An HTTPS port alone keeps endpoints on the mock (the plain port); Google's host only
        // with --web-push-origin.
        server = try TestServer(db: dir + "/db.sqlite", extraArguments: ["--https-port", "0"])
        let secure = try Self.createWebDevice(server.client())
        XCTAssertTrue(try XCTUnwrap(secure["web_push"]?.objectValue?["endpoint"]?.stringValue)
            .hasPrefix("http://127.0.0.1:\(server.port)/wp/"))
        server.stop()
        server = try TestServer(db: dir + "/db2.sqlite",
                                extraArguments: ["--https-port", "0", "--web-push-origin", "https://fcm.googleapis.com"])
        let google = try Self.createWebDevice(server.client())
        XCTAssertTrue(try XCTUnwrap(google["web_push"]?.objectValue?["endpoint"]?.stringValue).hasPrefix("https://fcm.googleapis.com/wp/"))
    }

    func testApplicationServerKeyIsValidatedAndShown() throws {
        server = try TestServer()
        let vapid = try P256PrivateKey().publicKey.base64URL
        let d = try Self.createWebDevice(server.client(), #", "application_server_key":"\#(vapid)""#)
        XCTAssertEqual(d["application_server_key"]?.stringValue, vapid)
        // Padding is forgiven and dropped.
        let padded = try Self.createWebDevice(server.client(), #", "application_server_key":"\#(vapid)=""#)
        XCTAssertEqual(padded["application_server_key"]?.stringValue, vapid)
        let notOnCurve = base64URLEncode([4] + [UInt8](repeating: 1, count: 64))
        for bad in ["nope!", base64URLEncode([UInt8](repeating: 4, count: 33)), notOnCurve] {
            let r = try server.client().postJSON("/api/v1/devices",
                                                 #"{"sender_id":"\#(Self.sender)","platform":"web","application_server_key":"\#(bad)"}"#)
            XCTAssertEqual(r.status, 400, bad)
            XCTAssertTrue(r.text.contains("application_server_key"), r.text)
        }
        let android = try server.client().postJSON("/api/v1/devices",
                                                   #"{"sender_id":"\#(Self.sender)","platform":"android","application_server_key":"\#(vapid)"}"#)
        XCTAssertEqual(android.status, 400, android.text)
    }

    func testExpireEndsTheSubscriptionAndItAllSurvivesARestart() throws {
        let dir = NSTemporaryDirectory() + "fcm-mock-wp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        server = try TestServer(db: dir + "/db.sqlite")
        let vapid = try P256PrivateKey().publicKey.base64URL
        let d = try Self.createWebDevice(server.client(), #", "application_server_key":"\#(vapid)""#)
        let token = try XCTUnwrap(d["token"]?.stringValue)
        let expired = try server.client().request("POST", "/api/v1/devices/\(token)/web-push/expire")
        XCTAssertEqual(expired.status, 200, expired.text)
        XCTAssertEqual(expired.object?["web_push_expired"], .bool(true))
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/demo-android-1/web-push/expire").status, 400)
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/nobody/web-push/expire").status, 404)
        server.stop()
        server = try TestServer(db: dir + "/db.sqlite")
        let back = try XCTUnwrap(try server.client().request("GET", "/api/v1/devices/\(token)").object)
        XCTAssertEqual(back["web_push"]?.objectValue?["keys"], d["web_push"]?.objectValue?["keys"])
        XCTAssertEqual(back["web_push"]?.objectValue?["endpoint"]?.stringValue?.components(separatedBy: "/wp/").last,
                       d["web_push"]?.objectValue?["endpoint"]?.stringValue?.components(separatedBy: "/wp/").last)
        XCTAssertEqual(back["web_push_expired"], .bool(true))
        XCTAssertEqual(back["application_server_key"]?.stringValue, vapid)
    }

    func testAFixtureWebDeviceHasASubscriptionAndARefreshKeepsIt() throws {
        let vapid = try P256PrivateKey().publicKey.base64URL
        let fixture = #"""
        {"projects":[{"sender_id":"555","server_keys":["k"],"apps":[{"app":"https://site.example","platform":"web"}]}],
         "devices":[{"token":"web-1","sender_id":"555","platform":"web","application_server_key":"\#(vapid)"}]}
        """#
        server = try TestServer(fixtures: [fixture])
        let d = try XCTUnwrap(try server.client().request("GET", "/api/v1/devices/web-1").object)
        XCTAssertEqual(d["application_server_key"]?.stringValue, vapid)
        let sub = try XCTUnwrap(d["web_push"])
        let refreshed = try XCTUnwrap(try server.client().request("POST", "/api/v1/devices/web-1:refresh").object)
        XCTAssertEqual(refreshed["web_push"], sub, "the browser's subscription follows the installation")
        XCTAssertNil(try server.client().request("GET", "/api/v1/devices/web-1").object?["web_push"])
    }
}
