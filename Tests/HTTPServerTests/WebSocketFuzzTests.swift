@testable import HTTPServer
import Platform
import XCTest

/// WebSocket frames mangled at random: the codec never crashes and always makes progress, and
/// the live server ends or keeps answering every mangled connection, and goes on serving.
final class WebSocketFuzzTests: XCTestCase {
    /// A few valid frames in a row, then a few bytes changed, inserted or removed.
    static func mangled(_ r: inout HTTP1FuzzTests.Random) -> [UInt8] {
        var b: [UInt8] = []
        for _ in 0...r.below(4) {
            let payload = (0..<[0, 1, 5, 125, 126, 300][r.below(6)]).map { _ in UInt8(truncatingIfNeeded: r.next()) }
            let opcode = UInt8([0, 1, 1, 2, 8, 9, 10, 3][r.below(8)])
            b += WSFrame.client(opcode, opcode == 1 ? Array("héllo wörld".utf8) : payload, fin: r.below(3) != 0)
        }
        for _ in 0...r.below(4) where !b.isEmpty {
            let at = r.below(b.count)
            switch r.below(3) {
            case 0: b[at] = UInt8(truncatingIfNeeded: r.next())
            case 1: b.insert(UInt8(truncatingIfNeeded: r.next()), at: at)
            default: b.remove(at: at)
            }
        }
        return b
    }

    func testMangledFramesNeverCrashTheReaderAndAlwaysProgress() {
        var r = HTTP1FuzzTests.Random(state: 0x5EED_F00D)
        var outcomes: [String: Int] = [:]
        for _ in 0..<20_000 {
            let input = Self.mangled(&r)
            var reader = WebSocketReader(maxMessageBytes: 200)
            reader.closing = r.below(5) == 0
            var at = 0
            var failed = false
            while at < input.count {
                let (used, event) = input[at...].withUnsafeBufferPointer { reader.next($0) }
                XCTAssertLessThanOrEqual(used, input.count - at)
                at += used
                guard let event else {
                    if used == 0 { break }  // waits for more
                    continue
                }
                switch event {
                case .text(let s): XCTAssertLessThanOrEqual(s.utf8.count, 200)
                case .failure(let code, let reason):
                    XCTAssertTrue([1002, 1003, 1007, 1009].contains(code), "\(code)")
                    XCTAssertLessThanOrEqual(WebSocketFrames.closePayload(code: code, reason: reason).count, 125)
                    failed = true
                default: break
                }
                outcomes["\(event)".prefix(while: { $0 != "(" }).description, default: 0] += 1
                if failed { break }
            }
        }
        // The mangling reaches every outcome (else the test would prove little).
        for kind in ["text", "ping", "pong", "close", "failure", "fragment"] {
            XCTAssertGreaterThan(outcomes[kind] ?? 0, 50, "\(kind): \(outcomes)")
        }
    }

    func testTheServerEndsOrKeepsAnsweringEveryMangledConnectionAndGoesOn() throws {
        var options = WebSocketOptions()
        options.maxMessageBytes = 200
        options.idleSeconds = 1  // a connection left waiting for the rest of a frame ends
        let h = EchoWebSocketHandler()
        let server = try webSocketServer(h, options: options)
        var r = HTTP1FuzzTests.Random(state: 0xFACADE)
        for round in 0..<3 {
            var clients: [RawWebSocket] = []
            for _ in 0..<50 {
                let c = try RawWebSocket(port: server.port, seconds: 6)
                XCTAssertEqual(c.upgrade()?.status, 101)
                c.write(Self.mangled(&r) + WSFrame.client(9, Array("probe".utf8)))
                clients.append(c)
            }
            for (i, c) in clients.enumerated() {
                // Ends (a close frame, or the connection goes), or answers the probe.
                var answered = false
                while let f = c.readFrame() {
                    if f.opcode == 8 {
                        c.write(WSFrame.close(f.closeCode))
                        break
                    }
                    if f.opcode == 10 && f.payload == Array("probe".utf8) {
                        answered = true
                        break
                    }
                }
                if !answered { XCTAssertTrue(c.waitForClose(), "round \(round) connection \(i) neither answered nor ended") }
            }
        }
        // And a new client is served as ever.
        let c = try RawWebSocket(port: server.port)
        XCTAssertEqual(c.upgrade()?.status, 101)
        c.write(WSFrame.text("fine"))
        XCTAssertEqual(c.readFrame()?.text, "fine")
    }
}
