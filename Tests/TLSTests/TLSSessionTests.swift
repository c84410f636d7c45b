import Foundation
import Platform
import TLS
import XCTest

/// TLS sessions over a socket pair: handshakes with a certificate from the local CA, ALPN, and
/// the client's refusals (unknown CA, wrong host name).
final class TLSSessionTests: XCTestCase {
    private var dir = ""
    private var ca: LocalCertificateAuthority!
    private var credentials: TLSCredentials!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-mock-tls-tests-\(UUID().uuidString)"
        ca = try LocalCertificateAuthority.create(names: ["localhost", "127.0.0.1"], directory: dir)
        credentials = try TLSCredentials(certificate: ca.serverCertificate, key: ca.serverKey)
    }

    override func tearDown() {
        credentials = nil
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Both ends of a handshake over a fresh socket pair (the server on its own thread).
    private struct Ends {
        var server: Result<TLSSession, TLSError>
        var client: Result<TLSSession, TLSError>
        var fds: [Int32]
    }

    private func handshake(serverProtocols: [String] = [], host: String = "localhost", trust: TLSTrust? = nil,
                           clientProtocols: [String] = [], requestingClientCertificate: Bool = false,
                           clientCertificate: (pem: String, keyPEM: String)? = nil) -> Ends {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        for fd in fds { setReceiveTimeout(fd, seconds: 10) }
        let serverResult = Locked<Result<TLSSession, TLSError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let (serverFD, credentials) = (fds[0], credentials!)
        spawnThread {
            let r = Result { () throws(TLSError) -> TLSSession in
                try TLSSession(serverOn: serverFD, credentials: credentials, protocols: serverProtocols,
                               requestingClientCertificate: requestingClientCertificate)
            }
            serverResult.withLock { $0 = r }
            done.signal()
        }
        let client = Result { () throws(TLSError) -> TLSSession in
            try TLSSession(clientOn: fds[1], host: host, trust: trust ?? .caFile(ca.caCertificate), protocols: clientProtocols,
                           certificate: clientCertificate)
        }
        // A refusing client leaves the server mid-handshake: closing its end ends that at once.
        if case .failure = client { shutdown(fds[1], Int32(SHUT_RDWR)) }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        return Ends(server: serverResult.withLock { $0! }, client: client, fds: fds)
    }

    private func close(_ ends: Ends) {
        for fd in ends.fds { Glibc.close(fd) }
    }

    /// A peer that sends a byte now and then renews the socket's receive time-out forever; the
    /// handshake still ends at its deadline.
    func testAHandshakeDribbledByteByByteEndsAtItsDeadline() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { for fd in fds { Glibc.close(fd) } }
        setReceiveTimeout(fds[0], seconds: 1)
        let ended = Locked<Double?>(nil)
        let started = Date()
        let (serverFD, credentials) = (fds[0], credentials!)
        spawnThread {
            _ = try? TLSSession(serverOn: serverFD, credentials: credentials, handshakeSeconds: 2)
            ended.withLock { $0 = Date().timeIntervalSince(started) }
        }
        // A ClientHello's first bytes, one every 0.4 s (more than the record needs never comes).
        let hello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03] + [UInt8](repeating: 7, count: 32)
        for b in hello where ended.withLock({ $0 }) == nil && Date().timeIntervalSince(started) < 8 {
            var byte = b
            // MSG_NOSIGNAL: the session may close its end between the check above and this send
            // (the test process does not ignore SIGPIPE as the server does).
            _ = send(fds[1], &byte, 1, Int32(MSG_NOSIGNAL))
            Thread.sleep(forTimeInterval: 0.4)
        }
        let took = try XCTUnwrap(ended.withLock { $0 }, "still handshaking after 8 s")
        XCTAssertGreaterThanOrEqual(took, 1.9)
        XCTAssertLessThan(took, 4, "the deadline, not the dribble, ended it")
    }

    func testHandshakeWithTheLocalCAAndBytesBothWays() throws {
        let ends = handshake()
        defer { close(ends) }
        let server = try ends.server.get(), client = try ends.client.get()
        XCTAssertEqual(client.peerCertificateCount, 1)
        XCTAssertNil(client.negotiatedProtocol, "no ALPN offered")
        XCTAssertTrue(client.write(Array("ping".utf8)))
        var buf = [UInt8](repeating: 0, count: 64)
        var n = buf.withUnsafeMutableBytes { server.read($0.baseAddress!, $0.count) }
        XCTAssertEqual(String(decoding: buf[0..<max(0, n)], as: UTF8.self), "ping")
        let big = [UInt8](repeating: 7, count: 100_000)  // several records: written whole
        let received = client.readInBackground(upTo: big.count)
        XCTAssertTrue(server.write(big))
        XCTAssertEqual(received(), big)
        server.bye()
        n = buf.withUnsafeMutableBytes { client.read($0.baseAddress!, $0.count) }
        XCTAssertEqual(n, 0, "the closing alert ends the stream")
    }

    func testALPNTheServerPicksFromWhatTheClientOffers() throws {
        let both = handshake(serverProtocols: ["h2", "http/1.1"], clientProtocols: ["h2", "http/1.1"])
        defer { close(both) }
        XCTAssertEqual(try both.server.get().negotiatedProtocol, "h2")
        XCTAssertEqual(try both.client.get().negotiatedProtocol, "h2")

        let serverOrder = handshake(serverProtocols: ["h2", "http/1.1"], clientProtocols: ["http/1.1", "h2"])
        defer { close(serverOrder) }
        XCTAssertEqual(try serverOrder.server.get().negotiatedProtocol, "h2", "the server's preference wins")
        XCTAssertEqual(try serverOrder.client.get().negotiatedProtocol, "h2")

        let http1 = handshake(serverProtocols: ["http/1.1"], clientProtocols: ["h2", "http/1.1"])
        defer { close(http1) }
        XCTAssertEqual(try http1.server.get().negotiatedProtocol, "http/1.1")
        XCTAssertEqual(try http1.client.get().negotiatedProtocol, "http/1.1")

        let clientOnly = handshake(clientProtocols: ["h2", "http/1.1"])
        defer { close(clientOnly) }
        XCTAssertNil(try clientOnly.server.get().negotiatedProtocol, "a server offering none picks none")
        XCTAssertNil(try clientOnly.client.get().negotiatedProtocol)
    }

    func testClientRefusesAnUnknownCA() throws {
        let other = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir + "/other")
        let ends = handshake(trust: .caFile(other.caCertificate))
        defer { close(ends) }
        guard case .failure(let error) = ends.client else { return XCTFail("trusted a certificate of another CA") }
        XCTAssertTrue(error.description.hasPrefix("TLS with localhost failed: "), error.description)
        guard case .failure = ends.server else { return XCTFail("the server finished a refused handshake") }
    }

    func testClientRefusesAWrongHostName() throws {
        let ends = handshake(host: "fcm.googleapis.com")
        defer { close(ends) }
        guard case .failure(let error) = ends.client else { return XCTFail("accepted a certificate for other names") }
        XCTAssertTrue(error.description.hasPrefix("TLS with fcm.googleapis.com failed: "), error.description)
        let byIP = handshake(host: "127.0.0.1")
        defer { close(byIP) }
        XCTAssertNoThrow(try byIP.client.get(), "an IP address entry names the server too")
    }

    func testTrustingAnyoneAcceptsASelfSignedCertificate() throws {
        credentials = try TLSCredentials.selfSigned(names: ["localhost"], directory: dir)
        let strict = handshake()
        defer { close(strict) }
        guard case .failure = strict.client else { return XCTFail("a self-signed certificate passed the CA check") }
        let lax = handshake(host: "fcm-xmpp.googleapis.com", trust: .anyone)
        defer { close(lax) }
        XCTAssertEqual(try lax.client.get().peerCertificateCount, 1)
        XCTAssertNoThrow(try lax.server.get())
    }

    /// An extension of the test's own (a DER UTF8String under a private OID), as the APNs room
    /// puts Apple's topics and environment markers in its certificates.
    static let testOID = "1.3.6.1.4.1.55555.1.1"
    static let testValue: [UInt8] = [0x0C, 0x05] + Array("hello".utf8)

    /// Client-certificate authentication: the server asks for a client certificate, reads its UID
    /// and extensions after the handshake, and still takes a client without one.
    func testTheServerRequestsAClientCertificateAndReadsItsExtensions() throws {
        let issued = try ca.issueClientCertificate(commonName: "Test Client: com.example.demo.ios", uid: "com.example.demo.ios",
                                                   extensions: [(Self.testOID, Self.testValue)])
        let withCert = handshake(clientProtocols: ["h2"], requestingClientCertificate: true,
                                 clientCertificate: (issued.certificatePEM, issued.privateKeyPEM))
        defer { close(withCert) }
        let server = try withCert.server.get()
        let der = try XCTUnwrap(server.peerCertificate, "the client's certificate reached the server")
        XCTAssertTrue(ca.hasIssued(der))
        let read = try ClientCertificate(der: der, extensions: [Self.testOID, "1.3.6.1.4.1.55555.1.2"])
        XCTAssertEqual(read.uid, "com.example.demo.ios")
        XCTAssertEqual(read.extensions, [Self.testOID: Self.testValue], "the extension asked for and present, byte for byte; no other")
        XCTAssertEqual(read.serial, issued.serial)
        XCTAssertNotNil(try withCert.client.get().peerCertificate, "the client sees the server's certificate")

        let without = handshake(requestingClientCertificate: true)
        defer { close(without) }
        XCTAssertNil(try without.server.get().peerCertificate, "a client without a certificate still connects")
        XCTAssertNoThrow(try without.client.get())

        let notAsked = handshake(clientCertificate: (issued.certificatePEM, issued.privateKeyPEM))
        defer { close(notAsked) }
        XCTAssertNil(try notAsked.server.get().peerCertificate, "a server that does not ask gets none")
    }

    /// A certificate from another authority reaches the server too (the request never requires
    /// or checks), and `hasIssued` tells it apart.
    func testACertificateOfAnotherAuthorityIsSeenButNotIssuedHere() throws {
        let other = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir + "/other")
        let foreign = try other.issueClientCertificate(commonName: "Test Client", uid: "com.example.demo.ios",
                                                       extensions: [(Self.testOID, Self.testValue)])
        let ends = handshake(requestingClientCertificate: true, clientCertificate: (foreign.certificatePEM, foreign.privateKeyPEM))
        defer { close(ends) }
        let der = try XCTUnwrap(try ends.server.get().peerCertificate)
        XCTAssertFalse(ca.hasIssued(der))
        XCTAssertTrue(other.hasIssued(der))
        XCTAssertEqual(try ClientCertificate(der: der, extensions: [Self.testOID]).extensions[Self.testOID], Self.testValue)
    }
}
