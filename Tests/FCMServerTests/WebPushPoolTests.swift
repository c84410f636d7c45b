import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import Platform
@testable import TLS
@testable import WebPush
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Web Push bodies decrypted on the room's pool, off the HTTP threads (docs/performance.md, "Web
/// Push off the HTTP threads"): pushes to one device keep the order they came in, many devices
/// from many connections all decrypt, and a server stopping with pushes under way does not hang.
final class WebPushPoolTests: XCTestCase {
    var server: TestServer!
    let vapidKey = try! P256PrivateKey()

    /// Every push decrypted on the pool, HTTP/1.1's too (by default those decrypt on their loop).
    override func setUpWithError() throws {
        setenv("FCM_MOCK_WEBPUSH_HANDOFF", "all", 1)
        server = try TestServer()
    }

    override func tearDown() {
        server?.stop()
        unsetenv("FCM_MOCK_WEBPUSH_HANDOFF")
    }

    typealias Subscription = WebPushTests.Subscription

    func subscribe(online: Bool = true, boundTo key: P256PrivateKey? = nil) throws -> Subscription {
        try WebPushTests.subscribe(on: server, online: online, boundTo: key)
    }

    var origin: String { "http://127.0.0.1:\(server.port)" }

    func unescaped(_ s: String) -> String { s.replacingOccurrences(of: "%25", with: "%") }

    func vapid() throws -> (String, String) {
        let now = Int64(Date().timeIntervalSince1970)
        let claims = #"{"aud":"\#(origin)","exp":\#(now + 3600),"sub":"mailto:ops@example.com"}"#
        let input = base64URLEncode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        let token = input + "." + base64URLEncode(try vapidKey.signES256(Array(input.utf8)))
        return ("Authorization", "vapid t=\(token), k=\(vapidKey.publicKey.base64URL)")
    }

    func encrypt(_ text: String, for s: Subscription) throws -> [UInt8] {
        try WebPushCrypto.encrypt(aes128gcm: Array(text.utf8), to: s.p256dh, authSecret: s.auth)
    }

    func get(_ path: String) throws -> JSONObject {
        try XCTUnwrap(try server.client().request("GET", path).object, path)
    }

    /// `count` pushes pipelined on one HTTP/1.1 connection, written in one go, then their answers
    /// in order (nil once the connection ends).
    func pipelined(_ requests: [[UInt8]]) throws -> [WireResponse?] {
        try Self.pipelined(port: server.port, requests)
    }

    static func pipelined(port: Int, _ requests: [[UInt8]]) throws -> [WireResponse?] {
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let all = requests.flatMap { $0 }
        var written = 0
        while written < all.count {
            let n = all[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestError("write failed") }
            written += n
        }
        var buffer: [UInt8] = []
        var answers: [WireResponse?] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        func readMore() -> Bool {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return false }
            buffer += chunk[0..<n]
            return true
        }
        while answers.count < requests.count {
            let end = Array("\r\n\r\n".utf8)
            var headEnd: Int?
            while headEnd == nil {
                if buffer.count >= 4 {
                    headEnd = (0...(buffer.count - 4)).first { buffer[$0..<$0 + 4].elementsEqual(end) }
                }
                if headEnd == nil && !readMore() { break }
            }
            guard let h = headEnd else {
                answers += [WireResponse?](repeating: nil, count: requests.count - answers.count)
                break
            }
            let head = String(decoding: buffer[0..<h], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            let status = Int(lines[0].split(separator: " ")[1]) ?? 0
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            while buffer.count < h + 4 + length { if !readMore() { break } }
            let body = Array(buffer[(h + 4)..<min(buffer.count, h + 4 + length)])
            buffer.removeFirst(min(buffer.count, h + 4 + length))
            answers.append(WireResponse(status: status, headers: headers, body: body))
        }
        return answers
    }

    func pushRequest(_ path: String, _ headers: [(String, String)], _ body: [UInt8]) -> [UInt8] {
        var head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: \(body.count)\r\n"
        for (n, v) in headers { head += "\(n): \(v)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    func messageID(_ r: WireResponse?) throws -> String {
        let location = try XCTUnwrap(r?.headers["location"], "\(String(describing: r?.status)) \(r?.text ?? "")")
        return unescaped(String(location.dropFirst((origin + "/m/").count)))
    }

    /// Every inbox entry of a device, oldest first.
    func entries(_ token: String) throws -> [JSONObject] {
        let items = try XCTUnwrap(try get("/api/v1/devices/\(token)/messages?limit=1000&order=newest")["items"]?.arrayValue)
        return items.compactMap(\.objectValue).reversed()
    }

    /// Thirty pushes to one offline device, pipelined on one connection (at most the 32 a connection
    /// takes at once) with the same `Topic`,
    /// some without a body and some that do not decrypt: taken in the order they came (ids as the
    /// device's inbox orders them), each replacing the one before, the last one held.
    func testPushesToOneDeviceKeepTheirOrder() throws {
        let s = try subscribe(online: false)
        let stranger = try P256PrivateKey()
        var requests: [[UInt8]] = []
        var expected: [String] = []
        for i in 0..<30 {
            var h = [("TTL", "3600"), ("Topic", "score"), try vapid()]
            let body: [UInt8]
            switch i % 10 {
            case 3:
                body = []
                expected.append("")
            case 7:
                body = try WebPushCrypto.encrypt(aes128gcm: Array("x".utf8), to: stranger.publicKey, authSecret: s.auth)
                expected.append("undecryptable")
            default:
                body = try encrypt("push \(i)", for: s)
                expected.append("push \(i)")
            }
            if !body.isEmpty { h.append(("Content-Encoding", "aes128gcm")) }
            requests.append(pushRequest(s.path, h, body))
        }
        let answers = try pipelined(requests)
        XCTAssertEqual(answers.map { $0?.status }, [Int?](repeating: 201, count: 30))
        let ids = try answers.map(messageID)
        let inbox = try entries(s.token)
        XCTAssertEqual(inbox.compactMap { $0["message_id"]?.stringValue }, ids, "the inbox's order is the order the pushes came in")
        for (i, e) in inbox.enumerated() {
            let block = e["webpush"]?.objectValue
            switch expected[i] {
            case "": XCTAssertEqual(block?["plaintext"], .null)
            case "undecryptable": XCTAssertNotEqual(block?["decrypt_error"], .null, "\(i)")
            default: XCTAssertEqual(block?["plaintext"]?.stringValue, expected[i], "\(i)")
            }
        }
        // Topic replacement ends with the last push: it alone is held, every other was replaced.
        XCTAssertEqual(inbox.last?["status"]?.stringValue, "pending")
        let earlier = Set(inbox.dropLast().compactMap { $0["status"]?.stringValue })
        XCTAssertFalse(earlier.contains("pending"), "\(earlier)")
    }

    /// Four connections at once, each pipelining pushes to three devices: every push answered
    /// 201 and delivered decrypted, and each device's pushes from one connection in their order.
    func testManyDevicesFromManyConnectionsAllDecrypt() throws {
        let subs = try (0..<3).map { _ in try subscribe() }
        let results = Locked<[Int: [WireResponse?]]>([:])
        let errors = Locked<[String]>([])
        let perConnection = try (0..<4).map { c in
            try (0..<30).map { i in
                pushRequest(subs[i % 3].path, [("TTL", "60"), ("Content-Encoding", "aes128gcm"), try vapid()],
                            try encrypt("c\(c) n\(i)", for: subs[i % 3]))
            }
        }
        let port = server.port
        DispatchQueue.concurrentPerform(iterations: 4) { c in
            do {
                let answers = try Self.pipelined(port: port, perConnection[c])
                results.withLock { $0[c] = answers }
            } catch {
                errors.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(errors.withLock { $0 }, [])
        let all = results.withLock { $0 }
        XCTAssertEqual(all.values.flatMap { $0 }.filter { $0?.status == 201 }.count, 120)
        for (k, s) in subs.enumerated() {
            let inbox = try entries(s.token)
            XCTAssertEqual(inbox.count, 40)
            XCTAssertEqual(Set(inbox.compactMap { $0["status"]?.stringValue }), ["delivered"])
            let texts = inbox.compactMap { $0["webpush"]?.objectValue?["plaintext"]?.stringValue }
            for c in 0..<4 {
                let mine = texts.filter { $0.hasPrefix("c\(c) ") }
                XCTAssertEqual(mine, stride(from: k, to: 30, by: 3).map { "c\(c) n\($0)" })
            }
        }
    }

    /// Pushes over h2c (h2load: one connection, 20 streams at once): all decrypted and delivered.
    func testParallelPushesOverH2C() throws {
        let s = try subscribe(boundTo: vapidKey)
        let body = try encrypt(#"{"title":"h2 pool"}"#, for: s)
        let file = NSTemporaryDirectory() + "wp-pool-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data(body).write(to: URL(fileURLWithPath: file))
        let (name, value) = try vapid()
        let r = try runProcess(try HTTP2Tests.tool("h2load"), ["-n", "60", "-c", "1", "-m", "20", "-d", file, "-H", "TTL: 60",
                                                               "-H", "Content-Encoding: aes128gcm", "-H", "\(name): \(value)",
                                                               "http://127.0.0.1:\(server.port)\(s.path)"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("60 succeeded, 0 failed, 0 errored"), r.stdout)
        XCTAssertTrue(r.stdout.contains("status codes: 60 2xx"), r.stdout)
        let inbox = try entries(s.token)
        XCTAssertEqual(inbox.count, 60)
        XCTAssertEqual(Set(inbox.compactMap { $0["status"]?.stringValue }), ["delivered"])
        XCTAssertEqual(Set(inbox.compactMap { $0["webpush"]?.objectValue?["plaintext"]?.stringValue }), [#"{"title":"h2 pool"}"#])
    }

    /// The server stopped with pushes being decrypted: stop returns promptly, and every push
    /// written was answered 201 or the stopping 503, or its connection closed.
    func testStopWithPushesUnderWayDoesNotHang() throws {
        let s = try subscribe()
        let requests = try (0..<30).map { i in
            pushRequest(s.path, [("TTL", "60"), ("Content-Encoding", "aes128gcm"), try vapid()], try encrypt("p\(i)", for: s))
        }
        let answers = Locked<[WireResponse?]>([])
        let done = DispatchSemaphore(value: 0)
        let port = server.port
        DispatchQueue.global().async {
            let a = (try? Self.pipelined(port: port, requests)) ?? []
            answers.withLock { $0 = a }
            done.signal()
        }
        usleep(20_000)
        let started = monotonicNanos()
        server.stop()
        let stopMillis = (monotonicNanos() - started) / 1_000_000
        XCTAssertLessThan(stopMillis, 5_000, "stop took \(stopMillis) ms")
        XCTAssertEqual(done.wait(timeout: .now() + 25), .success, "the client was never answered nor closed")
        for a in answers.withLock({ $0 }) {
            if let a { XCTAssertTrue([201, 503].contains(a.status), "\(a.status) \(a.text)") }
        }
        server = nil
    }

    /// The pool itself: jobs run, in order on one thread, and its threads end once idle.
    func testWorkerPoolRunsJobsAndEndsIdleThreads() throws {
        let pool = WorkerPool(threads: 2, idleMillis: 50)
        let ran = Locked<Int>(0)
        let group = DispatchGroup()
        for _ in 0..<100 {
            group.enter()
            pool.run {
                ran.withLock { $0 += 1 }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(ran.withLock { $0 }, 100)
        XCTAssertLessThanOrEqual(pool.runningThreads, 2)
        let deadline = monotonicNanos() + 5_000_000_000
        while pool.runningThreads > 0 && monotonicNanos() < deadline { usleep(10_000) }
        XCTAssertEqual(pool.runningThreads, 0, "idle threads end")
        // After stop, a job runs on its caller.
        pool.stop()
        var here = false
        let me = pthread_self()
        pool.run { XCTAssertTrue(pthread_equal(me, pthread_self()) != 0) }
        here = true
        XCTAssertTrue(here)
    }

    /// The order of pushes to one device: places finished out of order run in order, on the
    /// thread that finishes the one whose turn it is.
    func testPushOrderRunsPlacesInTheirOrder() {
        let order = WebPushPushOrder()
        let log = Locked<[Int]>([])
        let places = (0..<5).map { _ in order.take("d") }
        XCTAssertEqual(places, [0, 1, 2, 3, 4])
        XCTAssertTrue(order.isBusy("d"))
        order.finish("d", 3) { log.withLock { $0.append(3) } }
        order.finish("d", 1) { log.withLock { $0.append(1) } }
        XCTAssertEqual(log.withLock { $0 }, [])
        order.finish("d", 0) { log.withLock { $0.append(0) } }
        XCTAssertEqual(log.withLock { $0 }, [0, 1])
        order.finish("d", 2) { log.withLock { $0.append(2) } }
        XCTAssertEqual(log.withLock { $0 }, [0, 1, 2, 3])
        order.finish("d", 4) { log.withLock { $0.append(4) } }
        XCTAssertEqual(log.withLock { $0 }, [0, 1, 2, 3, 4])
        XCTAssertFalse(order.isBusy("d"), "an empty line is forgotten")
        XCTAssertEqual(order.take("d"), 0)
    }
}
