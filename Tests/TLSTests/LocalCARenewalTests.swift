import Foundation
import TLS
import XCTest

/// A kept local CA whose server certificate no longer fits (fewer host names than this version
/// serves, or close to its end) gets a new server certificate from the same CA: clients that
/// trust `ca.pem` keep trusting the server.
final class LocalCARenewalTests: XCTestCase {
    private var dir = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "fcm-mock-ca-renewal-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func read(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    func testAServerCertificateLackingANameIsMadeAgainByTheSameCA() throws {
        // As an older version left it, with a name of the user's own (`fcm-mock cert --host`).
        let old = try LocalCertificateAuthority.create(names: ["localhost", "127.0.0.1", "push.example.test"], directory: dir)
        let (caPEM, serverPEM) = (try read(old.caCertificate), try read(old.serverCertificate))

        let names = ["localhost", "127.0.0.1", "::1", "mtalk.google.com"]
        let (ca, created, renewed) = try LocalCertificateAuthority.loadOrCreate(names: names, directory: dir)
        XCTAssertFalse(created)
        XCTAssertEqual(renewed, "its server certificate did not name every host this version serves: the CA signed a new one")
        XCTAssertEqual(try read(ca.caCertificate), caPEM, "the CA itself is kept")
        XCTAssertNotEqual(try read(ca.serverCertificate), serverPEM)
        let mode = try FileManager.default.attributesOfItem(atPath: ca.serverKey)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600, "the new key is private")

        // It serves the new name to a client that trusts the old ca.pem, and loads as credentials.
        XCTAssertNoThrow(try TLSCredentials(certificate: ca.serverCertificate, key: ca.serverKey))
        try handshake(ca: ca, host: "mtalk.google.com")
        try handshake(ca: ca, host: "push.example.test")  // the user's own name is kept
        XCTAssertNil(try LocalCertificateAuthority.loadOrCreate(names: ["push.example.test", "127.0.0.1"], directory: dir).renewed)

        // Once it fits, it is kept as it is.
        let again = try LocalCertificateAuthority.loadOrCreate(names: names, directory: dir)
        XCTAssertNil(again.renewed)
        XCTAssertEqual(try read(ca.serverCertificate), try read(again.authority.serverCertificate))
        let fewer = try LocalCertificateAuthority.loadOrCreate(names: ["MTALK.google.com"], directory: dir)
        XCTAssertNil(fewer.renewed, "a subset fits; DNS names match without regard to case")
    }

    func testAServerCertificateNearItsEndIsMadeAgain() throws {
        let now = Int(time(nil))
        // Made 720 days ago: the server certificate (two years) ends in 10 days.
        let old = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir, now: now - 720 * 86_400)
        let caPEM = try read(old.caCertificate)
        let (ca, created, renewed) = try LocalCertificateAuthority.loadOrCreate(names: ["localhost"], directory: dir, now: now)
        XCTAssertFalse(created)
        XCTAssertEqual(renewed, "its server certificate expires within 30 days: the CA signed a new one")
        XCTAssertEqual(try read(ca.caCertificate), caPEM)
        XCTAssertNil(try LocalCertificateAuthority.loadOrCreate(names: ["localhost"], directory: dir, now: now).renewed)
        try handshake(ca: ca, host: "localhost")
    }

    func testACertificateThatCannotBeReplacedIsKeptAndSaysSo() throws {
        let old = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir)
        let serverPEM = try read(old.serverCertificate)
        // A directory where the key should be replaced (root writes through file modes): the new
        // pair cannot take the old one's place.
        try FileManager.default.removeItem(atPath: old.serverKey)
        try FileManager.default.createDirectory(atPath: old.serverKey + "/x", withIntermediateDirectories: true)
        let r = try LocalCertificateAuthority.loadOrCreate(names: ["localhost", "mtalk.google.com"], directory: dir)
        XCTAssertFalse(r.created)
        XCTAssertTrue(r.renewed?.hasPrefix("its server certificate did not name every host this version serves; a new one could not be written (") == true,
                      r.renewed ?? "nil")
        XCTAssertTrue(r.renewed?.hasSuffix("): the old one is used") == true, r.renewed ?? "nil")
        XCTAssertEqual(try read(old.serverCertificate), serverPEM, "the old certificate is left as it was")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted(), ["ca.key", "ca.pem", "server.key", "server.pem"],
                       "nothing half-made is left")
    }

    /// A client trusting only `ca.pem` completes a handshake for `host` against the CA's server
    /// certificate.
    private func handshake(ca: LocalCertificateAuthority, host: String) throws {
        let credentials = try TLSCredentials(certificate: ca.serverCertificate, key: ca.serverKey)
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { for fd in fds { close(fd) } }
        let server = DispatchQueue(label: "server")
        let done = DispatchSemaphore(value: 0)
        let serverFD = fds[0]
        server.async {
            _ = try? TLSSession(serverOn: serverFD, credentials: credentials)
            done.signal()
        }
        let client = Result { () throws(TLSError) -> TLSSession in
            try TLSSession(clientOn: fds[1], host: host, trust: .caFile(ca.caCertificate))
        }
        if case .failure = client { shutdown(fds[1], Int32(SHUT_RDWR)) }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertNoThrow(try client.get(), "the handshake for \(host)")
    }
}
