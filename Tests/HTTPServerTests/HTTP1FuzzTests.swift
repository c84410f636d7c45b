@testable import HTTPServer
import Platform
import XCTest

/// The plain port's HTTP/1.1 reader against mangled input: the pure parts never crash and keep
/// their invariants, and the live server answers or closes every mangled request and goes on.
final class HTTP1FuzzTests: XCTestCase {
    /// A small deterministic generator (the same inputs on every run).
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    static let seeds: [[UInt8]] = [
        "POST /fcm/send HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\nbody",
        "GET /a?b=c&d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\n",
        "\r\nHEAD http://h:1/p HTTP/1.1\nX:  v \n\n",
    ].map { Array($0.utf8) }
    static let interesting: [UInt8] = Array(" :;\r\n\t/?&=-0123456789aAfFHTP.".utf8) + [0, 0x7F, 0x80, 0xFF]

    /// A seed with a few bytes changed, inserted, removed or repeated.
    static func mangled(_ r: inout Random) -> [UInt8] {
        var b = seeds[r.below(seeds.count)]
        for _ in 0...r.below(4) {
            let at = r.below(b.count)
            let byte = r.below(3) == 0 ? UInt8(truncatingIfNeeded: r.next()) : interesting[r.below(interesting.count)]
            switch r.below(4) {
            case 0: b[at] = byte
            case 1: b.insert(byte, at: at)
            case 2: if b.count > 1 { b.remove(at: at) }
            default: b.insert(contentsOf: b[at..<min(b.count, at + 1 + r.below(8))], at: at)
            }
        }
        return b
    }

    func testMangledHeadsAndChunksNeverCrashTheParser() {
        var r = Random(state: 0x5EED)
        var parsed = 0, refused = 0, incomplete = 0
        for _ in 0..<20_000 {
            let input = Self.mangled(&r)
            input.withUnsafeBufferPointer { all in
                guard let end = HTTP1Parser.headEnd(all, from: 0) else {
                    incomplete += 1
                    return
                }
                XCTAssertLessThanOrEqual(end, all.count)
                do throws(HTTP1Refusal) {
                    let h = try HTTP1Parser.parseHead(UnsafeBufferPointer(rebasing: all[0..<end]))
                    parsed += 1
                    XCTAssertFalse(h.method.isEmpty)
                    XCTAssertFalse(h.path.isEmpty)
                    XCTAssertTrue(h.minorVersion == 0 || h.minorVersion == 1)
                    if case .chunked = h.framing {
                        var d = ChunkedDecoder()
                        do throws(HTTP1Refusal) {
                            let used = try d.feed(UnsafeBufferPointer(rebasing: all[end...])) { _ in }
                            XCTAssertLessThanOrEqual(used, all.count - end)
                        } catch {
                            XCTAssertGreaterThanOrEqual(error.status, 400)
                        }
                    }
                } catch {
                    refused += 1
                    XCTAssertTrue([400, 431, 501, 505].contains(error.status))
                }
            }
        }
        // The mangling reaches all three outcomes (else the test would prove little).
        XCTAssertGreaterThan(parsed, 1000)
        XCTAssertGreaterThan(refused, 1000)
        XCTAssertGreaterThan(incomplete, 100)
    }

    func testTheServerAnswersOrClosesEveryMangledRequestAndGoesOn() throws {
        let server = try serve(maxBody: 64) { r, responder in
            responder.send(HTTPResponse(status: r.bodyTooLarge ? 413 : 200, body: r.body))
        }
        var r = Random(state: 0xF00D)
        for i in 0..<150 {
            let c = try RawHTTP1(port: server.port, seconds: 3)
            c.write(Self.mangled(&r))
            // Our side ends the request stream, so whatever the server waits for, it learns that
            // nothing more comes: it must answer what it has and close, never hang.
            shutdown(c.fd, Int32(SHUT_WR))
            let rest = c.readUntilClosed()
            XCTAssertTrue(rest.closed, "mangled request \(i) neither answered and closed nor closed")
            if !rest.bytes.isEmpty {
                XCTAssertTrue(rest.bytes.starts(with: Array("HTTP/1.1 ".utf8)), "request \(i): \(String(decoding: rest.bytes.prefix(40), as: UTF8.self))")
            }
        }
        let c = try RawHTTP1(port: server.port)
        c.write(HTTP1WireTests.post("/after", "ok"))
        XCTAssertEqual(c.readAnswer()?.text, "ok")
    }
}
