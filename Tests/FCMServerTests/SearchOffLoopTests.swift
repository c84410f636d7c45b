import FCMTesting
import HTTPServer
import Foundation
import XCTest

/// A message search that walks the whole store runs on a search thread, not on the HTTP/1.1 loop
/// that took the request: the loop's other connections (app servers' sends) are answered while it
/// runs. Through the real server on one loop, so both connections are on the same one.
final class SearchOffLoopTests: XCTestCase {
    func testTheLoopAnswersOthersWhileASearchWalksTheStore() throws {
        let server = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--http-loops", "1"])
        defer { server.stop() }
        let client = server.client()
        defer { client.disconnect() }
        // 3,000 records of 4 KB: fifteen words every record holds and one none does make SQLite
        // lowercase and search each record's text sixteen times (about 200 MB), far longer than a
        // health answer.
        let filler = String(repeating: "x", count: 4_000)
        for i in 0..<3_000 {
            let r = try client.sendJSON(#"{"to":"a1","data":{"i":"\#(i)","f":"\#(filler)"}}"#, key: "key-111")
            XCTAssertEqual(r.status, 200, r.text)
        }
        let words = ((0..<15).map { String(repeating: "x", count: 180 + $0) } + ["nowhere"]).joined(separator: "%20")
        let search = try connectLoopback(port: server.port)
        defer { close(search) }
        let other = try connectLoopback(port: server.port)
        defer { close(other) }
        write(search, "GET /api/v1/messages?text=\(words) HTTP/1.1\r\nHost: x\r\n\r\n")
        usleep(20_000)  // the search has reached the loop
        write(other, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        let health = try readAnswer(other)
        XCTAssertTrue(health.hasPrefix("HTTP/1.1 200"), health)
        XCTAssertFalse(readable(search), "the health answer waited for the search: it ran on the loop")
        let found = try readAnswer(search)
        XCTAssertTrue(found.hasPrefix("HTTP/1.1 200"), found)
        XCTAssertTrue(found.hasSuffix(#"{"items":[],"next":null}"#), String(found.suffix(200)))
    }

    private func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }, bytes.count)
    }

    /// Whether `fd` has bytes to read now.
    private func readable(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0
    }

    /// One whole answer (its head, then `Content-Length` bytes of body), 30 s at most.
    private func readAnswer(_ fd: Int32) throws -> String {
        var got: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let until = Date().addingTimeInterval(30)
        while Date() < until {
            if let text = String(bytes: got, encoding: .utf8), let end = text.range(of: "\r\n\r\n") {
                let head = text[..<end.lowerBound].lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if text.utf8.distance(from: end.upperBound.samePosition(in: text.utf8)!, to: text.utf8.endIndex) >= length { return text }
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) >= 0 else { break }
            if p.revents & Int16(POLLIN) == 0 { continue }
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            got += chunk[0..<n]
        }
        throw TestError("no whole answer: \(String(decoding: got, as: UTF8.self).prefix(300))")
    }
}
