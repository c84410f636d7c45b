import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// `--http-loops` (issue 38): its values, and the server on two loops end to end, a long poll
/// on one loop answered by the commit of a send that came in on the other.
final class HTTPLoopsFlagTests: XCTestCase {
    func testTheFlagAndItsVariable() throws {
        XCTAssertNil(try Configuration.parse(arguments: [], environment: [:]).httpLoops, "default: one per core")
        XCTAssertEqual(try Configuration.parse(arguments: ["--http-loops", "3"], environment: [:]).httpLoops, 3)
        XCTAssertEqual(try Configuration.parse(arguments: ["--http-loops=1"], environment: [:]).httpLoops, 1)
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_HTTP_LOOPS": "2"]).httpLoops, 2)
        XCTAssertEqual(try Configuration.parse(arguments: ["--http-loops", "4"], environment: ["FCM_MOCK_HTTP_LOOPS": "2"]).httpLoops, 4)
        for bad in ["0", "-1", "257", "two", "1.5", ""] {
            XCTAssertThrowsError(try Configuration.parse(arguments: ["--http-loops", bad], environment: [:]), bad) { e in
                XCTAssertEqual("\(e)", "--http-loops must be a number from 1 to 256, got '\(bad)'")
            }
        }
        XCTAssertThrowsError(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_HTTP_LOOPS": "0"])) { e in
            XCTAssertEqual("\(e)", "FCM_MOCK_HTTP_LOOPS must be a number from 1 to 256, got '0'")
        }
    }

    func testALongPollOnOneLoopIsAnsweredByASendOnTheOther() throws {
        for loops in ["1", "2"] {
            let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--http-loops", loops])
            defer { s.stop() }
            let token = "loops-token-\(loops)"
            let poller = s.client()
            XCTAssertEqual(try poller.get("/api/v1/health").status, 200)
            let port = s.port
            let sender = Thread {
                Thread.sleep(forTimeInterval: 0.3)
                // A connection of its own: the next loop in turn.
                _ = try? HTTPTestClient(port: port).sendJSON(#"{"to":"\#(token)","data":{"k":"v"}}"#)
            }
            sender.start()
            let started = Date()
            let r = try poller.get("/api/v1/devices/\(token)/messages?wait=20&min=1")
            XCTAssertEqual(r.status, 200, "\(loops) loops: \(r.text)")
            XCTAssertEqual(items(r).count, 1, "\(loops) loops: \(r.text)")
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, "\(loops) loops: the send ended the wait")
        }
    }
}
