@testable import RoomKit
import XCTest

@testable import FCMEngine
@testable import FCMModel
@testable import FCMServer
@testable import HTTPServer

/// The route matcher on its own (Router.swift), table-driven.
final class RouterTests: XCTestCase {
    let router = Router<String>([
        ("GET",    "/fcm/send",              "send-get"),
        ("*",      "/fcm/send",              "send"),
        ("POST",   "/x:verb",                "literal-colon"),
        ("GET",    "/a/{x}",                 "a"),
        ("POST",   "/a/{x}:do",              "a-do"),
        ("GET",    "/a/{x}/b/{y}",           "ab"),
        ("GET",    "/a/fixed",               "a-fixed"),
        ("GET",    "/e/{x?}",                "e"),
        ("POST",   "/v/{v}/m:send",          "v-send"),
        ("*",      "/p/...",                 "p"),
        ("*",      "/p/q/...",               "pq"),
    ], otherwise: "404")

    func testMatches() {
        // (method, path, handler, raw parameter values)
        let cases: [(String, String, String, [String])] = [
            ("GET", "/fcm/send", "send-get", []),
            ("POST", "/fcm/send", "send", []),
            // HEAD takes the GET route (its answer's head, RFC 9110 §9.3.2).
            ("HEAD", "/fcm/send", "send-get", []),
            ("HEAD", "/a/tok", "a", ["tok"]),
            ("HEAD", "/v/1/m:send", "404", []),
            ("POST", "/fcm/send/", "404", []),
            ("POST", "/fcm//send", "404", []),
            ("POST", "/x:verb", "literal-colon", []),
            ("POST", "/x:verbs", "404", []),
            ("GET", "/a/tok", "a", ["tok"]),
            ("GET", "/a/fixed", "a-fixed", []),
            ("GET", "/a/t:k", "a", ["t:k"]),
            ("GET", "/a/%41%2F", "a", ["%41%2F"]),
            // {x} takes a non-empty segment; trailing slashes and empty segments match nothing.
            ("GET", "/a/", "404", []),
            ("GET", "/a", "404", []),
            ("GET", "/a/tok/", "404", []),
            ("GET", "/a//b/c", "404", []),
            ("GET", "/a/t/b/", "404", []),
            ("GET", "/a/t/b/u", "ab", ["t", "u"]),
            ("GET", "/a/t/c/u", "404", []),
            // The verb follows the segment's last colon; what precedes it may be empty.
            ("POST", "/a/t:do", "a-do", ["t"]),
            ("POST", "/a/t:k:do", "a-do", ["t:k"]),
            ("POST", "/a/:do", "a-do", [""]),
            ("POST", "/a/t:do:x", "404", []),
            ("POST", "/a/t:dox", "404", []),
            ("POST", "/a/t%3Ado", "404", []),
            ("GET", "/a/t:do", "a", ["t:do"]),
            ("POST", "/v/p1/m:send", "v-send", ["p1"]),
            // One parameter between literals is matched on bytes: the same rules.
            ("POST", "/v//m:send", "404", []),
            ("POST", "/v/a/b/m:send", "404", []),
            ("POST", "/v/p1/m:sendx", "404", []),
            ("POST", "/v/p1/m:send/", "404", []),
            ("POST", "/v/p1m:send", "404", []),
            ("POST", "/v/é:ü/m:send", "v-send", ["é:ü"]),
            // {x?} takes an empty segment too.
            ("GET", "/e/", "e", [""]),
            ("GET", "/e/z", "e", ["z"]),
            ("GET", "/e", "404", []),
            // Another method falls through to what else matches.
            ("PUT", "/a/tok", "404", []),
            ("DELETE", "/a/t/b/u", "404", []),
            // Prefixes: the longest wins; the bare prefix needs its slash.
            ("GET", "/p/", "p", []),
            ("PUT", "/p/x/y", "p", []),
            ("GET", "/p/q/r", "pq", []),
            ("GET", "/p/q", "p", []),
            ("GET", "/p", "404", []),
            ("OPTIONS", "*", "404", []),
            ("GET", "", "404", []),
        ]
        for (method, path, handler, values) in cases {
            let m = router.match(method, path)
            XCTAssertEqual(m.handler, handler, "\(method) \(path)")
            XCTAssertEqual(m.params.values.map(String.init), values, "\(method) \(path)")
        }
    }

    /// Paths are cut on bytes; characters beyond ASCII and empty pieces come through whole.
    func testSegmentsAndFirstSegment() {
        XCTAssertEqual(RouteTable.segments("/a//é☃/b:c/"), ["", "a", "", "é☃", "b:c", ""])
        XCTAssertEqual(RouteTable.segments("/"), ["", ""])
        XCTAssertEqual(RouteTable.segments("x"), ["x"])
        XCTAssertEqual(RouteTable.firstSegment("/v1/projects/p"), "v1")
        XCTAssertEqual(RouteTable.firstSegment("/ünï/x"), "ünï")
        XCTAssertEqual(RouteTable.firstSegment("/only"), "only")
        XCTAssertEqual(RouteTable.firstSegment("/"), "")
        XCTAssertEqual(RouteTable.firstSegment("nope/x"), "")
        XCTAssertEqual(router.match("POST", "/a/é☃:do").handler, "a-do")
        XCTAssertEqual(router.match("POST", "/a/é☃:do").params["x"], "é☃")
    }

    func testParametersByNameAndDecoded() throws {
        let m = router.match("GET", "/a/t%2Bk+1/b/%E2%9C%93%3A")
        XCTAssertEqual(m.handler, "ab")
        XCTAssertEqual(m.params["x"], "t%2Bk+1")
        XCTAssertNil(m.params["z"])
        let decoded = try m.params.decoded()
        // `+` stays a plus in a path.
        XCTAssertEqual(decoded["x"], "t+k+1")
        XCTAssertEqual(decoded["y"], "✓:")
        XCTAssertEqual(router.match("POST", "/a/%E2%9C%93:do").params.values, ["%E2%9C%93"])
    }

    func testBadPercentEncodingIsABadRequest() {
        for raw in ["%ZZ", "%4", "%", "%C3"] {
            XCTAssertThrowsError(try router.match("GET", "/a/\(raw)").params.decoded(), raw) { error in
                XCTAssertEqual(error as? ControlError, .badRequest("bad percent-encoding in path"))
            }
        }
    }

    func testLiteralsWinOverParametersAndParametersOverPrefixes() {
        let r = Router<String>([
            ("*", "/api/...", "prefix"),
            ("GET", "/api/{x}", "param"),
            ("GET", "/api/health", "literal"),
        ], otherwise: "404")
        XCTAssertEqual(r.match("GET", "/api/health").handler, "literal")
        XCTAssertEqual(r.match("GET", "/api/other").handler, "param")
        XCTAssertEqual(r.match("POST", "/api/health").handler, "prefix")
        XCTAssertEqual(r.match("GET", "/api/a/b").handler, "prefix")
        XCTAssertEqual(r.match("GET", "/api").handler, "404")
    }

    func testControlErrorCodes() {
        let codes = ControlError.Code.allCases.map { "\($0.rawValue) \($0.status)" }
        XCTAssertEqual(codes, ["bad_request 400", "unauthorized 401", "not_found 404", "conflict 409",
                               "payload_too_large 413", "internal 500", "unavailable 503"])
        XCTAssertEqual(ControlError.notFound("x").status, 404)
        XCTAssertEqual(ControlError.internal("x").code, .internal)
    }
}
