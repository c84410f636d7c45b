import Foundation
import Platform
import TLS
import XCTest

/// The non-blocking server session over real TCP sockets, driven by `poll` as a loop would: the
/// handshake in steps, reads, writes a peer does not take (then takes), the closing alert. (What
/// an idle session costs in memory is measured by `bash bench/run.sh tls-sessions`.)
final class NonBlockingSessionTests: XCTestCase {
    private static let credentials: TLSCredentials = {
        try! TLSCredentials.selfSigned(names: ["localhost", "127.0.0.1"], directory: NSTemporaryDirectory())
    }()

    /// A listening socket on 127.0.0.1 and its port.
    private func listener() throws -> (Int32, Int) {
        try ListenSocket.open(host: "127.0.0.1", port: 0)
    }

    private func acceptNonBlocking(_ lfd: Int32) -> Int32 {
        let fd = accept(lfd, nil, nil)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    /// Waits (up to 5 s) until `fd` is ready the way the session's last `.wouldBlock` wanted.
    private func waitReady(_ fd: Int32, _ session: NonBlockingTLSSession) {
        var p = pollfd(fd: fd, events: Int16(session.wantsWrite ? POLLOUT : POLLIN), revents: 0)
        _ = poll(&p, 1, 5000)
    }

    /// Drives the handshake to its end, waiting for the socket between steps.
    private func handshake(_ session: NonBlockingTLSSession, _ fd: Int32) {
        while true {
            switch session.handshake() {
            case .done: return
            case .wouldBlock: waitReady(fd, session)
            case .failed(let why): return XCTFail(why)
            }
        }
    }

    func testHandshakeReadsWritesAndBye() throws {
        let (lfd, port) = try listener()
        defer { close(lfd) }
        let client = Locked<TLSSession?>(nil)
        let connected = DispatchSemaphore(value: 0)
        spawnThread {
            let fd = try! ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: 10)
            client.withLock { $0 = try! TLSSession(clientOn: fd, host: "localhost", trust: .anyone) }
            connected.signal()
        }
        let fd = acceptNonBlocking(lfd)
        defer { close(fd) }
        let server = try NonBlockingTLSSession(serverOn: fd, credentials: Self.credentials)
        XCTAssertFalse(server.isHandshakeDone)
        handshake(server, fd)
        XCTAssertTrue(server.isHandshakeDone)
        XCTAssertEqual(connected.wait(timeout: .now() + 10), .success)
        let c = try XCTUnwrap(client.withLock { $0 })

        // Nothing to read yet: wouldBlock, not an error.
        var buf = [UInt8](repeating: 0, count: 16 << 10)
        XCTAssertEqual(buf.withUnsafeMutableBytes { server.read(into: $0.baseAddress!, max: $0.count) }, .wouldBlock)
        XCTAssertTrue(c.write(Array("hello".utf8)))
        var got: [UInt8] = []
        while got.count < 5 {
            switch buf.withUnsafeMutableBytes({ server.read(into: $0.baseAddress!, max: $0.count) }) {
            case .bytes(let n): got += buf[0..<n]
            case .wouldBlock: waitReady(fd, server)
            case let other: return XCTFail("\(other)")
            }
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "hello")

        // 8 MiB to a client that reads nothing yet: the socket fills and the session says so.
        let big = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var sent = 0
        var blocked = false
        while sent < big.count && !blocked {
            switch big.withUnsafeBytes({ server.write(UnsafeRawBufferPointer(rebasing: $0[sent...])) }) {
            case .wrote(let n): sent += n
            case .wouldBlock: blocked = true
            case .failed(let why): return XCTFail(why)
            }
        }
        XCTAssertTrue(blocked, "a peer that does not read fills the socket")
        XCTAssertTrue(server.wantsWrite)
        // The client reads on another thread while this one goes on writing the same bytes.
        let received = c.readInBackground(upTo: big.count)
        while sent < big.count {
            switch big.withUnsafeBytes({ server.write(UnsafeRawBufferPointer(rebasing: $0[sent...])) }) {
            case .wrote(let n): sent += n
            case .wouldBlock: waitReady(fd, server)
            case .failed(let why): return XCTFail(why)
            }
        }
        XCTAssertTrue(received() == big, "every byte, once, in order")

        // The client's closing alert reads as the end; the server's own goes out without waiting.
        c.bye()
        var end = false
        while !end {
            switch buf.withUnsafeMutableBytes({ server.read(into: $0.baseAddress!, max: $0.count) }) {
            case .end: end = true
            case .wouldBlock: waitReady(fd, server)
            case let other: return XCTFail("\(other)")
            }
        }
        server.bye()
    }

    func testHandshakeWithPlainBytesFails() throws {
        let (lfd, port) = try listener()
        defer { close(lfd) }
        let cfd = try ConnectSocket.open(host: "127.0.0.1", port: port)
        defer { close(cfd) }
        let fd = acceptNonBlocking(lfd)
        defer { close(fd) }
        let server = try NonBlockingTLSSession(serverOn: fd, credentials: Self.credentials)
        XCTAssertEqual(server.handshake(), .wouldBlock, "nothing sent yet")
        let plain = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        _ = plain.withUnsafeBytes { send(cfd, $0.baseAddress, $0.count, 0) }
        var result = NonBlockingTLSSession.Progress.wouldBlock
        for _ in 0..<10 where result == .wouldBlock {
            waitReady(fd, server)
            result = server.handshake()
        }
        guard case .failed = result else { return XCTFail("\(result)") }
    }
}

extension TLSSession {
    /// Starts `read(upTo:)` on a thread of its own; the call returned waits for it (nil after
    /// 20 s).
    func readInBackground(upTo count: Int) -> () -> [UInt8]? {
        let got = Locked<[UInt8]?>(nil)
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            let bytes = self.read(upTo: count)
            got.withLock { $0 = bytes }
            done.signal()
        }
        return { done.wait(timeout: .now() + 20) == .success ? got.withLock { $0 } : nil }
    }

    /// Reads (blocking) until `count` bytes came or the stream ended or failed.
    func read(upTo count: Int) -> [UInt8] {
        var got: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while got.count < count {
            let k = chunk.withUnsafeMutableBytes { read($0.baseAddress!, $0.count) }
            if k <= 0 { break }
            got += chunk[0..<k]
        }
        return got
    }
}
