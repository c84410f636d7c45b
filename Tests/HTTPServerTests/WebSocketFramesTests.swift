@testable import HTTPServer
import XCTest

/// The pure WebSocket codec: frames read from bytes split anywhere, each refusal judged from the
/// header alone, UTF-8 across fragments, close payloads, and the frames the server writes.
final class WebSocketFramesTests: XCTestCase {
    /// Every event `bytes` yields when fed whole, then again fed one byte more at a time (as
    /// reads may split it): both must agree.
    private func events(_ bytes: [UInt8], max: Int = 1 << 16, closing: Bool = false) -> [WebSocketEvent] {
        func run(step: Int?) -> [WebSocketEvent] {
            var reader = WebSocketReader(maxMessageBytes: max)
            reader.closing = closing
            var buffer: [UInt8] = []
            var fed = 0
            var out: [WebSocketEvent] = []
            while true {
                let (used, event) = buffer.withUnsafeBufferPointer { reader.next($0) }
                buffer.removeFirst(used)
                if let event {
                    out.append(event)
                    if case .failure = event { return out }
                    continue
                }
                if used > 0 { continue }
                guard fed < bytes.count else { return out }
                let n = step.map { Swift.min($0, bytes.count - fed) } ?? bytes.count
                buffer += bytes[fed..<(fed + n)]
                fed += n
            }
        }
        let whole = run(step: nil)
        XCTAssertEqual(run(step: 1), whole, "byte by byte")
        XCTAssertEqual(run(step: 7), whole, "seven at a time")
        return whole
    }

    private func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
        WSFrame.client(opcode, payload, fin: fin, masked: masked, rsv: rsv)
    }

    private func text(_ s: String, fin: Bool = true) -> [UInt8] { frame(1, Array(s.utf8), fin: fin) }

    func testATextFrameOfEachLengthFormIsReadBack() {
        for n in [0, 1, 125, 126, 127, 65535, 65536, 70000] {
            let s = String(repeating: "é", count: n / 2) + (n % 2 == 1 ? "a" : "")
            XCTAssertEqual(events(text(s), max: 1 << 20), [.text(s)], "\(n) bytes")
        }
    }

    func testFragmentsAreReassembledWithControlFramesBetweenThem() {
        // "€" (E2 82 AC) split across the first two fragments.
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        let bytes = frame(1, Array("price: ".utf8) + euro[0..<1], fin: false) + frame(9, Array("hb".utf8))
            + frame(0, Array(euro[1...]) + Array(" 5".utf8), fin: false) + frame(10, []) + frame(0, Array("!".utf8))
        XCTAssertEqual(events(bytes), [.fragment, .ping(Array("hb".utf8)), .fragment, .pong, .text("price: € 5!")])
    }

    /// Empty continuation frames add no bytes: a message is also bounded in frames (1009 past
    /// 1,024), and the count starts again with each message.
    func testAMessageInTooManyFragmentsIs1009() {
        var atTheBound = text("a", fin: false)
        for _ in 1..<WebSocketReader.maxFragments { atTheBound += frame(0, [], fin: false) }
        let whole = events(atTheBound + frame(0, Array("b".utf8)) + text("next"))
        XCTAssertEqual(whole.filter { $0 != .fragment }, [.text("ab"), .text("next")])
        let over = events(atTheBound + frame(0, [], fin: false))
        XCTAssertEqual(over.last, .failure(code: 1009, reason: "a message in more than 1024 fragments"))
    }

    func testEachProtocolErrorIsA1002FromTheHeaderAlone() {
        let cases: [(String, [UInt8])] = [
            ("unmasked", frame(1, Array("x".utf8), masked: false)),
            ("RSV1", frame(1, Array("x".utf8), rsv: 4)),
            ("RSV3", frame(9, [], rsv: 1)),
            ("opcode 3", frame(3, [])),
            ("opcode 7", frame(7, [])),
            ("opcode 11", frame(11, [])),
            ("opcode 15", frame(15, [])),
            ("fragmented ping", frame(9, [], fin: false)),
            ("long ping", frame(9, [UInt8](repeating: 1, count: 126))),
            ("continuation first", frame(0, Array("x".utf8))),
            ("text inside a fragmented message", text("a", fin: false) + text("b")),
            ("64-bit length with top bit", [0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
        ]
        for (name, bytes) in cases {
            let got = events(bytes)
            guard case .failure(let code, _)? = got.last else { return XCTFail("\(name): \(got)") }
            XCTAssertEqual(code, 1002, name)
        }
        // Judged before the payload: a header declaring a fragmented ping is enough.
        var reader = WebSocketReader(maxMessageBytes: 100)
        let header: [UInt8] = [0x09, 0x85, 1, 2, 3, 4]
        let (used, event) = header.withUnsafeBufferPointer { reader.next($0) }
        XCTAssertEqual(used, 6)
        XCTAssertEqual(event.flatMap(code), 1002)
    }

    func testBinaryIs1003AndBadUTF8Is1007() {
        XCTAssertEqual(events(frame(2, [1, 2, 3])).last.flatMap(code), 1003)
        let bad: [[UInt8]] = [
            [0xC0, 0xAF],  // overlong "/"
            [0xE0, 0x80, 0xAF],  // overlong
            [0xED, 0xA0, 0x80],  // a surrogate
            [0xF4, 0x90, 0x80, 0x80],  // past U+10FFFF
            [0xFF], [0x80], [0xE2, 0x82],  // stray bytes, a character cut short
        ]
        for b in bad { XCTAssertEqual(events(frame(1, b)).last.flatMap(code), 1007, "\(b)") }
        // Cut short at the end of a fragmented message, valid in each fragment's prefix.
        XCTAssertEqual(events(frame(1, [0x61, 0xE2], fin: false) + frame(0, [0x82])).last.flatMap(code), 1007)
        // Invalid in the first fragment: refused there, before the message ends.
        XCTAssertEqual(events(frame(1, [0xC0, 0xAF], fin: false)), [.failure(code: 1007, reason: "text is not valid UTF-8")])
        // The largest and the boundary characters are fine.
        let edge = "\u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFF}\u{10000}\u{10FFFF}"
        XCTAssertEqual(events(text(edge)), [.text(edge)])
    }

    private func code(_ e: WebSocketEvent) -> UInt16? {
        if case .failure(let c, _) = e { return c }
        return nil
    }

    func testSizeLimitIsJudgedFromTheDeclaredLength() {
        XCTAssertEqual(events(text(String(repeating: "a", count: 100)), max: 100), [.text(String(repeating: "a", count: 100))])
        XCTAssertEqual(events(text(String(repeating: "a", count: 101)), max: 100).last.flatMap(code), 1009)
        let split = text(String(repeating: "a", count: 60), fin: false) + frame(0, Array(String(repeating: "b", count: 41).utf8))
        XCTAssertEqual(events(split, max: 100).last.flatMap(code), 1009)
        // 2^62 bytes declared: refused from ten header bytes and a mask.
        var reader = WebSocketReader(maxMessageBytes: 1 << 16)
        let huge: [UInt8] = [0x81, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]
        XCTAssertEqual(huge.withUnsafeBufferPointer { reader.next($0) }.event.flatMap(code), 1009)
    }

    func testClosePayloads() {
        XCTAssertEqual(events(frame(8, [])), [.close(code: nil, reason: "")])
        XCTAssertEqual(events(frame(8, [0x03, 0xE8] + Array("bye ✓".utf8))), [.close(code: 1000, reason: "bye ✓")])
        XCTAssertEqual(events(frame(8, [0x0F, 0xA0])), [.close(code: 4000, reason: "")])
        XCTAssertEqual(events(frame(8, [0x03])).last.flatMap(code), 1002, "one byte")
        for bad: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            XCTAssertEqual(events(frame(8, [UInt8(bad >> 8), UInt8(bad & 0xFF)])).last.flatMap(code), 1002, "code \(bad)")
        }
        XCTAssertEqual(events(frame(8, [0x03, 0xE8, 0xC0, 0xAF])).last.flatMap(code), 1002, "bad UTF-8 reason")
    }

    func testClosingSkipsEverythingButTheCloseFrame() {
        let bytes = text("ignored") + frame(2, [UInt8](repeating: 0, count: 70_000)) + frame(9, [1]) + frame(8, [0x03, 0xE8])
        XCTAssertEqual(events(bytes, max: 10, closing: true), [.close(code: 1000, reason: "")])
    }

    func testServerFrames() {
        var out: [UInt8] = []
        WebSocketFrames.append(opcode: 1, payload: Array("hi".utf8), into: &out)
        XCTAssertEqual(out, [0x81, 2, 0x68, 0x69])
        out = []
        WebSocketFrames.append(opcode: 1, payload: [UInt8](repeating: 0, count: 300), into: &out)
        XCTAssertEqual(Array(out[0..<4]), [0x81, 126, 1, 44])
        out = []
        WebSocketFrames.append(opcode: 2, payload: [UInt8](repeating: 0, count: 65536), into: &out)
        XCTAssertEqual(Array(out[0..<10]), [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0])
        XCTAssertEqual(out.count, 65546)
        XCTAssertEqual(WebSocketFrames.closePayload(code: nil, reason: "x"), [])
        XCTAssertEqual(WebSocketFrames.closePayload(code: 1001, reason: "going"), [0x03, 0xE9] + Array("going".utf8))
        // 122 ASCII bytes then a 3-byte character: cut before the character (123 at most).
        let long = String(repeating: "a", count: 122) + "€€"
        XCTAssertEqual(WebSocketFrames.closePayload(code: 1000, reason: long).count, 2 + 122)
        XCTAssertEqual(WebSocketFrames.truncated("ab€", toBytes: 4), "ab")
        XCTAssertEqual(WebSocketFrames.truncated("ab€", toBytes: 5), "ab€")
    }

    func testUTF8ValidatorAgreesWithTheStandardLibraryOnRandomBytes() {
        var r = HTTP1FuzzTests.Random(state: 0xC0FFEE)
        for _ in 0..<20_000 {
            let bytes = (0..<r.below(8)).map { _ in UInt8(truncatingIfNeeded: r.below(4) == 0 ? r.next() : UInt64(0x80 + r.below(0x78))) }
            var v = UTF8Validator()
            let ours = v.feed(bytes) && v.isComplete
            XCTAssertEqual(ours, String(validating: bytes, as: UTF8.self) != nil, "\(bytes)")
        }
    }
}
