import APNs
import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// APNs certificate authentication through the real server: client certificates issued by the
/// control API, presented by curl over TLS (HTTP/2 by ALPN) on the HTTPS port, with Apple's host
/// names resolved to the mock; one test per rule.
final class APNsCertificateAuthTests: XCTestCase {
    var server: TestServer!
    var dir = ""
    var httpsPort = 0
    /// The CA the server's own certificate chains to.
    var serverCA: String { dir + "/tls/ca.pem" }
    var givenCA: String?
    let app = "com.example.demo.ios"

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-mock-apns-cert-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        server = try TestServer(unknownTokens: "reject", extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        httpsPort = try XCTUnwrap(server.app.httpsPort)
    }

    override func tearDown() {
        server?.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A certificate made through the control API, written to files; its JSON.
    struct Issued {
        let json: JSONObject
        let certificate: String
        let key: String
        var id: String { json["id"]?.stringValue ?? "" }
    }

    func issue(_ body: String) throws -> Issued {
        let r = try server.client().post("/api/v1/apns/certificates", body)
        XCTAssertEqual(r.status, 201, r.text)
        let o = try XCTUnwrap(r.object)
        let name = dir + "/" + UUID().uuidString
        try XCTUnwrap(o["certificate_pem"]?.stringValue).write(toFile: name + ".pem", atomically: true, encoding: .utf8)
        try XCTUnwrap(o["private_key_pem"]?.stringValue).write(toFile: name + ".key", atomically: true, encoding: .utf8)
        return Issued(json: o, certificate: name + ".pem", key: name + ".key")
    }

    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: String
    }

    /// One send over TLS to `host` (resolved to the mock), presenting `certificate` when given.
    func send(_ token: String, host: String = "api.sandbox.push.apple.com", certificate: Issued?, headers: [(String, String)] = [],
              body: String = #"{"aps":{"alert":"hi"}}"#) throws -> Answer {
        var args = ["-sS", "-i", "--max-time", "20", "--http2", "--resolve", "\(host):\(httpsPort):127.0.0.1", "--cacert", givenCA ?? serverCA,
                    "--data-binary", body]
        if let certificate { args += ["--cert", certificate.certificate, "--key", certificate.key] }
        for (n, v) in headers { args += ["-H", "\(n): \(v)"] }
        args.append("https://\(host):\(httpsPort)/3/device/\(token)")
        let r = try runProcess(try HTTP2Tests.tool("curl"), args)
        XCTAssertEqual(r.status, 0, r.stderr)
        let parts = r.stdout.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        XCTAssertTrue(head[0].hasPrefix("HTTP/2 "), head[0])
        var fields: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: Int(head[0].split(separator: " ")[1]) ?? 0, headers: fields, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    func assertReason(_ a: Answer, _ status: Int, _ reason: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.status, status, a.body, file: file, line: line)
        XCTAssertEqual(a.body, #"{"reason":"\#(reason)"}"#, file: file, line: line)
        XCTAssertTrue(isCanonicalUUID(a.headers["apns-id"] ?? ""), "\(a.headers)", file: file, line: line)
    }

    /// The demo iOS device's APNs token (a sandbox token).
    func token() throws -> String {
        try XCTUnwrap(server.client().get("/api/v1/devices/demo-ios-1").object?["apns_token"]?.stringValue)
    }

    func testIssuedCertificatesAreListedWithoutKeysAndRevoked() throws {
        let c = try issue(#"{"bundle_id":"\#(app)","environment":"both"}"#)
        XCTAssertEqual(c.json["bundle_id"]?.stringValue, app)
        XCTAssertEqual(c.json["topics"], .array([.string(app), .string(app + ".voip"), .string(app + ".complication")]))
        XCTAssertEqual(c.json["environments"], .array([.string("sandbox"), .string("production")]))
        XCTAssertTrue(c.json["private_key_pem"]?.stringValue?.hasPrefix("-----BEGIN PRIVATE KEY-----\n") == true)
        // What the certificate itself says, read back by the TLS layer.
        let read = try APNsClientCertificate(pem: try XCTUnwrap(c.json["certificate_pem"]?.stringValue))
        XCTAssertEqual(read.serial, c.id)
        XCTAssertEqual(read.bundleID, app)
        XCTAssertEqual(read.environments, [.sandbox, .production])
        let list = items(try server.client().get("/api/v1/apns/certificates"))
        XCTAssertEqual(list.map { $0["id"]?.stringValue }, [c.id])
        XCTAssertNil(list.first?["private_key_pem"], "the key is shown once")
        XCTAssertEqual(try server.client().delete("/api/v1/apns/certificates/\(c.id)").status, 204)
        XCTAssertTrue(items(try server.client().get("/api/v1/apns/certificates")).isEmpty)
        XCTAssertEqual(try server.client().delete("/api/v1/apns/certificates/\(c.id)").status, 404)
        for bad in [#"{}"#, #"{"bundle_id":"a b"}"#, #"{"bundle_id":"\#(app)","environment":"staging"}"#,
                    #"{"bundle_id":"\#(app)","days":0}"#, #"{"bundle_id":"\#(app)","colour":"red"}"#] {
            let r = try server.client().post("/api/v1/apns/certificates", bad)
            XCTAssertEqual(r.status, 400, "\(bad): \(r.text)")
            XCTAssertTrue(r.text.hasPrefix(#"{"error":{"code":"bad_request""#), r.text)
        }
    }

    func testACertificateAuthorizesWithoutATokenAndTheRecordNamesIt() throws {
        let c = try issue(#"{"bundle_id":"\#(app)"}"#)
        let token = try token()
        // No apns-topic: a certificate of one app stands for it.
        let a = try send(token, certificate: c)
        XCTAssertEqual(a.status, 200, a.body)
        XCTAssertEqual(a.body, "")
        XCTAssertTrue(isCanonicalUUID(a.headers["apns-unique-id"] ?? ""), "\(a.headers)")
        let inbox = items(try server.client().get("/api/v1/devices/demo-ios-1/messages"))
        XCTAssertEqual(inbox.first?["status"]?.stringValue, "delivered", "\(inbox)")
        XCTAssertEqual(inbox.first?["effective"]?.objectValue?["apns"]?.objectValue?["headers"]?.objectValue?["apns-topic"]?.stringValue, app)
        let record = try XCTUnwrap(items(try server.client().get("/api/v1/messages?transport=apns")).first)
        let apns = try XCTUnwrap(record["apns"]?.objectValue, "\(record)")
        XCTAssertEqual(apns["certificate_id"]?.stringValue, c.id)
        XCTAssertNil(apns["key_id"])
        // The app's other topics: named in the certificate (voip), or made from its app (widgets).
        XCTAssertEqual(try send(token, certificate: c, headers: [("apns-topic", app + ".voip"), ("apns-push-type", "voip")]).status, 200)
        XCTAssertEqual(try send(token, certificate: c, headers: [("apns-push-type", "voip")]).status, 200,
                       "no topic: the app's, with the push type's suffix")
        XCTAssertEqual(try send(token, certificate: c, headers: [("apns-topic", app + ".push-type.widgets"), ("apns-push-type", "widgets")]).status, 200)
    }

    func testTopicsOutsideTheCertificate() throws {
        let c = try issue(#"{"bundle_id":"\#(app)"}"#)
        let token = try token()
        assertReason(try send(token, certificate: c, headers: [("apns-topic", "com.example.other")]), 400, "TopicDisallowed")
        assertReason(try send(token, certificate: c, headers: [("apns-topic", app), ("apns-push-type", "voip")]), 400, "BadTopic")
        // Several apps in one certificate: the topic must say which.
        let both = try issue(#"{"bundle_id":"\#(app)","bundle_ids":["com.example.other"]}"#)
        XCTAssertEqual(both.json["topics"]?.arrayValue?.count, 6)
        assertReason(try send(token, certificate: both), 400, "MissingTopic")
        XCTAssertEqual(try send(token, certificate: both, headers: [("apns-topic", app)]).status, 200)
        // Refusals are recorded with their reason.
        let refused = items(try server.client().get("/api/v1/messages?transport=apns&status=rejected"))
        XCTAssertEqual(refused.compactMap { $0["error"]?.stringValue }.sorted(), ["BadTopic", "MissingTopic", "TopicDisallowed"])
    }

    func testEnvironmentRevocationExpiryAndForeignCertificatesAreRefused() throws {
        let sandbox = try issue(#"{"bundle_id":"\#(app)","environment":"sandbox"}"#)
        let production = try issue(#"{"bundle_id":"\#(app)","environment":"production","days":2}"#)
        let token = try token()
        assertReason(try send(token, host: "api.push.apple.com", certificate: sandbox), 403, "BadCertificateEnvironment")
        assertReason(try send(token, host: "api.sandbox.push.apple.com", certificate: production), 403, "BadCertificateEnvironment")
        // Production certificate on the production host: past authentication, the sandbox token is refused.
        assertReason(try send(token, host: "api.push.apple.com", certificate: production), 400, "BadDeviceToken")
        // Revoked: refused from the next request on.
        XCTAssertEqual(try send(token, certificate: sandbox).status, 200)
        XCTAssertEqual(try server.client().delete("/api/v1/apns/certificates/\(sandbox.id)").status, 204)
        assertReason(try send(token, certificate: sandbox), 403, "BadCertificate")
        // Expired on the mock's clock.
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":259200}"#).status, 200)
        assertReason(try send(token, host: "api.push.apple.com", certificate: production), 403, "BadCertificate")
        // Signed by another CA (a certificate shaped like the mock's): refused, and so is a
        // provider token on its connection.
        let other = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir + "/other")
        let foreign = try other.issueAPNsClientCertificate(bundleID: app, environments: [.sandbox])
        try foreign.certificatePEM.write(toFile: dir + "/foreign.pem", atomically: true, encoding: .utf8)
        try foreign.privateKeyPEM.write(toFile: dir + "/foreign.key", atomically: true, encoding: .utf8)
        let stranger = Issued(json: JSONObject(), certificate: dir + "/foreign.pem", key: dir + "/foreign.key")
        assertReason(try send(token, certificate: stranger), 403, "BadCertificate")
        assertReason(try send(token, certificate: stranger, headers: [("authorization", "bearer x.y.z")]), 403, "BadCertificate")
        // Without a certificate, token authentication as before.
        assertReason(try send(token, certificate: nil), 403, "MissingProviderToken")
    }

    /// The certificate authenticates the connection (Apple): an `authorization` header on it is
    /// ignored, however bad or good, and the record names the certificate; a bad certificate is
    /// refused whatever token comes with it.
    func testACertificateDecidesAndTheAuthorizationHeaderIsIgnored() throws {
        let c = try issue(#"{"bundle_id":"\#(app)"}"#)
        let token = try token()
        let made = try XCTUnwrap(server.client().post("/api/v1/apns/keys", #"{"team_id":"TEAM123456","bundle_ids":["com.example.other"]}"#).object)
        let keyID = try XCTUnwrap(made["key_id"]?.stringValue)
        let jwt = try apnsProviderToken(pem: try XCTUnwrap(made["private_key_pem"]?.stringValue), keyID: keyID, team: "TEAM123456")
        XCTAssertEqual(try send(token, certificate: c, headers: [("authorization", "bearer not-a-jwt")]).status, 200)
        // A good token of a team without the app, and no topic: the certificate's app is sent to.
        XCTAssertEqual(try send(token, certificate: c, headers: [("authorization", "bearer \(jwt)")]).status, 200)
        let records = items(try server.client().get("/api/v1/messages?transport=apns&status=accepted"))
        XCTAssertEqual(records.count, 2)
        for record in records {
            XCTAssertEqual(record["apns"]?.objectValue?["certificate_id"]?.stringValue, c.id, "\(record)")
            XCTAssertNil(record["apns"]?.objectValue?["key_id"], "\(record)")
        }
        XCTAssertEqual(try server.client().delete("/api/v1/apns/certificates/\(c.id)").status, 204)
        assertReason(try send(token, certificate: c, headers: [("authorization", "bearer \(jwt)"), ("apns-topic", "com.example.other")]),
                     403, "BadCertificate")
    }

    /// Certificates forged from an issued one (its serial, subject and extensions, Apple's topic
    /// extension included), one signed by another CA with the same name as the mock's, one
    /// self-signed: only the CA's signature tells them apart, and both are refused.
    func testForgedCertificatesWithAnIssuedSerialAreRefused() throws {
        let c = try issue(#"{"bundle_id":"\#(app)"}"#)
        let token = try token()
        let other = try LocalCertificateAuthority.create(names: ["localhost"], directory: dir + "/other")
        let openssl = "/usr/bin/openssl"
        let request = dir + "/forged.csr"
        func run(_ args: [String]) throws {
            let r = try runProcess(openssl, args)
            XCTAssertEqual(r.status, 0, "openssl \(args.joined(separator: " ")): \(r.stderr)")
        }
        try run(["x509", "-x509toreq", "-in", c.certificate, "-key", c.key, "-copy_extensions", "copyall", "-out", request])
        try run(["x509", "-req", "-in", request, "-CA", other.caCertificate, "-CAkey", other.caKey, "-set_serial", "0x" + c.id,
                 "-copy_extensions", "copyall", "-days", "30", "-out", dir + "/other-ca.pem"])
        try run(["req", "-x509", "-in", request, "-key", c.key, "-set_serial", "0x" + c.id, "-copy_extensions", "copyall", "-days", "30",
                 "-out", dir + "/self-signed.pem"])
        let genuine = try APNsClientCertificate(pem: try XCTUnwrap(c.json["certificate_pem"]?.stringValue))
        for name in ["other-ca", "self-signed"] {
            let pem = try String(contentsOfFile: dir + "/\(name).pem", encoding: .utf8)
            let forged = try APNsClientCertificate(pem: pem)
            XCTAssertEqual(forged.serial, c.id, name)
            XCTAssertEqual(forged.bundleID, app, name)
            XCTAssertEqual(forged.topics, genuine.topics, name)
            XCTAssertEqual(forged.environments, genuine.environments, name)
            let f = Issued(json: JSONObject(), certificate: dir + "/\(name).pem", key: c.key)
            assertReason(try send(token, certificate: f), 403, "BadCertificate")
        }
        XCTAssertEqual(try send(token, certificate: c).status, 200, "the genuine one still authorizes")
    }

    /// `bundle_ids`: each app once; at most 63 besides `bundle_id` (64 apps), refused in the
    /// control API's shape before anything is issued.
    func testACertificateNamesAtMost64Apps() throws {
        let others = (1...64).map { "com.example.app\($0)" }
        func body(_ list: [String]) -> String {
            #"{"bundle_id":"\#(app)","bundle_ids":[\#(list.map { "\"\($0)\"" }.joined(separator: ","))]}"#
        }
        let r = try server.client().post("/api/v1/apns/certificates", body(others))
        XCTAssertEqual(r.status, 400, r.text)
        XCTAssertTrue(r.text.hasPrefix(#"{"error":{"code":"bad_request""#), r.text)
        XCTAssertTrue(r.text.contains("at most 63"), r.text)
        XCTAssertTrue(items(try server.client().get("/api/v1/apns/certificates")).isEmpty)
        // 64 apps, given twice over and with bundle_id among them: each once.
        let c = try issue(body(Array(others.prefix(63)) + Array(others.prefix(63)) + [app]))
        XCTAssertEqual(c.json["topics"]?.arrayValue?.count, 64 * 3)
    }

    /// A certificate of several apps and no `apns-topic`: `MissingTopic` at the topic's step,
    /// before the collapse id's check (contract order).
    func testAMissingTopicComesBeforeTheHeadersAfterIt() throws {
        let both = try issue(#"{"bundle_id":"\#(app)","bundle_ids":["com.example.other"]}"#)
        let a = try send(try token(), certificate: both, headers: [("apns-collapse-id", String(repeating: "c", count: 65))])
        assertReason(a, 400, "MissingTopic")
    }

    /// An app and another whose id is the first's `.voip` topic, issued together: two apps, so
    /// no topic is refused, and either is sent to by name.
    func testAnAppAndItsVoipNamedAppAreTwoApps() throws {
        let c = try issue(#"{"bundle_id":"\#(app)","bundle_ids":["\#(app).voip"]}"#)
        let token = try token()
        assertReason(try send(token, certificate: c), 400, "MissingTopic")
        XCTAssertEqual(try send(token, certificate: c, headers: [("apns-topic", app)]).status, 200)
    }

    /// The certificate's own dates are written on the mock's clock: notAfter is `expires_at`,
    /// notBefore an hour before `created_at`.
    func testTheCertificatesDatesFollowTheMocksClock() throws {
        XCTAssertEqual(try server.client().post("/api/v1/clock", #"{"advance_s":864000}"#).status, 200)
        let c = try issue(#"{"bundle_id":"\#(app)","days":3}"#)
        let read = try APNsClientCertificate(pem: try XCTUnwrap(c.json["certificate_pem"]?.stringValue))
        let created = try XCTUnwrap(parseRFC3339(try XCTUnwrap(c.json["created_at"]?.stringValue)))
        let expires = try XCTUnwrap(parseRFC3339(try XCTUnwrap(c.json["expires_at"]?.stringValue)))
        XCTAssertGreaterThan(created, Int64(Date().timeIntervalSince1970 * 1000) + 863_000_000, "the clock was advanced")
        XCTAssertEqual(read.notAfter, expires / 1000)
        XCTAssertEqual(read.notBefore, created / 1000 - 3600)
        XCTAssertEqual(try send(try token(), certificate: c).status, 200)
    }

    /// docs/apns.md's certificate snippet, run as written (on this server's port); the
    /// certificate it makes authorizes a send.
    func testTheDocsSnippetRuns() throws {
        let doc = try String(contentsOf: DocumentedFlagsTests.root.appendingPathComponent("docs/apns.md"), encoding: .utf8)
        let blocks = doc.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let block = try XCTUnwrap(blocks.first { $0.contains("/api/v1/apns/certificates") })
        let r = try runProcess("/bin/bash", ["-c", block.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(server.port)")],
                               environment: ["PATH": "/usr/bin:/bin"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let o = try XCTUnwrap(JSONParser.parse(Array(r.stdout.utf8)).objectValue, r.stdout)
        XCTAssertEqual(o["environments"], .array([.string("sandbox")]))
        let name = dir + "/doc"
        try XCTUnwrap(o["certificate_pem"]?.stringValue).write(toFile: name + ".pem", atomically: true, encoding: .utf8)
        try XCTUnwrap(o["private_key_pem"]?.stringValue).write(toFile: name + ".key", atomically: true, encoding: .utf8)
        let c = Issued(json: o, certificate: name + ".pem", key: name + ".key")
        XCTAssertEqual(try send(try token(), certificate: c).status, 200)
    }

    func testCertificatesOutliveARestartAndNeedTheHTTPSPort() throws {
        let db = dir + "/store.sqlite"
        server.stop()
        server = try TestServer(db: db, unknownTokens: "reject", extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        httpsPort = try XCTUnwrap(server.app.httpsPort)
        let c = try issue(#"{"bundle_id":"\#(app)"}"#)
        server.stop()
        server = try TestServer(db: db, unknownTokens: "reject", extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        httpsPort = try XCTUnwrap(server.app.httpsPort)
        XCTAssertEqual(items(try server.client().get("/api/v1/apns/certificates")).map { $0["id"]?.stringValue }, [c.id])
        XCTAssertEqual(try send(try token(), certificate: c).status, 200)
        // A server certificate of one's own (--tls-cert): client certificates still come from
        // the local CA in --tls-dir.
        server.stop()
        XCTAssertEqual(try runBinary(["cert", "--out", dir + "/given"]).status, 0)
        server = try TestServer(unknownTokens: "reject", extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls2",
                                                                          "--tls-cert", dir + "/given/server.pem", "--tls-key", dir + "/given/server.key"])
        httpsPort = try XCTUnwrap(server.app.httpsPort)
        givenCA = dir + "/given/ca.pem"
        let local = try issue(#"{"bundle_id":"\#(app)"}"#)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/tls2/ca.pem"))
        XCTAssertEqual(try send(try token(), certificate: local).status, 200)
        server.stop()
        server = try TestServer()
        let none = try server.client().post("/api/v1/apns/certificates", #"{"bundle_id":"\#(app)"}"#)
        XCTAssertEqual(none.status, 404, none.text)
        XCTAssertTrue(none.text.contains("--https-port"), none.text)
    }
}
