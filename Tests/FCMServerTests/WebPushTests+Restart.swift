import FCMCore
import FCMServer
import FCMStore
import FCMTesting
import Foundation
import HTTPServer
@testable import TLS
import XCTest

/// The 410 of an ended subscription, the same before and after a restart; what a reset
/// forgets and keeps (docs/webpush.md).
extension WebPushTests {
    /// A server on a file store in `dir` (the one running is stopped first).
    func restart(_ dir: String, fixtures: [String] = []) throws {
        server?.stop()
        server = try TestServer(fixtures: fixtures, db: dir + "/db.sqlite")
    }

    func temporaryFolder() throws -> String {
        let dir = NSTemporaryDirectory() + "fcm-mock-wp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }

    /// What a push to each of `subs` answers: its status and body, as text.
    func answers(_ subs: [Subscription]) throws -> [String] {
        try subs.map { s in
            let r = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], try encrypt("x", for: s))
            return "\(r.status) \(r.text)"
        }
    }

    /// A subscription ended by the control API (410, errno 103), one whose device was
    /// unregistered or deleted (410, 106): the same answers, byte for byte, after a restart, also
    /// once the deleted device's id was given to a new device; a reset forgets them (404).
    func testEndedSubscriptionsAnswerTheSame410AfterARestart() throws {
        let dir = try temporaryFolder()
        try restart(dir)
        let expired = try subscribe(), unregistered = try subscribe(), deleted = try subscribe()
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(expired.token)/web-push/expire").status, 200)
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(unregistered.token):unregister").status, 200)
        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/devices/\(deleted.token)").status, 204)
        let ended = [expired, unregistered, deleted]
        let before = try answers(ended)
        XCTAssertEqual(before, [
            #"410 {"code":410,"errno":103,"error":"Gone","message":"the subscription was ended (the user revoked the permission)"}"#,
            #"410 {"code":410,"errno":106,"error":"Gone","message":"the subscription's device is unregistered"}"#,
            #"410 {"code":410,"errno":106,"error":"Gone","message":"the subscription's device was deleted"}"#,
        ])
        try restart(dir)
        XCTAssertEqual(try answers(ended), before)
        // The deleted device was the newest: a new device gets its id now. Its subscription is
        // its own, and the old endpoint stays gone, also after another restart.
        let next = try subscribe()
        XCTAssertNotEqual(next.path, deleted.path)
        XCTAssertEqual(try answers([next]).first?.prefix(4), "201 ")
        try restart(dir)
        XCTAssertEqual(try answers(ended), before)
        XCTAssertEqual(try answers([next]).first?.prefix(4), "201 ")
        // The deleted device's keys are gone from the store; only its subscription's id is kept.
        let c = try SQLiteConnection(path: dir + "/db.sqlite")
        let id = String(deleted.path.dropFirst("/wp/".count))
        XCTAssertEqual(try c.scalar("SELECT count(*) FROM web_push_subscriptions WHERE push_id = ?", [.text(id)]), 0)
        XCTAssertEqual(try c.scalar("SELECT count(*) FROM web_push_deleted WHERE push_id = ?", [.text(id)]), 1)
        // A reset forgets every subscription it removes, ended or not: 404, and after a restart.
        XCTAssertEqual(try server.client().request("POST", "/api/v1/reset?fixtures=false").status, 204)
        let unknown = #"404 {"code":404,"errno":102,"error":"Not Found","message":"no subscription has this endpoint"}"#
        XCTAssertEqual(try answers(ended + [next]), Array(repeating: unknown, count: 4))
        try restart(dir)
        XCTAssertEqual(try answers(ended + [next]), Array(repeating: unknown, count: 4))
        // The restart loaded the demo fixture again: its web device's subscription is the only one.
        for s in ended + [next] {
            let id = String(s.path.dropFirst("/wp/".count))
            XCTAssertEqual(try c.scalar("SELECT count(*) FROM web_push_subscriptions WHERE push_id = ?", [.text(id)]), 0)
        }
        XCTAssertEqual(try c.scalar("SELECT count(*) FROM web_push_subscriptions"), 1)
        XCTAssertEqual(try c.scalar("SELECT count(*) FROM web_push_deleted"), 0)
    }

    /// A reset with fixtures: a fixture's web device keeps its subscription (also when its
    /// token was refreshed, and the subscription followed the new token) and is live again (as
    /// at start) after it was ended; another device's deleted endpoint is forgotten (404). Both
    /// hold after a restart.
    func testAResetRevivesAFixturesSubscriptionAndForgetsDeletedOnes() throws {
        let dir = try temporaryFolder()
        let fixture = #"""
        {"projects":[{"sender_id":"\#(WebPushSubscriptionTests.sender)","server_keys":["k"],
                      "apps":[{"app":"https://app.example","platform":"web"}]}],
         "devices":[{"token":"web-fixture","sender_id":"\#(WebPushSubscriptionTests.sender)","platform":"web"}]}
        """#
        try restart(dir, fixtures: [fixture])
        let web = try get("/api/v1/devices/web-fixture")
        let endpoint = try XCTUnwrap(web["web_push"]?.objectValue?["endpoint"]?.stringValue)
        let keys = try XCTUnwrap(web["web_push"]?.objectValue?["keys"]?.objectValue)
        let kept = Subscription(token: "web-fixture", endpoint: endpoint, path: String(endpoint.dropFirst(origin.count)),
                                p256dh: try P256PublicKey(base64URL: try XCTUnwrap(keys["p256dh"]?.stringValue)),
                                auth: try XCTUnwrap(base64URLDecode(Array(try XCTUnwrap(keys["auth"]?.stringValue).utf8))))
        /// After a reset, and again after a restart: the fixture's subscription as at start, live.
        func assertRevived(_ when: String) throws {
            for round in ["after the reset", "after a restart"] {
                XCTAssertEqual(try answers([kept]).first?.prefix(4), "201 ", "\(when), \(round)")
                let again = try get("/api/v1/devices/web-fixture")
                XCTAssertEqual(again["web_push"]?.objectValue?["keys"], .object(keys), "the same subscription \(when), \(round)")
                XCTAssertEqual(again["web_push_expired"], .bool(false), "\(when), \(round)")
                if round == "after the reset" { try restart(dir, fixtures: [fixture]) }
            }
        }
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/web-fixture/web-push/expire").status, 200)
        let deleted = try subscribe()
        XCTAssertEqual(try server.client().request("DELETE", "/api/v1/devices/\(deleted.token)").status, 204)
        XCTAssertEqual(try answers([kept, deleted]).map { $0.prefix(28) }, [#"410 {"code":410,"errno":103,"#, #"410 {"code":410,"errno":106,"#])
        XCTAssertEqual(try server.client().request("POST", "/api/v1/reset").status, 204)
        try assertRevived("once ended")
        XCTAssertEqual(try answers([deleted]).first?.prefix(4), "404 ")
        // Refreshed: the subscription follows the new token (ended there), and comes back.
        let refreshed = try XCTUnwrap(try server.client().request("POST", "/api/v1/devices/web-fixture:refresh").object)
        let newToken = try XCTUnwrap(refreshed["token"]?.stringValue)
        XCTAssertEqual(refreshed["web_push"]?.objectValue?["keys"], .object(keys))
        XCTAssertNil(try get("/api/v1/devices/web-fixture")["web_push"])
        XCTAssertEqual(try server.client().request("POST", "/api/v1/devices/\(newToken)/web-push/expire").status, 200)
        XCTAssertEqual(try server.client().request("POST", "/api/v1/reset").status, 204)
        XCTAssertEqual(try server.client().request("GET", "/api/v1/devices/\(newToken)").status, 404)
        try assertRevived("once refreshed")
    }
}
