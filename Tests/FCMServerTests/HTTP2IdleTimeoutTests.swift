import FCMServer
import FCMTesting
import Foundation
import Platform
import XCTest

/// An HTTP/2 connection left idle is closed with GOAWAY NO_ERROR whose debug data is Apple's
/// `{"reason":"IdleTimeout"}` (an hour by default; `Configuration.http2IdleSeconds`, real time,
/// lowered here).
final class HTTP2IdleTimeoutTests: XCTestCase {
    func testAnIdleConnectionGetsGoAwayIdleTimeout() throws {
        let server = try TestServer { $0.http2IdleSeconds = 1 }
        defer { server.stop() }
        let fd = try ConnectSocket.open(host: "127.0.0.1", port: server.port, receiveTimeout: 10)
        defer { close(fd) }
        let hello = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
        XCTAssertEqual(send(fd, hello, hello.count, Int32(MSG_NOSIGNAL)), hello.count)
        let started = Date()
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        let elapsed = Date().timeIntervalSince(started)
        // The frames the server sent: SETTINGS, its ACK of ours, then GOAWAY.
        var goAway: [UInt8]?
        var i = 0
        while i + 9 <= bytes.count {
            let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            guard i + 9 + length <= bytes.count else { break }
            if bytes[i + 3] == 7 { goAway = Array(bytes[(i + 9)..<(i + 9 + length)]) }
            i += 9 + length
        }
        let payload = try XCTUnwrap(goAway, "no GOAWAY in \(bytes)")
        XCTAssertEqual(Array(payload[0..<8]), [0, 0, 0, 0, 0, 0, 0, 0], "last stream 0, NO_ERROR")
        XCTAssertEqual(String(decoding: payload[8...], as: UTF8.self), #"{"reason":"IdleTimeout"}"#)
        XCTAssertGreaterThanOrEqual(elapsed, 0.9)
        XCTAssertLessThan(elapsed, 5)
    }
}
