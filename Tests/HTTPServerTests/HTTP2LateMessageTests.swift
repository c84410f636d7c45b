import Foundation
@testable import HTTPServer
import Platform
import XCTest

/// Messages posted to an HTTP/2 connection after it ended (an answer that comes after the client
/// left, a stop racing the end) are dropped: nothing is written to the descriptors the connection
/// closed, which the process may already have reused for something else.
final class HTTP2LateMessageTests: XCTestCase {
    func testAMessagePostedAfterTheEndWritesToNoDescriptor() throws {
        var pair: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        let core = ServerCore(handler: { _, r in r.send(HTTPResponse(status: 200, contentType: "text/plain", body: "ok")) },
                              maxBodyBytes: 1024, accessLog: nil)
        let ended = DispatchSemaphore(value: 0)
        let connection = try XCTUnwrap(HTTP2Connection(transport: PlainTransport(fd: pair[0]), core: core,
                                                       limits: HTTP2Limits(), onEnd: { _ in ended.signal() }))
        Thread.detachNewThread { connection.run() }
        close(pair[1])  // the client leaves before its preface: the connection ends
        XCTAssertEqual(ended.wait(timeout: .now() + 5), .success, "the connection ends when its client leaves")

        // The connection's socket and wake pipe are closed: new socket pairs take the lowest free
        // numbers, theirs among them. A byte written to any of them shows at its peer.
        var reused: [Int32] = []
        for _ in 0..<4 {
            var p: [Int32] = [-1, -1]
            XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &p), 0)
            reused += p
        }
        defer { reused.forEach { close($0) } }

        connection.post(.goAway)
        connection.answer(1, HTTPResponse(status: 200, contentType: "text/plain", body: "late"))
        connection.post(.stop)

        var fds = reused.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        XCTAssertEqual(poll(&fds, nfds_t(fds.count), 100), 0, "a message posted after the end wrote to a reused descriptor")
    }
}
