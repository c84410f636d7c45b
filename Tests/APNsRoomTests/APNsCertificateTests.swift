import Foundation
import XCTest

@testable import TLS
@testable import APNs

/// APNs client certificates issued by the local certificate authority, read back as a server
/// reads a peer's; Apple's topic extension byte for byte.
final class APNsCertificateTests: XCTestCase {
    private var dir = ""
    private var ca: LocalCertificateAuthority!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-mock-apns-cert-tests-\(UUID().uuidString)"
        ca = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func testIssuedCertificatesCarryTopicsAndEnvironments() throws {
        for (environments, name) in [(APNsEnvironments.sandbox, "sandbox"), (.production, "production"),
                                     ([.sandbox, .production], "both")] {
            let issued = try ca.issueAPNsClientCertificate(bundleID: "com.example.demo.ios", environments: environments)
            XCTAssertTrue(issued.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"), name)
            XCTAssertTrue(issued.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), name)
            let read = try APNsClientCertificate(pem: issued.certificatePEM)
            XCTAssertEqual(read.bundleID, "com.example.demo.ios", name)
            XCTAssertEqual(read.topics, ["com.example.demo.ios", "com.example.demo.ios.voip", "com.example.demo.ios.complication"])
            XCTAssertEqual(read.environments, environments, name)
            XCTAssertEqual(read.serial, issued.serial)
            XCTAssertEqual(read.serial.count, 32, "16 random bytes")
            // The key is the certificate's: a client can use the pair (TLSSessionTests does).
            XCTAssertNoThrow(try P256PrivateKey(pem: issued.privateKeyPEM), name)
        }
        let a = try ca.issueAPNsClientCertificate(bundleID: "com.example.a", environments: .sandbox)
        let b = try ca.issueAPNsClientCertificate(bundleID: "com.example.a", environments: .sandbox)
        XCTAssertNotEqual(a.serial, b.serial, "two certificates in the same second differ")
    }

    /// The extension's value is what OpenSSL writes for Apple's layout (Pushy's test certificates
    /// carry it: their value is this SEQUENCE inside one more OCTET STRING header, 04 75).
    func testTheTopicExtensionMatchesApplesLayout() throws {
        let pushy = try XCTUnwrap(Data(base64Encoded: "BHUwcwwUY29tLmVhdHRoZXBhdGgucHVzaHkwBQwDYXBwDBljb20uZWF0dGhlcGF0aC5wdXNoeS52b2lwMAYMBHZvaXAMIWNvbS5lYXR0aGVwYXRoLnB1c2h5LmNvbXBsaWNhdGlvbjAODAxjb21wbGljYXRpb24="))
        XCTAssertEqual(DER.topicsValue(bundleIDs: ["com.eatthepath.pushy"]), Array(pushy.dropFirst(2)))
        XCTAssertEqual(DER.topics(Array(pushy.dropFirst(2))),
                       ["com.eatthepath.pushy", "com.eatthepath.pushy.voip", "com.eatthepath.pushy.complication"])
        // Long bundle ids take long-form lengths, and read back.
        let long = String(repeating: "a", count: 200)
        XCTAssertEqual(DER.topics(DER.topicsValue(bundleIDs: [long])), [long, long + ".voip", long + ".complication"])
    }

    func testMalformedExtensionsAndCertificatesAreRefused() throws {
        let good = DER.topicsValue(bundleIDs: ["com.example.app"])
        for bad: [UInt8] in [[], [0x30], [0x31, 0x00], [0x30, 0x05, 0x0C], [0x30, 0x80], [0x30, 0x85, 1, 1, 1, 1, 1],
                             [0x30, 0x02, 0x0C, 0x05], Array(good.dropLast()), good + [0]] {
            XCTAssertNil(DER.topics(bad), "\(bad)")
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var v = good
            v[Int.random(in: 0..<v.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            _ = DER.topics(Array(v.prefix(Int.random(in: 0...v.count, using: &rng))))
        }
        XCTAssertThrowsError(try APNsClientCertificate(der: []))
        XCTAssertThrowsError(try APNsClientCertificate(der: [0x30, 0x03, 0x02, 0x01, 0x00]))
        XCTAssertThrowsError(try APNsClientCertificate(pem: "not a certificate"))
        XCTAssertFalse(ca.hasIssued([]))
        XCTAssertFalse(ca.hasIssued([0x30, 0x00]))
        for bad in ["", String(repeating: "a", count: 256), "a\0b"] {
            XCTAssertThrowsError(try ca.issueAPNsClientCertificate(bundleID: bad, environments: .sandbox))
        }
        XCTAssertThrowsError(try ca.issueAPNsClientCertificate(bundleID: "com.example.app", environments: .sandbox, days: 0))
        // The server certificate is no APNs one: no topics, no environment, no UID.
        let server = try String(contentsOfFile: ca.serverCertificate, encoding: .utf8)
        let read = try APNsClientCertificate(pem: server)
        XCTAssertEqual(read.topics, [])
        XCTAssertEqual(read.environments, [])
        XCTAssertNil(read.bundleID)
    }

    /// The signature decides, time checks off or on: a certificate of another CA of the same name
    /// (the issuer field then matches) is refused, and a CA's `CertificateIssuer` (its
    /// certificate read once) answers as the CA does.
    func testHasIssuedRefusesAForeignSignatureWithoutTimeChecks() throws {
        let other = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir + "/other")
        let foreign = try other.issueAPNsClientCertificate(bundleID: "com.example.app", environments: .sandbox)
        let own = try ca.issueAPNsClientCertificate(bundleID: "com.example.app", environments: .sandbox)
        func der(_ pem: String) throws -> [UInt8] {
            Array(try XCTUnwrap(Data(base64Encoded: pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined())))
        }
        let issuer = try CertificateIssuer(ca)
        for checkingTime in [false, true] {
            XCTAssertFalse(ca.hasIssued(try der(foreign.certificatePEM), checkingTime: checkingTime))
            XCTAssertFalse(issuer.hasIssued(try der(foreign.certificatePEM), checkingTime: checkingTime))
            XCTAssertTrue(other.hasIssued(try der(foreign.certificatePEM), checkingTime: checkingTime))
            XCTAssertTrue(issuer.hasIssued(try der(own.certificatePEM), checkingTime: checkingTime))
        }
        // Dates on a clock of the caller's: out of the system's period, the signature still holds.
        let later = try ca.issueAPNsClientCertificate(bundleID: "com.example.app", environments: .sandbox, days: 1,
                                                      now: Int64(Date().timeIntervalSince1970) + 30 * 86_400)
        let read = try APNsClientCertificate(pem: later.certificatePEM)
        XCTAssertEqual(read.notAfter - read.notBefore, 86_400 + 3600)
        XCTAssertFalse(issuer.hasIssued(try der(later.certificatePEM)))
        XCTAssertTrue(issuer.hasIssued(try der(later.certificatePEM), checkingTime: false))
        XCTAssertThrowsError(try CertificateIssuer(LocalCertificateAuthority(caCertificate: dir + "/none.pem", caKey: "", serverCertificate: "",
                                                                              serverKey: "")))
    }
}
