@testable import RoomKit
@testable import Control
import FCMCore
@testable import FCMServer
import FCMTesting
import HTTPServer
import Foundation
import Platform
import XCTest
import XMPPServer

/// `GET /readyz` and `GET /livez` through the real server: what container health checks and
/// orchestrators' probes ask (docs/control-api.md).
final class ReadinessTests: XCTestCase {
    func testReadyAndAliveOnceStarted() throws {
        let s = try TestServer()
        defer { s.stop() }
        let c = s.client()
        let ready = try c.request("GET", "/readyz")
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual(ready.headers["content-type"], "application/json; charset=UTF-8")
        XCTAssertEqual(ready.text, #"{"status":"ready"}"#)
        let alive = try c.request("GET", "/livez")
        XCTAssertEqual(alive.status, 200)
        XCTAssertEqual(alive.text, #"{"status":"alive"}"#)
        // Other methods are not these calls.
        XCTAssertEqual(try c.request("POST", "/readyz").status, 404)
    }

    /// The HTTP listener answers before the XMPP one is up: not ready yet, but alive.
    func testStartingUntilEveryListenerIsUp() throws {
        let config = try Configuration.parse(arguments: ["--http-port", "0", "--xmpp-port", "0", "--db", ":memory:"],
                                             environment: [:])
        let app = try Application(config, log: Log(level: "error"))
        defer { app.stop() }
        try app.http.start()  // only the HTTP listener, as Application.start does first
        let c = HTTPTestClient(port: app.httpPort)
        let starting = try c.request("GET", "/readyz")
        XCTAssertEqual(starting.status, 503)
        XCTAssertEqual(starting.text, #"{"status":"starting","reason":"the listeners are not all up yet"}"#)
        XCTAssertEqual(try c.request("GET", "/livez").status, 200)
        // The image's HEALTHCHECK, `fcm-mock health`, asks /readyz: not healthy yet.
        let cli = try runBinary(["health", "--server", "http://127.0.0.1:\(app.httpPort)"])
        XCTAssertEqual(cli.status, 1, cli.stdout)
        XCTAssertEqual(cli.stdout, "unhealthy: fcm-mock at http://127.0.0.1:\(app.httpPort): the listeners are not all up yet\n")
        app.xmpp.start()
        app.readiness.markListenersUp()
        XCTAssertEqual(try c.request("GET", "/readyz").status, 200)
        XCTAssertEqual(try runBinary(["health", "--server", "http://127.0.0.1:\(app.httpPort)"]).status, 0)
    }

    /// Probes carry no credentials: both stay open with a control token, as health does.
    func testOpenWithAControlToken() throws {
        let s = try TestServer(extraArguments: ["--control-token", "s3cret"])
        defer { s.stop() }
        let c = s.client()
        XCTAssertEqual(try c.request("GET", "/api/v1/stats").status, 401)
        XCTAssertEqual(try c.request("GET", "/readyz").status, 200)
        XCTAssertEqual(try c.request("GET", "/livez").status, 200)
    }

    /// The built binary: ready as soon as it prints its listening line; a store that cannot
    /// write makes it not ready (503 with SQLite's reason) but still alive.
    func testFailingStoreIsNotReady() throws {
        let folder = NSTemporaryDirectory() + "fcm-mock-readyz-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let db = folder + "/store.sqlite"
        let first = try BinaryServer(arguments: ["--db", db])
        XCTAssertEqual(first.stop(), 0)
        let pages = try Data(contentsOf: URL(fileURLWithPath: db)).count / 2048

        let s = try BinaryServer(arguments: ["--db", db, "--store-max-pages", String(pages + 12)])
        defer { s.stop() }
        let c = s.client()
        XCTAssertEqual(try c.request("GET", "/readyz").text, #"{"status":"ready"}"#)
        let filler = String(repeating: "x", count: 3000)
        var full = false
        for i in 0..<500 where !full {
            let r = try c.postJSON("/fcm/send", #"{"to":"demo-android-1","data":{"i":"\#(i)","filler":"\#(filler)"}}"#,
                                   headers: [("Authorization", "key=\(DemoProject.serverKey)")])
            full = r.status == 500
        }
        XCTAssertTrue(full, "the store never filled up")
        let failing = try c.request("GET", "/readyz")
        XCTAssertEqual(failing.status, 503)
        XCTAssertEqual(failing.text, #"{"status":"failing","reason":"store failing: database or disk is full"}"#)
        let alive = try c.request("GET", "/livez")
        XCTAssertEqual(alive.status, 200)
        XCTAssertEqual(alive.text, #"{"status":"alive"}"#)
    }
}
