import FCMTesting
import Foundation
import HTTPServer
import Platform
import XCTest

/// HTTP/2 flow control (RFC 9113 §5.2, §6.9) against the real server: an answer larger than the
/// client's window waits for WINDOW_UPDATE, and a request body larger than the server's initial
/// window is let in by the server's own WINDOW_UPDATEs.
final class HTTP2FlowControlTests: XCTestCase {
    /// `/big?n=N` answers N bytes (`a`…`z` repeating); any other request answers its body's
    /// length and byte sum.
    static let handler: HTTPHandler = { r, responder in
        if r.path == "/big" {
            let n = Int(r.rawQuery.first { $0.0 == "n" }?.1 ?? "0") ?? 0
            let body = (0..<n).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            return responder.send(HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: body))
        }
        let sum = r.body.reduce(0) { $0 + Int($1) }
        responder.send(HTTPResponse(status: r.bodyTooLarge ? 413 : 200, contentType: "text/plain", body: "\(r.body.count) \(sum)"))
    }

    func start(maxBody: Int) throws -> HTTPServer {
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: maxBody, handler: Self.handler)
        try s.start()
        return s
    }

    /// Whether a frame arrives within `millis` (without reading it).
    func somethingArrives(_ c: H2RawClient, within millis: Int32) -> Bool {
        var p = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, millis) > 0
    }

    func testAnAnswerLargerThanTheClientsWindowWaitsForWindowUpdate() throws {
        let server = try start(maxBody: 1024)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port, preface: false)
        c.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 1000: each stream may receive 1000 bytes at first.
        c.frame(H2RawClient.settings, 0, 0, [0, 4] + H2RawClient.uint32(1000))
        c.sendRequest(1, "GET", "/big?n=5000")
        var received: [UInt8] = []
        var status = 0
        while received.count < 1000, let f = c.readFrame() {
            switch f.type {
            case H2RawClient.headers: status = Int(c.decode(f.payload).first { $0.0 == ":status" }?.1 ?? "") ?? 0
            case H2RawClient.data: received += f.payload
            case H2RawClient.settings where f.flags & 1 == 0: c.frame(H2RawClient.settings, 1, 0, [])
            default: break
            }
        }
        XCTAssertEqual(status, 200)
        XCTAssertEqual(received.count, 1000, "the server sends exactly the window")
        // Nothing more until the window opens (a settings ack may still come: skip non-DATA).
        while somethingArrives(c, within: 300) {
            let f = try XCTUnwrap(c.readFrame())
            XCTAssertNotEqual(f.type, H2RawClient.data, "DATA beyond the client's window")
        }
        c.frame(H2RawClient.windowUpdate, 0, 1, H2RawClient.uint32(4000))
        let rest = try XCTUnwrap(c.collect([1])[1])
        XCTAssertEqual((received + rest.body).count, 5000)
        XCTAssertEqual(received + rest.body, (0..<5000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
    }

    /// A streamed answer cut by its producer while the client's window is shut (a reader that
    /// stopped reading; nghttp2 would not ask for its body again): the stream is reset at once.
    func testACutStreamIsResetThoughTheClientsWindowIsShut() throws {
        let stream = HTTPStream()
        let released = DispatchSemaphore(value: 0)
        stream.onClose { released.signal() }
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _, responder in
            var answer = HTTPResponse(status: 200)
            answer.stream = stream
            responder.send(answer)
        }
        try server.start()
        defer { server.stop() }
        let c = try H2RawClient(port: server.port, preface: false)
        c.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 1000: the stream's window is shut after 1000 bytes.
        c.frame(H2RawClient.settings, 0, 0, [0, 4] + H2RawClient.uint32(1000))
        c.sendRequest(1, "GET", "/events")
        stream.write([UInt8](repeating: 120, count: 100_000))
        var received = 0
        while received < 1000, let f = c.readFrame() {
            if f.type == H2RawClient.data { received += f.payload.count }
            if f.type == H2RawClient.settings && f.flags & 1 == 0 { c.frame(H2RawClient.settings, 1, 0, []) }
        }
        XCTAssertEqual(received, 1000)
        stream.cut()
        var reset: H2RawClient.Frame?
        while reset == nil, let f = c.readFrame() {
            XCTAssertNotEqual(f.type, H2RawClient.data, "DATA after the cut")
            if f.type == H2RawClient.rstStream && f.stream == 1 { reset = f }
        }
        XCTAssertNotNil(reset, "the cut stream was reset")
        XCTAssertEqual(released.wait(timeout: .now() + 5), .success, "the stream was let go")
    }

    func testARequestBodyLargerThanTheServersWindowIsLetIn() throws {
        let total = 300_000
        let server = try start(maxBody: 1 << 20)
        defer { server.stop() }
        let c = try H2RawClient(port: server.port)
        let body = (0..<total).map { UInt8(truncatingIfNeeded: $0 * 7) }
        c.frame(H2RawClient.headers, H2RawClient.endHeaders, 1, H2RawClient.request("POST", "/upload"))
        // Send as the windows allow (both start at 65,535; the server's SETTINGS may change the
        // stream's), reading WINDOW_UPDATEs whenever they are used up.
        var connection = 65_535, stream = 65_535, sent = 0, updates = 0
        while sent < total {
            let n = min(connection, stream, 16_384, total - sent)
            if n > 0 {
                let end = sent + n == total
                c.frame(H2RawClient.data, end ? H2RawClient.endStream : 0, 1, Array(body[sent..<sent + n]))
                sent += n
                connection -= n
                stream -= n
                continue
            }
            let f = try XCTUnwrap(c.readFrame(), "the server stopped before the body was in (\(sent) bytes sent)")
            switch f.type {
            case H2RawClient.windowUpdate:
                let inc = Int(f.payload[0..<4].reduce(0) { $0 << 8 | UInt32($1) } & 0x7fff_ffff)
                if f.stream == 0 { connection += inc } else if f.stream == 1 { stream += inc }
                updates += 1
            case H2RawClient.settings where f.flags & 1 == 0:
                var i = 0
                while i + 6 <= f.payload.count {
                    let id = Int(f.payload[i]) << 8 | Int(f.payload[i + 1])
                    let value = Int(f.payload[i + 2..<i + 6].reduce(0) { $0 << 8 | UInt32($1) })
                    if id == 4 { stream += value - 65_535 }
                    i += 6
                }
                c.frame(H2RawClient.settings, 1, 0, [])
            case H2RawClient.rstStream, H2RawClient.goAway:
                XCTFail("the server refused the upload: frame type \(f.type), error \(f.errorCode)")
                return
            default:
                break
            }
        }
        XCTAssertGreaterThan(updates, 0, "a body over 65,535 bytes needs the server's WINDOW_UPDATEs")
        let answer = try XCTUnwrap(c.collect([1])[1])
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.text, "\(total) \(body.reduce(0) { $0 + Int($1) })")
    }

    /// The attack that held 450 MB: 128 streams of `GET /api/v1/messages?limit=20` (3.6 MB
    /// answers) on a connection that never opens its window. Past `maxUnsentBytes` (4 MiB) the
    /// requests wait unhandled, so two answers are built, not 128, and memory stays flat.
    func testAnswersHeldForAClosedWindowAreBoundedPerConnection() throws {
        let built = Locked<Int>(0)
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024) { _, responder in
            built.withLock { $0 += 1 }
            responder.send(HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: [UInt8](repeating: 0x61, count: 3_600_000)))
        }
        try server.start()
        defer { server.stop() }
        let before = residentKiB()
        let c = try H2RawClient(port: server.port, preface: false)
        c.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 0: no stream may receive a byte.
        c.frame(H2RawClient.settings, 0, 0, [0, 4] + H2RawClient.uint32(0))
        var frames: [UInt8] = []
        for i in 0..<128 {
            frames += H2RawClient.frameBytes(H2RawClient.headers, H2RawClient.endHeaders | H2RawClient.endStream, Int32(2 * i + 1),
                                             H2RawClient.request("GET", "/api/v1/messages?limit=20"))
        }
        c.write(frames)
        // Give the server time to handle whatever it would (a second); no DATA can come meanwhile.
        usleep(1_000_000)
        XCTAssertEqual(built.withLock { $0 }, 2, "answers built while the window is shut")
        XCTAssertLessThan(residentKiB() - before, 64 * 1024, "RSS grew by \((residentKiB() - before) / 1024) MiB")
    }

    /// Requests held back by the budget are handled, in order, as the window opens and the
    /// answers drain: every stream gets its whole answer.
    func testHeldBackRequestsAreAnsweredOnceTheWindowOpens() throws {
        let built = Locked<[String]>([])
        var limits = HTTP2Limits()
        limits.maxUnsentBytes = 256 << 10
        let server = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1024, http2Limits: limits) { r, responder in
            built.withLock { $0.append(r.path) }
            let body = Array(r.path.utf8) + [UInt8](repeating: 0x62, count: 100_000)
            responder.send(HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: body))
        }
        try server.start()
        defer { server.stop() }
        let c = try H2RawClient(port: server.port, preface: false)
        c.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        c.frame(H2RawClient.settings, 0, 0, [0, 4] + H2RawClient.uint32(0))
        let ids = (0..<40).map { Int32(2 * $0 + 1) }
        for id in ids { c.sendRequest(id, "GET", "/s\(id)") }
        while somethingArrives(c, within: 500), let f = c.readFrame() {
            if f.type == H2RawClient.settings && f.flags & 1 == 0 { c.frame(H2RawClient.settings, 1, 0, []) }
        }
        // 256 KiB of 100 KB answers: three built, the third past the budget.
        XCTAssertEqual(built.withLock { $0.count }, 3)
        // The window opens: each stream may take 1 MiB (the connection's is opened as DATA comes).
        c.frame(H2RawClient.settings, 0, 0, [0, 4] + H2RawClient.uint32(1 << 20))
        let answers = c.collect(Set(ids))
        XCTAssertEqual(built.withLock { $0 }, ids.map { "/s\($0)" }, "handled in order")
        for id in ids {
            XCTAssertEqual(answers[id]?.status, 200, "stream \(id)")
            XCTAssertEqual(answers[id]?.body.count, "/s\(id)".utf8.count + 100_000, "stream \(id)")
            XCTAssertEqual(answers[id]?.body.prefix("/s\(id)".utf8.count).elementsEqual("/s\(id)".utf8), true)
        }
    }

    /// This process's resident memory.
    func residentKiB() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " "), statm.count > 1
        else { return 0 }
        return (Int(statm[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
    }
}
