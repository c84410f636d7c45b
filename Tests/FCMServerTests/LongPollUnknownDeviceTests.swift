import HTTPServer
import FCMCore
import FCMTesting
import Foundation
import XCTest

/// A long poll on a token that does not exist yet (control-api.md, contract v1.2): it waits like
/// an empty inbox, since the token registers on its first send, which may be the one awaited.
final class LongPollUnknownDeviceTests: XCTestCase {
    /// Sends `json` with the fixture's key after `delay` seconds, on another connection.
    private func send(_ json: String, to port: Int, after delay: TimeInterval) -> Thread {
        let t = Thread {
            Thread.sleep(forTimeInterval: delay)
            _ = try? HTTPTestClient(port: port).sendJSON(json)
        }
        t.start()
        return t
    }

    /// The poll is waiting when the first send to the new token arrives, and returns with it.
    func testAPollOnATokenNotYetRegisteredIsAnsweredByItsFirstSend() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let c = s.client()
        XCTAssertEqual(try c.get("/api/v1/devices/new-token-1/messages").status, 404, "without wait: unknown")
        _ = send(#"{"to":"new-token-1","data":{"k":"first"}}"#, to: s.port, after: 0.5)
        let start = Date()
        let r = try c.get("/api/v1/devices/new-token-1/messages?wait=20&min=1")
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(items(r).count, 1, r.text)
        XCTAssertEqual(items(r).first?["data"]?.objectValue?["k"]?.stringValue, "first")
        XCTAssertGreaterThanOrEqual(elapsed, 0.4, "it waited for the send instead of answering 404 at once")
        XCTAssertLessThan(elapsed, 15, "the send ended the wait, not the deadline")
        // The token is a device now, as any first send makes it.
        XCTAssertEqual(try c.get("/api/v1/devices/new-token-1").status, 200)
    }

    /// min=2 on an unknown token: the first send registers it and is not enough; the second is.
    func testMinCountsFromTheRegisteringSend() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let port = s.port
        let sender = Thread {
            let c = HTTPTestClient(port: port)
            Thread.sleep(forTimeInterval: 0.3)
            _ = try? c.sendJSON(#"{"to":"new-token-2","data":{"n":"1"}}"#)
            Thread.sleep(forTimeInterval: 0.3)
            _ = try? c.sendJSON(#"{"to":"new-token-2","data":{"n":"2"}}"#)
        }
        sender.start()
        let start = Date()
        let r = try s.client().get("/api/v1/devices/new-token-2/messages?wait=20&min=2")
        XCTAssertEqual(items(r).compactMap { $0["data"]?.objectValue?["n"]?.stringValue }, ["1", "2"], r.text)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.5)
        XCTAssertLessThan(Date().timeIntervalSince(start), 15)
    }

    /// A wait that ends with the token still unknown answers an empty page under `register`, and
    /// 404 under `reject`, where only the control API could have made the device.
    func testAWaitThatEndsWithoutTheDevice() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        let start = Date()
        let r = try s.client().get("/api/v1/devices/never-sent/messages?wait=0.5")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.45)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.text, #"{"items":[],"next":null}"#)
        s.stop()

        let strict = try TestServer(fixtures: [errorTableFixture], unknownTokens: "reject")
        defer { strict.stop() }
        let c = strict.client()
        let refused = Date()
        let missing = try c.get("/api/v1/devices/never-sent/messages?wait=0.5")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(refused), 0.45, "it waited too")
        XCTAssertEqual(missing.status, 404, missing.text)
        XCTAssertEqual(missing.object?["error"]?.objectValue?["code"]?.stringValue, "not_found", missing.text)
        // Under reject, a device the control API makes mid-wait, then a send to it, end the wait.
        let port = strict.port
        let maker = Thread {
            let m = HTTPTestClient(port: port)
            Thread.sleep(forTimeInterval: 0.3)
            _ = try? m.postJSON("/api/v1/devices", #"{"token":"made-later","sender_id":"111","app":"com.a"}"#)
            _ = try? m.sendJSON(#"{"to":"made-later","data":{"k":"v"}}"#)
        }
        maker.start()
        let made = try c.get("/api/v1/devices/made-later/messages?wait=20")
        XCTAssertEqual(made.status, 200, made.text)
        XCTAssertEqual(items(made).count, 1, made.text)
    }
}
