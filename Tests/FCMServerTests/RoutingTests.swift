import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// What each surface answers for paths and methods it does not know, byte for byte (the head's
/// lines but `Date`, then the body), over a real socket.
final class RoutingTests: XCTestCase {
    /// Sends one request with `Connection: close` and returns the whole answer: the head's lines
    /// but `Date`, a blank line, the body.
    static func exchange(_ port: Int, _ method: String, _ path: String, headers: [(String, String)] = [],
                         body: [UInt8] = []) throws -> String {
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PUT" { head += "Content-Length: \(body.count)\r\n" }
        let out = Array((head + "\r\n").utf8) + body
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestError("send failed") }
            sent += n
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { throw TestError("no end of head in: \(text)") }
        let lines = text[..<end.lowerBound].components(separatedBy: "\r\n").filter { !$0.lowercased().hasPrefix("date:") }
        return lines.joined(separator: "\n") + "\n\n" + text[end.upperBound...]
    }

    func testFallbacksOfEachSurface() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let key = [("Authorization", "key=key-111"), ("project_id", "111")]
        let cases: [(String, String, [(String, String)], String)] = [
            ("GET", "/nope", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Content-Length: 17

                Not Found: /nope

                """),
            ("GET", "/api/v1", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Content-Length: 19

                Not Found: /api/v1

                """),
            ("GET", "/fcm/send/", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Content-Length: 22

                Not Found: /fcm/send/

                """),
            ("GET", "/api/v1/nope", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 73

                {"error":{"code":"not_found","message":"no such call: GET /api/v1/nope"}}
                """),
            ("PUT", "/api/v1/health", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 75

                {"error":{"code":"not_found","message":"no such call: PUT /api/v1/health"}}
                """),
            ("GET", "/api/v1/devices/", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 77

                {"error":{"code":"not_found","message":"no such call: GET /api/v1/devices/"}}
                """),
            // A device token that does not decode is a 400 whatever the call.
            ("PUT", "/api/v1/devices/%ZZ", [], """
                HTTP/1.1 400 Bad Request
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 73

                {"error":{"code":"bad_request","message":"bad percent-encoding in path"}}
                """),
            ("PUT", "/api/v1/projects/%ZZ", [], """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 81

                {"error":{"code":"not_found","message":"no such call: PUT /api/v1/projects/%ZZ"}}
                """),
            ("GET", "/api/v1/nope?x=%ZZ", [], """
                HTTP/1.1 400 Bad Request
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 85

                {"error":{"code":"bad_request","message":"bad percent-encoding in the query string"}}
                """),
            ("GET", "/iid/x", key, """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 33

                {"error":"Not found: GET /iid/x"}
                """),
            ("GET", "/iid/v1:batchAdd", key, """
                HTTP/1.1 404 Not Found
                Connection: close
                Content-Type: application/json; charset=UTF-8
                Content-Length: 43

                {"error":"Not found: GET /iid/v1:batchAdd"}
                """),
            ("GET", "/iid/x", [], """
                HTTP/1.1 401 Unauthorized
                Connection: close
                Content-Type: text/html; charset=UTF-8
                Content-Length: 147

                <HTML>
                <HEAD>
                <TITLE>Unauthorized</TITLE>
                </HEAD>
                <BODY BGCOLOR="#FFFFFF" TEXT="#000000">
                <H1>Unauthorized</H1>
                <H2>Error 401</H2>
                </BODY>
                </HTML>

                """),
            ("GET", "/fcm/send", [], """
                HTTP/1.1 405 Method Not Allowed
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Allow: POST
                Content-Length: 29

                Method Not Allowed: use POST

                """),
            ("PUT", "/gcm/notification", key, """
                HTTP/1.1 405 Method Not Allowed
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Allow: GET, POST
                Content-Length: 19

                Method Not Allowed

                """),
            ("PUT", "/", [], """
                HTTP/1.1 405 Method Not Allowed
                Connection: close
                Content-Type: text/plain; charset=UTF-8
                Content-Length: 19

                Method Not Allowed

                """),
        ]
        for (method, path, headers, expected) in cases {
            XCTAssertEqual(try Self.exchange(s.port, method, path, headers: headers), expected, "\(method) \(path)")
        }
        let head = try Self.exchange(s.port, "HEAD", "/")
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200 OK\nConnection: close\nContent-Type: text/html; charset=UTF-8\nCache-Control: no-store\n"), head)
        XCTAssertTrue(head.hasSuffix("\n\n"), "HEAD has no body: \(head)")
    }

    func testFallbacksWithAControlTokenAndTooLargeBodies() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--control-token", "s3cret"])
        defer { s.stop() }
        let unauthorized = """
            {"error":{"code":"unauthorized","message":"this server needs Authorization: Bearer <control token>"}}
            """
        XCTAssertEqual(try Self.exchange(s.port, "GET", "/api/v1/nope"), """
            HTTP/1.1 401 Unauthorized
            Connection: close
            Content-Type: application/json; charset=UTF-8
            WWW-Authenticate: Bearer realm="fcm-mock control API"
            Content-Length: 101

            \(unauthorized)
            """)
        // The scheme's name in any case; a wrong token is told apart from a missing one.
        XCTAssertTrue(try Self.exchange(s.port, "GET", "/api/v1/devices", headers: [("Authorization", "bearer s3cret")])
            .hasPrefix("HTTP/1.1 200 OK"))
        let wrong = try Self.exchange(s.port, "GET", "/api/v1/devices", headers: [("Authorization", "Bearer s3crets")])
        XCTAssertTrue(wrong.hasPrefix("HTTP/1.1 401 ") && wrong.contains("the control token given is not this server's"), wrong)
        // /api/v1/health is open, whatever the method.
        XCTAssertEqual(try Self.exchange(s.port, "POST", "/api/v1/health"), """
            HTTP/1.1 404 Not Found
            Connection: close
            Content-Type: application/json; charset=UTF-8
            Content-Length: 76

            {"error":{"code":"not_found","message":"no such call: POST /api/v1/health"}}
            """)
        XCTAssertEqual(try Self.exchange(s.port, "PUT", "/"), """
            HTTP/1.1 401 Unauthorized
            Connection: close
            Content-Type: text/plain; charset=UTF-8
            Content-Length: 57

            This server needs its control token: open /?token=SECRET

            """)
        let big = [UInt8](repeating: 0x78, count: (1 << 20) + 1)
        XCTAssertEqual(try Self.exchange(s.port, "POST", "/api/v1/nope", body: big), """
            HTTP/1.1 413 Content Too Large
            Connection: close
            Content-Type: application/json; charset=UTF-8
            Content-Length: 76

            {"error":{"code":"payload_too_large","message":"request body is too large"}}
            """)
        XCTAssertEqual(try Self.exchange(s.port, "POST", "/iid/x", body: big), """
            HTTP/1.1 413 Content Too Large
            Connection: close
            Content-Type: text/plain; charset=UTF-8
            Content-Length: 23

            Request body too large

            """)
        XCTAssertEqual(try Self.exchange(s.port, "PUT", "/fcm/notification", body: big), """
            HTTP/1.1 413 Content Too Large
            Connection: close
            Content-Type: text/plain; charset=UTF-8
            Content-Length: 23

            Request body too large

            """)
        XCTAssertEqual(try Self.exchange(s.port, "POST", "/nope", body: big), """
            HTTP/1.1 404 Not Found
            Connection: close
            Content-Type: text/plain; charset=UTF-8
            Content-Length: 17

            Not Found: /nope

            """)
    }
}
