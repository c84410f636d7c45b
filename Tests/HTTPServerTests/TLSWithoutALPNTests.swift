import Foundation
import HTTPServer
import Platform
import TLS
import XCTest

/// The HTTPS port and clients that offer no ALPN (aioapns and some other APNs clients): the
/// first bytes after the handshake decide, the HTTP/2 preface making the connection HTTP/2 and
/// anything else HTTP/1.1; and the client certificate the port asks for (never requires)
/// reaching the handler.
final class TLSWithoutALPNTests: XCTestCase {
    private var dir = ""
    private var ca: LocalCertificateAuthority!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-mock-alpn-tests-\(UUID().uuidString)"
        ca = try LocalCertificateAuthority.create(names: ["127.0.0.1", "localhost"], directory: dir)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A server whose HTTPS port answers every request with its body, and in headers the
    /// protocol it came over and the client certificate it carried (its DER in base64, or
    /// `none`).
    private func server() throws -> HTTPServer {
        let credentials = try TLSCredentials(certificate: ca.serverCertificate, key: ca.serverKey)
        let s = try HTTPServer(host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, https: HTTPSListenerOptions(port: 0, credentials: credentials)) {
            r, responder in
            responder.send(HTTPResponse(status: 200, headers: [("x-protocol", r.isHTTP2 ? "h2" : "http/1.1"), ("x-secure", String(r.isSecure)),
                                                                ("x-client-certificate", r.clientCertificate.map { Data($0).base64EncodedString() } ?? "none")],
                                        body: r.body))
        }
        try s.start()
        addTeardownBlock { s.stop() }
        return s
    }

    /// A TLS connection to `port` offering `protocols` (none: no ALPN extension at all), with
    /// `certificate` when given; the returned descriptor is the plain end of a socket pair a
    /// thread pumps through the session.
    private func connect(_ port: Int, protocols: [String] = [], certificate: (pem: String, keyPEM: String)? = nil) throws -> Int32 {
        let tcp = try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: 10)
        let session: TLSSession
        do {
            session = try TLSSession(clientOn: tcp, host: "127.0.0.1", trust: .caFile(ca.caCertificate), protocols: protocols,
                                     certificate: certificate)
        } catch {
            close(tcp)
            throw error
        }
        XCTAssertNil(session.negotiatedProtocol)
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { throw SocketError("socketpair failed") }
        setReceiveTimeout(pair[0], seconds: 10)
        let local = pair[1]
        spawnThread { RawHTTP1.pump(session, tcp, local) }
        return pair[0]
    }

    /// Everything the server sends until it closes the connection.
    private func readAll(_ fd: Int32) -> String {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    func testThePrefaceWithoutALPNIsServedAsHTTP2() throws {
        let s = try server()
        let port = try XCTUnwrap(s.httpsPort)
        let c = H2RawClient(fd: try connect(port))
        c.sendRequest(1, "POST", "/echo", body: Array("over h2 without ALPN".utf8))
        c.sendRequest(3, "GET", "/again")
        let answers = c.collect([1, 3])
        XCTAssertEqual(answers[1]?.status, 200)
        XCTAssertEqual(answers[1]?.text, "over h2 without ALPN")
        for id: Int32 in [1, 3] {
            let headers = answers[id]?.headers ?? []
            XCTAssertTrue(headers.contains { $0 == ("x-protocol", "h2") }, "\(headers)")
            XCTAssertTrue(headers.contains { $0 == ("x-secure", "true") }, "\(headers)")
            XCTAssertTrue(headers.contains { $0 == ("x-client-certificate", "none") }, "\(headers)")
        }
    }

    func testAPrefaceThatArrivesInPiecesIsStillHTTP2() throws {
        let s = try server()
        let fd = try connect(try XCTUnwrap(s.httpsPort))
        let c = H2RawClient(fd: fd, preface: false)
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        c.write(Array(preface[0..<5]))
        usleep(150_000)
        c.write(Array(preface[5...]))
        c.frame(H2RawClient.settings, 0, 0, [])
        c.sendRequest(1, "POST", "/echo", body: Array("pieces".utf8))
        let a = c.collect([1])[1]
        XCTAssertEqual(a?.status, 200)
        XCTAssertEqual(a?.text, "pieces")
    }

    /// A client without ALPN whose first record comes in two parts, the rest 3 s after the
    /// first bytes: the read of half a record is bounded by the 2 s sniffing deadline (not the
    /// socket's 10 s time-out), so the connection is taken as HTTP/1.1 by then, and the preface
    /// that completes later reaches HTTP/1.1, which answers it.
    func testHalfARecordDoesNotHoldTheDecisionPastTheDeadline() throws {
        let s = try server()
        let tcp = try ConnectSocket.open(host: "127.0.0.1", port: try XCTUnwrap(s.httpsPort), receiveTimeout: 10)
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { throw SocketError("socketpair failed") }
        let (mine, relay) = (pair[0], pair[1])
        defer {
            shutdown(tcp, Int32(SHUT_RDWR))
            close(mine)
        }
        setReceiveTimeout(mine, seconds: 10)
        // The session runs over `mine`; two threads relay between `relay` and the server, the
        // client's bytes cut in two when `split` is set.
        let split = Locked(false)
        spawnThread {
            var b = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = recv(tcp, &b, b.count, 0)
                if n <= 0 || send(relay, b, n, Int32(MSG_NOSIGNAL)) != n { break }
            }
            shutdown(relay, Int32(SHUT_RDWR))
        }
        spawnThread {
            var b = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = recv(relay, &b, b.count, 0)
                if n <= 0 { break }
                if split.withLock({ $0 }) && n > 10 {
                    _ = send(tcp, b, 10, Int32(MSG_NOSIGNAL))
                    sleep(3)
                    _ = send(tcp, Array(b[10..<n]), n - 10, Int32(MSG_NOSIGNAL))
                } else if send(tcp, b, n, Int32(MSG_NOSIGNAL)) != n {
                    break
                }
            }
            close(relay)
            close(tcp)
        }
        let session = try TLSSession(clientOn: mine, host: "127.0.0.1", trust: .caFile(ca.caCertificate))
        usleep(300_000)  // the handshake's last bytes are through
        split.withLock { $0 = true }
        XCTAssertTrue(session.write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)))
        var answer = [UInt8](repeating: 0, count: 4096)
        let n = session.read(&answer, answer.count)
        XCTAssertGreaterThan(n, 0)
        let text = String(decoding: answer[0..<max(n, 0)], as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 "), "taken as HTTP/1.1 at the deadline, not HTTP/2 when the record completed: \(answer[0..<max(n, 0)])")
    }

    /// `request` written as it is on a new TLS connection without ALPN; everything the server
    /// answers until it closes.
    private func http1Exchange(_ request: String) throws -> String {
        let s = try server()
        let fd = try connect(try XCTUnwrap(s.httpsPort))
        defer { close(fd) }
        _ = request.withCString { send(fd, $0, request.utf8.count, Int32(MSG_NOSIGNAL)) }
        return readAll(fd)
    }

    func testHTTP1WithoutALPNIsServedAsHTTP1() throws {
        let answer = try http1Exchange("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 "), answer)
        XCTAssertTrue(answer.lowercased().contains("x-protocol: http/1.1\r\n"), answer)
        XCTAssertTrue(answer.lowercased().contains("x-secure: true\r\n"), answer)
        XCTAssertTrue(answer.hasSuffix("\r\n\r\nhello"), answer)
    }

    /// "PRI" then something else than the preface: HTTP/1.1 (where PRI is a method like any).
    func testBytesThatStopMatchingThePrefaceGoToHTTP1() throws {
        let answer = try http1Exchange("PRI /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 "), answer)
        XCTAssertTrue(answer.lowercased().contains("x-protocol: http/1.1\r\n"), answer)
    }

    /// ALPN still decides when the client offers it.
    func testALPNStillChoosesWhenOffered() throws {
        let s = try server()
        let port = try XCTUnwrap(s.httpsPort)
        let tcp = try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: 10)
        defer { close(tcp) }
        let session = try TLSSession(clientOn: tcp, host: "127.0.0.1", trust: .caFile(ca.caCertificate), protocols: ["h2", "http/1.1"])
        XCTAssertEqual(session.negotiatedProtocol, "h2")
        session.bye()
    }

    /// The port asks for a certificate: a client that has one gives it, and every request of its
    /// connection carries it; a client without one is served all the same (above).
    func testAClientCertificateReachesEveryRequestOfItsConnection() throws {
        let s = try server()
        let port = try XCTUnwrap(s.httpsPort)
        let issued = try ca.issueClientCertificate(commonName: "Test Client: com.example.demo.ios", uid: "com.example.demo.ios",
                                                   extensions: [])
        let der = try ClientCertificate(pem: issued.certificatePEM)
        XCTAssertEqual(der.uid, "com.example.demo.ios")
        let c = H2RawClient(fd: try connect(port, certificate: (issued.certificatePEM, issued.privateKeyPEM)))
        c.sendRequest(1, "GET", "/one")
        c.sendRequest(3, "GET", "/two")
        let answers = c.collect([1, 3])
        // The PEM's base64 lines are the certificate's DER.
        let issuedDER = issued.certificatePEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        XCTAssertEqual(Data(base64Encoded: issuedDER)?.count ?? 0 > 100, true)
        for id: Int32 in [1, 3] {
            let carried = answers[id]?.headers.first { $0.0 == "x-client-certificate" }?.1
            XCTAssertEqual(carried, issuedDER, "stream \(id): \(answers[id]?.headers ?? [])")
        }
    }
}
