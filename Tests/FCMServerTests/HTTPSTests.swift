import HTTPServer
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import TLS
import XCTest

/// `--http-tls` and `fcm-mock cert`: an unmodified client that talks to Google's host name over
/// HTTPS reaches the mock, proved with curl `--resolve` and the CA that `cert` wrote.
final class HTTPSTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "fcm-https-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Runs curl (the client under test); fails the test when curl is not installed.
    private func curl(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let r = try runProcess("/usr/bin/env", ["curl", "-sS", "--max-time", "20"] + arguments)
        XCTAssertNotEqual(r.status, 127, "curl is not installed (make deps installs it)")
        return r
    }

    func testCertAndGoogleHostNameOverHTTPS() throws {
        let out = dir + "/certs"
        let made = try runBinary(["cert", "--out", out, "--host", "push.example.test"])
        XCTAssertEqual(made.status, 0, made.stderr)
        for f in ["ca.pem", "ca.key", "server.pem", "server.key"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: "\(out)/\(f)"), f)
        }
        let keyMode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: out + "/server.key")[.posixPermissions] as? Int)
        XCTAssertEqual(keyMode, 0o600, "private keys are readable by their owner only")

        let s = try BinaryServer(arguments: ["--db", ":memory:", "--http-tls",
                                             "--tls-cert", out + "/server.pem", "--tls-key", out + "/server.key"])
        defer { s.stop() }
        let port = s.httpPort
        let send = ["-H", "Authorization: key=\(DemoProject.serverKey)", "-H", "Content-Type: application/json",
                    "-d", #"{"to":"demo-android-1","data":{"via":"https"}}"#]
        // Each host name a legacy client hard-codes, resolved to the mock, verified against the CA.
        for host in ["fcm.googleapis.com", "gcm-http.googleapis.com", "android.googleapis.com", "oauth2.googleapis.com",
                     "www.googleapis.com", "accounts.google.com", "push.example.test"] {
            let r = try curl(["--resolve", "\(host):\(port):127.0.0.1", "--cacert", out + "/ca.pem"] + send
                             + ["https://\(host):\(port)/fcm/send"])
            XCTAssertEqual(r.status, 0, "\(host): \(r.stderr)")
            XCTAssertTrue(r.stdout.hasPrefix(#"{"multicast_id":"#) && r.stdout.contains(#""success":1,"failure":0"#), r.stdout)
        }
        // What was delivered is visible over the same HTTPS port.
        let inbox = try curl(["--cacert", out + "/ca.pem", "https://localhost:\(port)/api/v1/devices/demo-android-1/messages"])
        XCTAssertEqual(inbox.status, 0, inbox.stderr)
        let entries = try XCTUnwrap((try JSONParser.parse(inbox.stdout)).objectValue?["items"]?.arrayValue)
        XCTAssertEqual(entries.count, 7)
        XCTAssertEqual(entries.first?.objectValue?["data"]?.serialized(), #"{"via":"https"}"#)
        // The IP address entry works too.
        XCTAssertEqual(try curl(["--cacert", out + "/ca.pem", "https://127.0.0.1:\(port)/api/v1/health"]).status, 0)

        // Without trusting the CA, verification fails (curl 60); a name outside the certificate fails.
        XCTAssertEqual(try curl(["--resolve", "fcm.googleapis.com:\(port):127.0.0.1", "https://fcm.googleapis.com:\(port)/fcm/send"]).status, 60)
        XCTAssertNotEqual(try curl(["--resolve", "other.example.test:\(port):127.0.0.1", "--cacert", out + "/ca.pem",
                                    "https://other.example.test:\(port)/api/v1/health"]).status, 0)
        // Plain HTTP on the HTTPS port gets no HTTP answer.
        XCTAssertNotEqual(try curl(["http://127.0.0.1:\(port)/api/v1/health"]).status, 0)

        // The CLI over HTTPS: verified against --cacert (or $FCM_MOCK_CACERT), refused without it.
        let health = try runBinary(["health", "--server", "https://localhost:\(port)", "--cacert", out + "/ca.pem"])
        XCTAssertEqual(health.status, 0, health.stderr)
        XCTAssertTrue(health.stdout.hasPrefix("ok: fcm-mock") && health.stdout.contains("https://localhost:\(port)"), health.stdout)
        let untrusted = try runBinary(["health", "--server", "https://localhost:\(port)"])
        XCTAssertEqual(untrusted.status, 1)
        XCTAssertTrue(untrusted.stderr.contains("certificate") && untrusted.stderr.contains("--cacert"), untrusted.stderr)
        let env = ["FCM_MOCK_CACERT": out + "/ca.pem", "FCM_MOCK_URL": "https://127.0.0.1:\(port)"]
        let viaEnv = try runBinary(["send", "--to", "demo-android-1", "--data", "cli=https"], environment: env)
        XCTAssertEqual(viaEnv.status, 0, viaEnv.stderr + viaEnv.stdout)
        XCTAssertTrue(viaEnv.stdout.contains(#""success":1"#), viaEnv.stdout)
    }

    func testGeneratedCertificateWhenNoneIsGiven() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--http-tls"])
        defer { s.stop() }
        let r = try curl(["-k", "https://127.0.0.1:\(s.httpPort)/api/v1/health"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix(#"{"status":"ok""#), r.stdout)
        let log = String(decoding: s.takeStderr(waitingFor: "tls.cert="), as: UTF8.self)
        XCTAssertTrue(log.contains("tls.cert=") && log.contains("server.pem"), log)
        XCTAssertTrue(log.contains("http.tls=true"), log)
        // Its temporary folder goes with the server.
        let cert = try XCTUnwrap(log.components(separatedBy: "tls.cert=").dropFirst().first?.split(separator: " ").first.map(String.init))
        XCTAssertTrue(FileManager.default.fileExists(atPath: cert), cert)
        XCTAssertEqual(s.stop(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: String(cert.dropLast("/server.pem".count))), cert)
    }

    func testEnvironmentAndBadInput() throws {
        let c = try Configuration.parse(arguments: [], environment: ["FCM_MOCK_HTTP_TLS": "true", "FCM_MOCK_XMPP_TLS": "1",
                                                                     "FCM_MOCK_TLS_CERT": "/c.pem", "FCM_MOCK_TLS_KEY": "/k.pem"])
        XCTAssertTrue(c.httpTLS)
        XCTAssertTrue(c.xmppTLS)
        XCTAssertEqual(c.tlsCert, "/c.pem")
        XCTAssertEqual(c.tlsKey, "/k.pem")
        XCTAssertFalse(try Configuration.parse(arguments: [], environment: [:]).httpTLS)
        XCTAssertThrowsError(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_HTTP_TLS": "maybe"]))

        let missing = try runBinary(["serve", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0", "--http-tls",
                                     "--tls-cert", dir + "/none.pem", "--tls-key", dir + "/none.key"])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("TLS"), missing.stderr)

        let noOut = try runBinary(["cert"])
        XCTAssertEqual(noOut.status, 2)
        XCTAssertTrue(noOut.stderr.contains("--out"), noOut.stderr)
        XCTAssertEqual(try runBinary(["cert", "--out", dir, "--bogus"]).status, 2)
        XCTAssertEqual(try runBinary(["cert", "--out"]).status, 2)
        let unwritable = try runBinary(["cert", "--out", "/proc/fcm-mock-certs"])
        XCTAssertEqual(unwritable.status, 1)
        XCTAssertEqual(unwritable.stderr.split(separator: "\n").count, 1, unwritable.stderr)
    }

    // MARK: --https-port

    /// curl over the HTTPS port with the local CA, for `host` resolved to the mock; prints
    /// "HTTP_VERSION STATUS" then the body.
    private func curlHTTPS(_ port: Int, ca: String, host: String = "fcm.googleapis.com", _ flags: [String], _ path: String) throws -> String {
        let r = try curl(["--resolve", "\(host):\(port):127.0.0.1", "--cacert", ca, "-w", "\n%{http_version} %{http_code}"]
                         + flags + ["https://\(host):\(port)\(path)"])
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdout
    }

    func testHTTPSPortNegotiatesH2AndHTTP1WithTheLocalCA() throws {
        let s = try TestServer(extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        defer { s.stop() }
        let port = try XCTUnwrap(s.app.httpsPort)
        let ca = dir + "/tls/ca.pem"
        let send = ["-H", "Authorization: key=\(DemoProject.serverKey)", "-H", "Content-Type: application/json",
                    "-d", #"{"to":"demo-android-1","data":{"via":"https-port"}}"#]
        let h2 = try curlHTTPS(port, ca: ca, ["--http2"] + send, "/fcm/send")
        XCTAssertTrue(h2.hasSuffix("\n2 200") && h2.contains(#""success":1,"failure":0"#), h2)
        let h1 = try curlHTTPS(port, ca: ca, host: "oauth2.googleapis.com", ["--http1.1"] + send, "/fcm/send")
        XCTAssertTrue(h1.hasSuffix("\n1.1 200") && h1.contains(#""success":1,"failure":0"#), h1)
        // Keep-alive through the HTTP/1.1 bridge: two requests, one connection.
        let twice = try curl(["--resolve", "iid.googleapis.com:\(port):127.0.0.1", "--cacert", ca, "--http1.1", "-w", " %{num_connects}",
                              "https://iid.googleapis.com:\(port)/api/v1/health", "https://iid.googleapis.com:\(port)/api/v1/health"])
        XCTAssertEqual(twice.status, 0, twice.stderr)
        XCTAssertTrue(twice.stdout.hasSuffix(" 0"), "the second request reuses the connection: \(twice.stdout)")
        // nghttp: ALPN picks h2; many streams on one TLS connection.
        let n = try runProcess(try HTTP2Tests.tool("nghttp"), ["-nv", "-m", "50", "https://127.0.0.1:\(port)/api/v1/health"])
        XCTAssertEqual(n.status, 0, n.stderr)
        XCTAssertTrue(n.stdout.contains("The negotiated protocol: h2"), n.stdout.prefix(1500).description)
        XCTAssertEqual(n.stdout.components(separatedBy: ":status: 200").count - 1, 50)
        // The plain port is unchanged (HTTP/1.1 and h2c).
        XCTAssertEqual(try s.client().get("/api/v1/health").status, 200)
    }

    /// A service account's `token_uri` names the scheme and host the caller used: https on the
    /// HTTPS port (HTTP/2 and the HTTP/1.1 bridge alike), http on the plain one; an assertion
    /// whose `aud` is that `token_uri` is taken there (as Go's oauth2 sends it).
    func testServiceAccountTokenURIFollowsTheCallersScheme() throws {
        let s = try TestServer(extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        defer { s.stop() }
        let port = try XCTUnwrap(s.app.httpsPort)
        let make = ["-X", "POST", "-H", "Content-Type: application/json", "-d", "{}"]
        let path = "/api/v1/projects/\(DemoProject.senderID)/service-accounts"
        for (flag, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
            let out = try curlHTTPS(port, ca: dir + "/tls/ca.pem", host: "oauth2.googleapis.com", [flag] + make, path)
            XCTAssertTrue(out.hasSuffix("\n\(version) 201"), out)
            XCTAssertTrue(out.contains(#""token_uri":"https://oauth2.googleapis.com:\#(port)/token""#), out)
            let sa = try XCTUnwrap(try JSONParser.parse(Array(out.utf8.prefix { $0 != 10 })).objectValue)
            let tokenURI = try XCTUnwrap(sa["token_uri"]?.stringValue)
            let key = try RSAPrivateKey(pem: try XCTUnwrap(sa["private_key"]?.stringValue))
            let now = Int64(Date().timeIntervalSince1970)
            let header = #"{"alg":"RS256","typ":"JWT","kid":"\#(sa["private_key_id"]?.stringValue ?? "")"}"#
            let claims = #"{"iss":"\#(sa["client_email"]?.stringValue ?? "")","scope":"https://www.googleapis.com/auth/firebase.messaging","aud":"\#(tokenURI)","iat":\#(now),"exp":\#(now + 3600)}"#
            let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(claims.utf8))
            let jwt = input + "." + base64URLEncode(try key.signRS256(Array(input.utf8)))
            let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + jwt
            let token = try curlHTTPS(port, ca: dir + "/tls/ca.pem", host: "oauth2.googleapis.com", [flag, "-d", grant], "/token")
            XCTAssertTrue(token.hasSuffix("\n\(version) 200") && token.contains(#""access_token":"ya29."#), token)
        }
        let plain = try s.client().postJSON(path, "{}")
        XCTAssertEqual(plain.status, 201)
        XCTAssertTrue(plain.text.contains(#""token_uri":"http://127.0.0.1:\#(s.port)/token""#), plain.text)
    }

    func testLocalCAIsKeptBesideTheStoreAndServed() throws {
        let db = dir + "/store.sqlite"
        var first: String
        do {
            let s = try TestServer(db: db, extraArguments: ["--https-port", "0"])
            defer { s.stop() }
            let health = try s.client().get("/api/v1/health")
            let ca = URL(fileURLWithPath: dir + "/tls/ca.pem").standardizedFileURL.path
            XCTAssertTrue(health.text.contains(#""tls_ca":"\#(ca)""#), health.text)
            let served = try s.client().get("/api/v1/tls/ca.pem")
            XCTAssertEqual(served.status, 200)
            first = try String(contentsOfFile: ca, encoding: .utf8)
            XCTAssertEqual(served.text, first)
            XCTAssertTrue(first.hasPrefix("-----BEGIN CERTIFICATE-----"), first)
        }
        // A restart on the same data folder keeps the CA: a client that trusted it still does.
        let s = try TestServer(db: db, extraArguments: ["--https-port", "0"])
        defer { s.stop() }
        XCTAssertEqual(try String(contentsOfFile: dir + "/tls/ca.pem", encoding: .utf8), first)
        let port = try XCTUnwrap(s.app.httpsPort)
        let out = try curlHTTPS(port, ca: dir + "/tls/ca.pem", ["--http2"], "/api/v1/health")
        XCTAssertTrue(out.hasSuffix("\n2 200"), out)
    }

    func testACAMadeForFewerHostsGetsANewServerCertificateFromTheSameCA() throws {
        // As an older version left it: the CA and a server certificate for two names only.
        let old = try LocalCertificateAuthority.create(names: ["localhost", "127.0.0.1"], directory: dir + "/tls")
        let caPEM = try String(contentsOfFile: old.caCertificate, encoding: .utf8)
        let s = try TestServer(extraArguments: ["--https-port", "0", "--tls-dir", dir + "/tls"])
        defer { s.stop() }
        XCTAssertEqual(try String(contentsOfFile: old.caCertificate, encoding: .utf8), caPEM, "clients' trust in ca.pem holds")
        let port = try XCTUnwrap(s.app.httpsPort)
        // The hosts the newer version serves, through the same ca.pem.
        for host in ["mtalk.google.com", "android.clients.google.com", "api.push.apple.com"] {
            let out = try curlHTTPS(port, ca: old.caCertificate, host: host, ["--http1.1"], "/api/v1/health")
            XCTAssertTrue(out.hasSuffix("\n1.1 200"), "\(host): \(out)")
        }
    }

    func testNoLocalCAWithoutHTTPSPortOrWithAGivenCertificate() throws {
        let plain = try TestServer()
        defer { plain.stop() }
        XCTAssertTrue(try plain.client().get("/api/v1/health").text.contains(#""tls_ca":null"#))
        let missing = try plain.client().get("/api/v1/tls/ca.pem")
        XCTAssertEqual(missing.status, 404)
        XCTAssertTrue(missing.text.hasPrefix(#"{"error":{"code":"#), missing.text)

        let out = dir + "/certs"
        XCTAssertEqual(try runBinary(["cert", "--out", out]).status, 0)
        let given = try TestServer(extraArguments: ["--https-port", "0", "--tls-cert", out + "/server.pem", "--tls-key", out + "/server.key"])
        defer { given.stop() }
        XCTAssertTrue(try given.client().get("/api/v1/health").text.contains(#""tls_ca":null"#))
        XCTAssertEqual(try given.client().get("/api/v1/tls/ca.pem").status, 404)
        let port = try XCTUnwrap(given.app.httpsPort)
        XCTAssertTrue(try curlHTTPS(port, ca: out + "/ca.pem", ["--http2"], "/api/v1/health").hasSuffix("\n2 200"))
    }

    func testHTTPSPortFlagsAndListeningLine() throws {
        let c = try Configuration.parse(arguments: [], environment: ["FCM_MOCK_HTTPS_PORT": "8443", "FCM_MOCK_TLS_DIR": "/x/tls"])
        XCTAssertEqual(c.httpsPort, 8443)
        XCTAssertEqual(c.tlsDirectory, "/x/tls")
        XCTAssertNil(try Configuration.parse(arguments: [], environment: [:]).httpsPort)
        XCTAssertEqual(try Configuration.parse(arguments: [], environment: [:]).tlsDirectory, "./data/tls")
        XCTAssertEqual(try Configuration.parse(arguments: ["--db", "/var/lib/m/s.db"], environment: [:]).tlsDirectory, "/var/lib/m/tls")
        XCTAssertNil(try Configuration.parse(arguments: ["--db", ":memory:"], environment: [:]).tlsDirectory)
        XCTAssertThrowsError(try Configuration.parse(arguments: ["--https-port", "70000"], environment: [:]))
        // With :memory: and no --tls-dir, the CA goes to a fresh temporary folder, logged.
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--https-port", "0"])
        defer { s.stop() }
        let port = try XCTUnwrap(s.httpsPort)
        let log = String(decoding: s.takeStderr(waitingFor: "tls.ca="), as: UTF8.self)
        let ca = try XCTUnwrap(log.components(separatedBy: "tls.ca=").dropFirst().first?.prefix { !$0.isWhitespace })
        XCTAssertTrue(ca.hasSuffix("/ca.pem"), log)
        XCTAssertTrue(try curlHTTPS(port, ca: String(ca), ["--http2"], "/api/v1/health").hasSuffix("\n2 200"))
    }
}
