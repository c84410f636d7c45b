import HTTPServer
import FCMCore
import FCMServer
import FCMTesting
import Foundation
import Platform
import XCTest

/// What the binary tells a newcomer: log lines that say why, help that knows every protocol,
/// a busy-port line that names every busy port, and a warning before a key lands in git.
final class DiagnosticsBinaryTests: XCTestCase {
    /// Everything the server wrote to stderr until `text` shows up in it (at most 10 s).
    func stderr(of s: BinaryServer, until text: String) -> String {
        var seen = ""
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            seen += String(decoding: s.takeStderr(), as: UTF8.self)
            if seen.contains(text) { break }
        }
        return seen
    }

    /// A v1 401, a token endpoint refusal and a plain-text InvalidParameters each log why.
    func testRefusalsAndHintsAreLoggedWithTheirReason() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let c = s.client()
        _ = s.takeStderr()
        let v1 = try c.postJSON("/v1/projects/demo-project/messages:send", #"{"message":{"token":"demo-android-1"}}"#)
        XCTAssertEqual(v1.status, 401)
        let v1Line = stderr(of: s, until: "v1 request refused")
        XCTAssertTrue(v1Line.contains(" info v1 request refused http.path=/v1/projects/demo-project/messages:send status=401 "
                                      + "error=UNAUTHENTICATED reason=no Authorization header auth=-\n"), v1Line)

        let unknownKey = base64URLEncode(Array(#"{"alg":"RS256","typ":"JWT","kid":"no-such-key"}"#.utf8)) + "."
            + base64URLEncode(Array("{}".utf8)) + "." + base64URLEncode(Array("sig".utf8))
        let token = try c.request("POST", "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                  body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(unknownKey)".utf8))
        XCTAssertEqual(token.text, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#, "Google's text, unchanged")
        let tokenLine = stderr(of: s, until: "token request refused")
        XCTAssertTrue(tokenLine.contains(" info token request refused error=invalid_grant reason=kid no-such-key is no service account's key"),
                      tokenLine)

        let plain = try c.request("POST", "/fcm/send", headers: [("Authorization", "key=\(DemoProject.serverKey)")],
                                  body: Array(#"{"to":"demo-android-1"}"#.utf8))
        XCTAssertEqual(plain.status, 400)
        XCTAssertEqual(plain.text, "Error=InvalidParameters\n")
        let hint = stderr(of: s, until: "InvalidParameters")
        XCTAssertTrue(hint.contains(" info send answered Error=InvalidParameters http.path=/fcm/send error_detail=Unknown parameter "), hint)
        XCTAssertTrue(hint.contains(" hint=the body is JSON but was read as a form: add the header Content-Type: application/json\n"), hint)
    }

    /// An APNs refusal logs why (Apple's answer names only the reason), with the credential masked.
    func testAnAPNsRefusalIsLoggedWithItsReason() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        _ = s.takeStderr()
        let r = try runProcess("/usr/bin/env", ["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-o", "/dev/null",
                                                "-w", "%{http_code}", "-X", "POST", "-H", "apns-topic: com.example.demo.ios",
                                                "-H", "authorization: bearer not.a.token", "-d", "{}",
                                                "http://127.0.0.1:\(s.httpPort)/3/device/\(String(repeating: "ab", count: 32))"])
        XCTAssertNotEqual(r.status, 127, "curl is not installed (make deps installs it)")
        XCTAssertEqual(r.stdout, "403", r.stderr)
        let line = stderr(of: s, until: "apns request refused")
        XCTAssertTrue(line.contains(" info apns request refused http.path=/3/device/\(String(repeating: "ab", count: 32)) status=403 "
                                    + "reason=InvalidProviderToken detail=the provider token is not an ES256 JWT with a kid: "), line)
        XCTAssertTrue(line.contains(" auth=bearer ***"), line)
        XCTAssertFalse(line.contains("not.a.token"), "the credential is never logged")
    }

    /// The start-up line names the HTTPS and MCS ports, or says they are off; the local CA's line
    /// names the listeners that use it.
    func testStartedLineNamesTheHTTPSPort() throws {
        let dir = try temporaryDirectory("https-started")
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--https-port", "0", "--tls-dir", dir])
        let https = try XCTUnwrap(s.httpsPort)
        let line = stderr(of: s, until: " started ")
        XCTAssertTrue(line.contains(" http.port=\(s.httpPort) http.tls=false https.port=\(https) xmpp.port=\(s.xmppPort) "), line)
        XCTAssertTrue(line.contains(" mcs.port=off "), line)
        s.stop()
        let plain = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { plain.stop() }
        XCTAssertTrue(stderr(of: plain, until: " started ").contains(" https.port=off "))
        let mcsDir = try temporaryDirectory("mcs-started")
        let mcs = try BinaryServer(arguments: ["--db", ":memory:", "--mcs-port", "0", "--tls-dir", mcsDir])
        defer { mcs.stop() }
        let mcsLine = stderr(of: mcs, until: " started ")
        XCTAssertTrue(mcsLine.contains("made a local CA for --mcs-port (clients trust its ca.pem once)"), mcsLine)
        XCTAssertTrue(mcsLine.contains(" https.port=off ") && !mcsLine.contains(" mcs.port=off "), mcsLine)
    }

    /// With XMPP's and HTTP's ports both taken, one run names both.
    func testBothBusyPortsInOneLine() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let r = try runBinary(["serve", "--http-port", String(s.httpPort), "--xmpp-port", String(s.xmppPort), "--db", ":memory:"])
        XCTAssertEqual(r.status, 2)
        // (After the line that says which CA the HTTPS port uses.)
        XCTAssertEqual(r.stderr.split(separator: "\n").last.map { String($0) + "\n" }, "fcm-mock: cannot listen on 127.0.0.1:\(s.xmppPort) for XMPP (--xmpp-port) and 127.0.0.1:\(s.httpPort) "
                       + "for HTTP (--http-port): Address already in use; is another fcm-mock running? Give --xmpp-port N, "
                       + "--http-port N, or --http-port 0 --xmpp-port 0 to pick free ports\n")
    }

    /// A run that picks its ports (`--http-port 0`) and leaves XMPP's to its default takes a free
    /// one when 5235 is in use (another server started the same way), and says so; a port given
    /// is never replaced.
    func testATakenDefaultXMPPPortIsReplacedWhenTheRunPicksItsPorts() throws {
        // 5235 taken here, or by whoever has it already.
        let holder = try? ListenSocket.open(host: "127.0.0.1", port: 5235)
        defer { if let holder { close(holder.0) } }
        let s = try BinaryServer(arguments: ["--db", ":memory:"], pickXMPPPort: false)
        defer { s.stop() }
        XCTAssertNotEqual(s.xmppPort, 5235)
        let err = String(decoding: s.takeStderr(waitingFor: "default XMPP port"), as: UTF8.self)
        XCTAssertTrue(err.contains("the default XMPP port is in use: listening on another (give --xmpp-port to choose)"), err)
        XCTAssertTrue(err.contains("xmpp=127.0.0.1:\(s.xmppPort)"), err)
        // Given, the port is the caller's (checked while this test holds it, so nothing can let it go meanwhile).
        guard holder != nil else { return }
        let given = try runBinary(["serve", "--http-port", "0", "--xmpp-port", "5235", "--db", ":memory:"])
        XCTAssertEqual(given.status, 2)
        XCTAssertTrue(given.stderr.contains("cannot listen on 127.0.0.1:5235 for XMPP (--xmpp-port)"), given.stderr)
    }

    /// A taken HTTPS port is named with its flag, and the way to free ports names it too; a
    /// second server on the same store names the HTTPS port among the taken ones.
    func testABusyHTTPSPortIsNamedWithItsFlag() throws {
        let dir = try temporaryDirectory("busy-https")
        let db = dir + "/store.sqlite"
        let s = try BinaryServer(arguments: ["--db", db, "--https-port", "0", "--tls-dir", dir])
        defer { s.stop() }
        let https = try XCTUnwrap(s.httpsPort)
        let r = try runBinary(["serve", "--http-port", "0", "--xmpp-port", "0", "--https-port", String(https), "--tls-dir", dir,
                               "--db", ":memory:"])
        XCTAssertEqual(r.status, 2)
        // (After the line that says which CA the HTTPS port uses.)
        XCTAssertEqual(r.stderr.split(separator: "\n").last.map { String($0) + "\n" }, "fcm-mock: cannot listen on 127.0.0.1:\(https) for HTTPS (--https-port): Address already in use; "
                       + "is another fcm-mock running? Give --https-port N, or --http-port 0 --xmpp-port 0 --https-port 0 to pick free ports\n")
        let again = try runBinary(["serve", "--http-port", "0", "--xmpp-port", "0", "--https-port", String(https), "--tls-dir", dir,
                                   "--db", db])
        XCTAssertEqual(again.status, 2)
        XCTAssertTrue(again.stderr.hasSuffix("; 127.0.0.1:\(https) (--https-port) is taken too: give other ports (0 picks free ones)\n"),
                      again.stderr)
    }

    /// The overview's first lines name the three protocols, and serve's help the path of each.
    func testHelpNamesEveryProtocolAndItsPath() throws {
        let overview = try runBinary(["--help"])
        XCTAssertEqual(overview.status, 0)
        let first = overview.stdout.split(separator: "\n").prefix(2).joined(separator: " ")
        for name in ["Firebase Cloud Messaging", "HTTP v1", "XMPP", "APNs", "Web Push"] {
            XCTAssertTrue(first.contains(name), "\(name) in: \(first)")
        }
        XCTAssertTrue(overview.stdout.contains("HTTPS and HTTP/2 under Google's and Apple's host names"), overview.stdout)
        let serve = try runBinary(["serve", "--help"])
        for path in ["/v1/projects/{project}/messages:send", "/token", "/fcm/send", "XMPP connection server (CCS)",
                     "/3/device/{token}", "/wp/{id}", "/api/v1"] {
            XCTAssertTrue(serve.stdout.contains(path), "\(path) in: \(serve.stdout)")
        }
        XCTAssertTrue(serve.stdout.contains("with --https-port, on HTTPS too"), serve.stdout)
        XCTAssertTrue(serve.stdout.contains("(2 KiB each;"), "the store's page size")
    }

    /// `service-account --out` inside a git work tree warns on stderr (and still writes the
    /// file); outside one it says nothing.
    func testAKeyWrittenInsideAGitWorkTreeIsWarnedAbout() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let url = "http://127.0.0.1:\(s.httpPort)"
        let repo = try temporaryDirectory("git-tree")
        try FileManager.default.createDirectory(atPath: repo + "/.git", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: repo + "/sub", withIntermediateDirectories: true)
        let inside = try runBinary(["service-account", "--server", url, "--project", "demo-project", "--out", repo + "/sub/sa.json"])
        XCTAssertEqual(inside.status, 0, inside.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: repo + "/sub/sa.json"))
        XCTAssertEqual(inside.stderr, "fcm-mock: warning: \(repo)/sub/sa.json holds a private key and is inside the git work tree "
                       + "\(repo): keep it out of commits (.gitignore it) or write it elsewhere\n")
        let outside = try temporaryDirectory("no-git")
        let quiet = try runBinary(["service-account", "--server", url, "--project", "demo-project", "--out", outside + "/sa.json"])
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stderr, "")
        // `cert` writes keys too.
        let cert = try runBinary(["cert", "--out", repo + "/certs"])
        XCTAssertEqual(cert.status, 0, cert.stderr)
        XCTAssertTrue(cert.stderr.contains("/certs/ca.key holds a private key and is inside the git work tree \(repo):"), cert.stderr)
    }
}
