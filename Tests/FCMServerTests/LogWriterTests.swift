import Foundation
@testable import HTTPServer
import Platform
@testable import RoomKit
import XCTest

/// The log queue behind a stderr that takes nothing: bounded, a warning's caller never held up,
/// and one line telling how many lines were dropped once writing goes on.
final class LogWriterTests: XCTestCase {
    /// A sink that blocks every write until opened, keeping what it was given.
    final class GatedSink: Sendable {
        private let state = Locked((open: false, entered: 0, bytes: [UInt8]()))
        private let gate = ConditionLock()

        func write(_ bytes: [UInt8]) {
            state.withLock { $0.entered += 1 }
            gate.withLock {
                while !state.withLock({ $0.open }) { gate.wait() }
            }
            state.withLock { $0.bytes += bytes }
        }

        func open() {
            gate.withLock { state.withLock { $0.open = true } }
            gate.broadcast()
        }

        var entered: Int { state.withLock { $0.entered } }
        var text: String { String(decoding: state.withLock { $0.bytes }, as: UTF8.self) }
    }

    private func event(_ level: Log.Level, _ message: String) -> LogEntry {
        LogEntry(micros: 0, level: level, json: false, body: .event(message, []))
    }

    private func waitFor(_ what: String, _ check: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !check() {
            if Date() > deadline { return XCTFail("timed out waiting for \(what)") }
            usleep(1_000)
        }
    }

    func testStuckWriterDropsPastTheBoundAndSaysSoOnceWritingGoesOn() {
        let sink = GatedSink()
        let writer = LogWriter(limit: 4096, sink: { sink.write($0) })
        // The first line is taken by the writer, whose write then blocks.
        writer.append(event(.info, "first"), now: false)
        waitFor("the writer's first write") { sink.entered == 1 }
        usleep(20_000)  // the write has been under way past the stuck threshold

        // Lines of 271 and 272 bytes (`queuedSize`): 4 KiB holds fourteen of them after the first.
        let filler = String(repeating: "f", count: 200)
        for i in 0..<100 { writer.append(event(.info, "line \(i) " + filler), now: false) }
        let dropped = writer.droppedCounts
        XCTAssertEqual(dropped, [0, 86, 0, 0])

        // A warning still fits (room kept for warnings), and its caller is not held up.
        let before = monotonicNanos()
        writer.append(event(.warning, "still serving"), now: true)
        let waited = monotonicNanos() - before
        XCTAssertLessThan(waited, 150_000_000, "a warning waited \(waited / 1_000_000) ms for a stuck writer")
        XCTAssertEqual(writer.droppedCounts, dropped)

        sink.open()
        waitFor("the dropped-lines line") { sink.text.contains("log lines dropped") }
        writer.flush(within: 5)
        let lines = sink.text.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.hasSuffix(" info first") == true, lines.first ?? "")
        XCTAssertEqual(lines.filter { $0.contains(" info line ") }.count, 14)
        XCTAssertEqual(lines.filter { $0.hasSuffix(" warning still serving") }.count, 1)
        let notice = lines.filter { $0.contains("log lines dropped") }
        XCTAssertEqual(notice.count, 1, "\(lines.suffix(3))")
        XCTAssertTrue(notice.first?.contains(" warning log lines dropped: stderr was not read and the log queue was full dropped=86 dropped.info=86") == true,
                      notice.first ?? "")
        XCTAssertEqual(lines.last, notice.first, "the notice comes after the lines written before it")
        XCTAssertEqual(writer.droppedCounts, [0, 0, 0, 0])

        // Room again: lines are kept and no other notice follows.
        writer.append(event(.info, "after"), now: true)
        XCTAssertTrue(sink.text.hasSuffix(" info after\n"), "a warning-level wait covers lines before it")
        XCTAssertEqual(sink.text.components(separatedBy: "log lines dropped").count, 2)
    }

    func testWarningIsWrittenBeforeItsCallerGoesOn() {
        let sink = GatedSink()
        sink.open()
        let writer = LogWriter(sink: { sink.write($0) })
        writer.append(event(.info, "queued"), now: false)
        writer.append(event(.warning, "at once"), now: true)
        let lines = sink.text.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, sink.text)
        XCTAssertTrue(lines.first?.hasSuffix(" info queued") == true, sink.text)
        XCTAssertTrue(lines.last?.hasSuffix(" warning at once") == true, sink.text)
    }

    func testSizeFollowsWhatTheLineHolds() {
        let path = String(repeating: "p", count: 7000)
        func access(_ path: String) -> LogEntry {
            LogEntry(micros: 0, level: .info, json: false, body: .http(HTTPAccess(method: "GET", path: path, status: 404, bytes: 10,
                                                                                  authorization: "key=AAAAfcmmock:demo-server-key", nanos: 1_234_567)))
        }
        let long = access("/" + path)
        let short = access("/")
        XCTAssertEqual(long.queuedSize - short.queuedSize, 7000)
        var bytes: [UInt8] = []
        var clock = LogTimestamp()
        long.format(into: &bytes, clock: &clock)
        XCTAssertGreaterThanOrEqual(long.queuedSize, bytes.count, "the estimate covers the formatted line")
    }
}
