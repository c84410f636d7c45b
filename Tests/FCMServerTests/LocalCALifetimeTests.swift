import FCMServer
import FCMTesting
import Foundation
import XCTest

/// The local CA that issues APNs client certificates, with a server certificate of one's own
/// (`--tls-cert`) and a `:memory:` store: made in a temporary folder, logged, and removed when
/// the server stops (the built binary, stopped by SIGTERM).
final class LocalCALifetimeTests: XCTestCase {
    func testATemporaryCAIsLoggedAndRemovedOnStop() throws {
        let dir = NSTemporaryDirectory() + "fcm-mock-ca-life-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertEqual(try runBinary(["cert", "--out", dir]).status, 0)
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--https-port", "0", "--tls-cert", dir + "/server.pem",
                                             "--tls-key", dir + "/server.key"])
        let log = String(decoding: s.takeStderr(), as: UTF8.self)
        let field = try XCTUnwrap(log.range(of: "tls.ca="), log)
        let path = String(log[field.upperBound...].prefix { !$0.isWhitespace }).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        XCTAssertTrue(path.hasSuffix("/ca.pem") && path != dir + "/ca.pem", path)
        XCTAssertTrue(log.contains("local CA for APNs client certificates"), log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), path)
        let folder = String(path.dropLast("/ca.pem".count))
        XCTAssertEqual(s.stop(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder), "\(folder) is removed when the server stops")
    }

    /// In-process, the CA of `--https-port` without `--tls-cert` (a `:memory:` store): removed
    /// on stop too; one kept in `--tls-dir` stays.
    func testTheApplicationRemovesItsTemporaryCA() throws {
        let server = try TestServer(extraArguments: ["--https-port", "0"])
        let ca = try XCTUnwrap(server.app.apnsCA)
        XCTAssertEqual(server.app.tlsCA, ca)
        XCTAssertTrue(FileManager.default.fileExists(atPath: ca), ca)
        server.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: String(ca.dropLast("/ca.pem".count))), ca)
        let dir = NSTemporaryDirectory() + "fcm-mock-ca-kept-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let kept = try TestServer(extraArguments: ["--https-port", "0", "--tls-dir", dir])
        kept.stop()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/ca.pem"))
    }
}
