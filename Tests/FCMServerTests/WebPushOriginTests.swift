@testable import FCMModel
import FCMCore
import FCMEngine
@testable import FCMServer
import FCMTesting
import HTTPServer
import Foundation
import XCTest

/// Where Web Push endpoints point (docs/spec/webpush.md section 1): on the mock itself in every
/// configuration unless `--web-push-origin` (`FCM_MOCK_WEB_PUSH_ORIGIN`) names another origin, so
/// a test that posts to a subscription never reaches a real push service by accident.
final class WebPushOriginTests: XCTestCase {
    var server: TestServer?

    override func tearDown() {
        server?.stop()
    }

    /// The configurations a test suite may start the mock in without saying where endpoints go,
    /// and the origin each one's endpoints must have: the plain port's, or, when no port speaks
    /// plain HTTP, the HTTPS port's.
    static let configurations: [(name: String, arguments: [String])] = [
        ("plain port only", []),
        ("plain and HTTPS ports", ["--https-port", "0"]),
        ("HTTPS only (--http-tls)", ["--http-tls"]),
        ("HTTPS only, two ports (--http-tls --https-port)", ["--http-tls", "--https-port", "0"]),
        ("every interface", ["--host", "0.0.0.0"]),
    ]

    func testNoDefaultConfigurationHandsOutAnEndpointOnAPublicHost() throws {
        let curl = try HTTP2Tests.tool("curl")
        for (name, arguments) in Self.configurations {
            let s = try TestServer(extraArguments: arguments)
            server = s
            let tls = arguments.contains("--http-tls")
            let control = "\(tls ? "https" : "http")://127.0.0.1:\(s.port)"
            let expected = tls ? "https://127.0.0.1:\(s.app.httpsPort ?? s.port)" : "http://127.0.0.1:\(s.port)"
            // -k: the self-signed certificate of --http-tls; the endpoint is what is checked here.
            func call(_ args: [String]) throws -> String {
                let r = try runProcess(curl, ["-sS", "-k", "--max-time", "20"] + args)
                XCTAssertEqual(r.status, 0, "\(name): curl \(args): \(r.stderr)")
                return r.stdout
            }
            let made = try JSONParser.parse(try call([
                "-X", "POST", control + "/api/v1/devices",
                "-d", #"{"sender_id":"123456789012","app":"com.example.demo.web","platform":"web"}"#,
            ]))
            let fixture = try JSONParser.parse(try call([control + "/api/v1/devices/demo-web-1"]))
            for device in [made, fixture] {
                let endpoint = try XCTUnwrap(device.objectValue?["web_push"]?.objectValue?["endpoint"]?.stringValue,
                                             "\(name): \(device.serialized())")
                let url = try XCTUnwrap(URLComponents(string: endpoint), endpoint)
                XCTAssertEqual(url.host, "127.0.0.1", "\(name): \(endpoint) leaves the machine")
                XCTAssertTrue(endpoint.hasPrefix(expected + "/wp/"), "\(name): \(endpoint), not on \(expected)")
                // The endpoint is the mock's own: a push to it as the library would send it is taken.
                let status = try call(["-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "TTL: 0", endpoint])
                XCTAssertEqual(status, "201", "\(name): POST \(endpoint)")
            }
            let health = try JSONParser.parse(try call([control + "/api/v1/health"]))
            XCTAssertEqual(health.objectValue?["webpush"]?.objectValue?["endpoint_base"]?.stringValue, expected, name)
            s.stop()
            server = nil
        }
    }

    func testGooglesHostOnlyWhenAskedByFlagOrEnvironment() throws {
        let google = "https://fcm.googleapis.com"
        for (arguments, environment) in [(["--web-push-origin", google], [:]),
                                         (["--web-push-origin=\(google)/"], [:]),
                                         ([], ["FCM_MOCK_WEB_PUSH_ORIGIN": google])] {
            XCTAssertEqual(try Configuration.parse(arguments: arguments, environment: environment).webPushOrigin, google,
                           "\(arguments) \(environment)")
        }
        XCTAssertNil(try Configuration.parse(arguments: [], environment: [:]).webPushOrigin)
        XCTAssertNil(try Configuration.parse(arguments: [], environment: ["FCM_MOCK_WEB_PUSH_ORIGIN": ""]).webPushOrigin)
        // The flag wins over the variable.
        XCTAssertEqual(try Configuration.parse(arguments: ["--web-push-origin", "http://10.0.0.5:8080"],
                                               environment: ["FCM_MOCK_WEB_PUSH_ORIGIN": google]).webPushOrigin,
                       "http://10.0.0.5:8080")
        for good in ["http://localhost:8080", "https://[::1]:8443", "HTTPS://push.example.test", "http://127.0.0.1"] {
            XCTAssertNoThrow(try Configuration.parse(arguments: ["--web-push-origin", good], environment: [:]), good)
        }

        // End to end: an HTTPS port and the flag, Google's host in every endpoint and in health.
        let s = try TestServer(extraArguments: ["--https-port", "0", "--web-push-origin", google])
        server = s
        let d = try WebPushSubscriptionTests.createWebDevice(s.client())
        let endpoint = try XCTUnwrap(d["web_push"]?.objectValue?["endpoint"]?.stringValue)
        XCTAssertTrue(endpoint.hasPrefix(google + "/wp/"), endpoint)
        let fixture = try s.client().request("GET", "/api/v1/devices/demo-web-1").object
        XCTAssertTrue(fixture?["web_push"]?.objectValue?["endpoint"]?.stringValue?.hasPrefix(google + "/wp/") == true)
        let health = try s.client().request("GET", "/api/v1/health").object
        XCTAssertEqual(health?["webpush"]?.objectValue?["endpoint_base"]?.stringValue, google)
    }

    func testABadOriginIsRefusedWithOneClearLine() {
        let bad = ["fcm.googleapis.com", "ftp://fcm.googleapis.com", "https://", "https://fcm.googleapis.com/wp",
                   "https://fcm.googleapis.com/fcm/send", "https://fcm.googleapis.com?x=1", "https://fcm.googleapis.com#x",
                   "https://user@fcm.googleapis.com", "https://fcm.googleapis.com:", "https://fcm.googleapis.com:99999",
                   "https://fcm.googleapis.com:port", "https://fcm googleapis.com", "https://[::1", "//fcm.googleapis.com"]
        for value in bad {
            for (arguments, environment, name) in [(["--web-push-origin", value], [String: String](), "--web-push-origin"),
                                                   ([], ["FCM_MOCK_WEB_PUSH_ORIGIN": value], "FCM_MOCK_WEB_PUSH_ORIGIN")] {
                XCTAssertThrowsError(try Configuration.parse(arguments: arguments, environment: environment), value) { error in
                    let line = (error as? ConfigurationError)?.description ?? "\(error)"
                    XCTAssertTrue(line.hasPrefix("\(name) must be an http:// or https:// origin with no path"), line)
                    XCTAssertTrue(line.contains("'\(value)'"), line)
                    XCTAssertFalse(line.contains("\n"), line)
                }
            }
        }
        XCTAssertThrowsError(try Configuration.parse(arguments: ["--web-push-origin"], environment: [:]))
    }

    /// The binary: a bad value stops it with exit code 2 before anything listens.
    func testTheBinaryRefusesABadOrigin() throws {
        let r = try runProcess(BinaryServer.executablePath, ["serve", "--http-port", "0", "--xmpp-port", "0", "--db", ":memory:",
                                                         "--web-push-origin", "https://fcm.googleapis.com/wp/"])
        XCTAssertEqual(r.status, 2, r.stderr)
        XCTAssertEqual(r.stdout, "")
        XCTAssertTrue(r.stderr.hasPrefix("fcm-mock: --web-push-origin must be an http:// or https:// origin"), r.stderr)
    }
}
