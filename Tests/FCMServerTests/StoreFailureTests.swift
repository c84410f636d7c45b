import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import Platform
import HTTPServer
import XCTest

/// A store that fills up is said out loud: one warning with SQLite's reason, health 503 with the
/// reason, each protocol's own failure answer, and one info line once writes succeed again.
final class StoreFailureTests: XCTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "fcm-mock-store-full-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private let auth = [("Authorization", "key=\(DemoProject.serverKey)")]

    /// A legacy send with a 3 KB data value: about a page of the store each.
    private func bigSend(_ c: HTTPTestClient, _ i: Int) throws -> WireResponse {
        let filler = String(repeating: "x", count: 3000)
        return try c.postJSON("/fcm/send", #"{"to":"demo-android-1","data":{"i":"\#(i)","filler":"\#(filler)"}}"#, headers: auth)
    }

    /// The lines of `text` that are not access lines.
    private func eventLines(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { !$0.contains(" http ") && !$0.contains(" xmpp ") }
    }

    /// Reads stderr until a line contains `needle` (or 10 s pass); returns everything read.
    private func readLog(_ s: BinaryServer, until needle: String, into text: inout String) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            text += String(decoding: s.takeStderr(), as: UTF8.self)
            if text.contains(needle) { return }
            usleep(20_000)
        }
    }

    func testFullStoreIsReportedAndRecovers() throws {
        let db = folder + "/store.sqlite"
        // The store as fixtures leave it, closed (the log written back), gives its size in pages.
        let first = try BinaryServer(arguments: ["--db", db])
        XCTAssertEqual(first.stop(), 0)
        let file = try Data(contentsOf: URL(fileURLWithPath: db))
        let pageSize = Int(file[16]) << 8 | Int(file[17])  // the SQLite header's page size
        XCTAssertEqual(pageSize, 2048, "a new store's pages")
        let pages = file.count / pageSize
        XCTAssertGreaterThan(pages, 0)

        let s = try BinaryServer(arguments: ["--db", db, "--store-max-pages", String(pages + 12), "--accept-any-key"])
        defer { s.stop() }
        let c = s.client()
        var log = ""

        // Healthy at first: 200, store ok.
        let healthy = try c.request("GET", "/api/v1/health")
        XCTAssertEqual(healthy.status, 200)
        XCTAssertEqual(healthy.object?["store"]?.stringValue, "ok")
        XCTAssertEqual(healthy.object?["status"]?.stringValue, "ok")

        // Send until the store is full: answered 500, the legacy protocol's retry signal.
        var accepted = 0
        var failed: WireResponse?
        for i in 0..<500 {
            let r = try bigSend(c, i)
            if r.status == 200 { accepted += 1; continue }
            failed = r
            break
        }
        let full = try XCTUnwrap(failed, "the store never filled up")
        XCTAssertGreaterThan(accepted, 0, "the cap left no room at all")
        XCTAssertEqual(full.status, 500)
        XCTAssertEqual(full.text, "Internal Server Error\n")
        // More sends fail the same way, and log nothing beyond their access lines.
        for i in 0..<3 { XCTAssertEqual(try bigSend(c, 1000 + i).status, 500) }

        // Health: 503, the reason, the other keys as always.
        let sick = try c.request("GET", "/api/v1/health")
        XCTAssertEqual(sick.status, 503, sick.text)
        XCTAssertEqual(sick.object?["status"]?.stringValue, "failing")
        XCTAssertEqual(sick.object?["store"]?.stringValue, "failing: database or disk is full")
        XCTAssertEqual(sick.object?.keys, ["status", "store", "store_messages", "store_bytes", "version", "uptime_s", "event_readers", "tls_ca", "apns", "webpush", "clients"])

        // The CLI's health check fails and says why.
        let cli = try runBinary(["health", "--server", "http://127.0.0.1:\(s.httpPort)"])
        XCTAssertEqual(cli.status, 1, cli.stdout)
        XCTAssertEqual(cli.stdout, "unhealthy: fcm-mock at http://127.0.0.1:\(s.httpPort): store failing: database or disk is full\n")

        // HTTP v1: 500 INTERNAL in google.rpc.Status shape.
        let filler = String(repeating: "y", count: 3000)
        let v1 = try c.postJSON("/v1/projects/demo-project/messages:send",
                                #"{"message":{"token":"demo-android-1","data":{"filler":"\#(filler)"}}}"#,
                                headers: [("Authorization", "Bearer any-token-at-all")])
        XCTAssertEqual(v1.status, 500, v1.text)
        XCTAssertEqual(v1.text, #"{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INTERNAL"}]}}"#)

        // XMPP: nack INTERNAL_SERVER_ERROR.
        let x = try XMPPTestClient(port: s.xmppPort)
        _ = try x.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        x.sendDownstream(#"{"to":"demo-android-1","message_id":"full-1","data":{"filler":"\#(filler)"}}"#)
        let nack = try XCTUnwrap(x.nextGCM())
        XCTAssertEqual(nack["message_type"]?.stringValue, "nack")
        XCTAssertEqual(nack["message_id"]?.stringValue, "full-1")
        XCTAssertEqual(nack["error"]?.stringValue, "INTERNAL_SERVER_ERROR")

        // One warning for the whole spell, with SQLite's reason.
        readLog(s, until: "store writes are failing", into: &log)
        usleep(100_000)
        log += String(decoding: s.takeStderr(), as: UTF8.self)
        let warnings = eventLines(log).filter { $0.contains(" warning ") }
        XCTAssertEqual(warnings.count, 1, log)
        XCTAssertTrue(warnings.first?.contains("store writes are failing") == true, log)
        XCTAssertTrue(warnings.first?.hasSuffix(" code=13 reason=database or disk is full") == true, log)
        XCTAssertFalse(log.contains("store writes succeed again"), log)

        // Space comes back: a reset deletes the messages, their pages are free again.
        XCTAssertEqual(try c.post("/api/v1/reset").status, 204)
        XCTAssertEqual(try bigSend(c, 2000).status, 200)
        let well = try c.request("GET", "/api/v1/health")
        XCTAssertEqual(well.status, 200, well.text)
        XCTAssertEqual(well.object?["store"]?.stringValue, "ok")
        XCTAssertEqual(try runBinary(["health", "--server", "http://127.0.0.1:\(s.httpPort)"]).status, 0)
        x.sendDownstream(#"{"to":"demo-android-1","message_id":"room-1"}"#)
        XCTAssertEqual(try x.nextGCM()?["message_type"]?.stringValue, "ack")
        readLog(s, until: "store writes succeed again", into: &log)
        let events = eventLines(log)
        XCTAssertEqual(events.filter { $0.contains(" info store writes succeed again") }.count, 1, log)
        XCTAssertEqual(events.filter { $0.contains(" warning ") }.count, 1, log)
    }

    /// A write that the operating system refuses (here a file-size limit: EFBIG, as ENOSPC on a
    /// full disk) fails the commit it belongs to: that send is answered 500 and the warning names
    /// the reason. A write may succeed again at once (a checkpoint lets the log start over at its
    /// beginning) until both files are at the limit; then health says so. After a kill -9 and a
    /// restart the store holds exactly the sends answered 200.
    func testARefusedLogWriteFailsItsCommitAndLosesNothingAnswered() throws {
        let db = folder + "/store.sqlite"
        let first = try BinaryServer(arguments: ["--db", db])
        XCTAssertEqual(first.stop(), 0)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: db)[.size] as? Int)

        let s = try BinaryServer(arguments: ["--db", db], maxFileBytes: size + 64 * 1024)
        let c = s.client()
        var answered: [String] = []
        var refused = 0, refusedInARow = 0
        for i in 0..<3_000 where refusedInARow < 3 {
            let r = try bigSend(c, i)
            if r.status == 200 {
                answered.append(try XCTUnwrap(results(r).first?["message_id"]?.stringValue, r.text))
                refusedInARow = 0
                continue
            }
            XCTAssertEqual(r.status, 500)
            XCTAssertEqual(r.text, "Internal Server Error\n")
            refused += 1
            refusedInARow += 1
        }
        XCTAssertEqual(refusedInARow, 3, "the store never stayed full")
        XCTAssertGreaterThan(answered.count, 0, "the limit left no room at all")
        let sick = try c.request("GET", "/api/v1/health")
        XCTAssertEqual(sick.status, 503, sick.text)
        XCTAssertEqual(sick.object?["store"]?.stringValue, "failing: disk I/O error")
        var log = ""
        readLog(s, until: "store writes are failing", into: &log)
        XCTAssertTrue(eventLines(log).contains { $0.contains(" warning store writes are failing") && $0.hasSuffix("reason=disk I/O error") }, log)
        kill(s.process.processIdentifier, SIGKILL)
        s.process.waitUntilExit()

        let again = try BinaryServer(arguments: ["--db", db])
        defer { again.stop() }
        let stored = try storedRecipientIDs(again.client())
        XCTAssertEqual(stored, Set(answered), "stored \(stored.count), answered \(answered.count), refused \(refused)")
    }

    /// Without `--store-max-pages` nothing caps the store; a bad value is refused at start.
    func testStoreMaxPagesOption() throws {
        XCTAssertNil(try Configuration.parse(arguments: [], environment: [:]).storeMaxPages)
        XCTAssertEqual(try Configuration.parse(arguments: ["--store-max-pages", "64"], environment: [:]).storeMaxPages, 64)
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_STORE_MAX_PAGES": "9"]).storeMaxPages, 9)
        for bad in ["0", "-1", "many"] {
            XCTAssertThrowsError(try Configuration.parse(arguments: ["--store-max-pages", bad], environment: [:]))
        }
    }
}
