@testable import Control
import HTTPServer
import FCMCore
@testable import FCMEngine
@testable import FCMServer
import FCMTesting
import Foundation
import TLS
import XCTest

/// The page at `/` as the server serves it (the browser test in Tests/interop drives it live).
final class WebPageTests: XCTestCase {
    func testServedSelfContained() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let r = try s.client().get("/")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.headers["content-type"], "text/html; charset=UTF-8")
        XCTAssertEqual(r.headers["cache-control"], "no-store")
        let html = r.text
        XCTAssertTrue(html.hasPrefix("<!doctype html>"))
        XCTAssertTrue(html.contains("/api/v1/events") && html.contains("EventSource"))
        // Nothing from elsewhere (the SVG namespace is a name the scripts pass to
        // createElementNS, not an address), and values only ever become text.
        let addresses = html.replacingOccurrences(of: "\"http://www.w3.org/2000/svg\"", with: "")
        XCTAssertFalse(addresses.contains("http://") || addresses.contains("https://") || html.contains("src=\""), "no outside resources")
        XCTAssertFalse(html.contains("innerHTML") || html.contains("insertAdjacentHTML") || html.contains("document.write"))
        XCTAssertEqual(try s.client().get("/index.html").status, 200)
        XCTAssertEqual(try s.client().post("/", "").status, 405)
    }

    /// The page is Resources/web/index.html with every .css and .js file of that folder put inline
    /// in place of the link or script element that names it, and nothing else changed.
    func testServedPageIsIndexHTMLWithItsStyleAndScriptsInline() throws {
        let web = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/Control/Resources/web")
        func source(_ name: String) throws -> String {
            try String(contentsOf: web.appendingPathComponent(name), encoding: .utf8)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: web.path)
            .filter { $0.hasSuffix(".css") || $0.hasSuffix(".js") }.sorted()
        XCTAssertTrue(names.contains("page.css") && names.contains("page.js"), "\(names)")
        let template = try source("index.html")
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let html = try s.client().get("/").text
        XCTAssertFalse(html.contains("<link"))
        var undone = html
        for name in names {
            let css = name.hasSuffix(".css")
            let inline = (css ? "<style>\n" : "<script>\n") + (try source(name)) + (css ? "</style>" : "</script>")
            XCTAssertTrue(html.contains(inline), "\(name) is inline")
            undone = undone.replacingOccurrences(
                of: inline, with: css ? #"<link rel="stylesheet" href="\#(name)">"# : #"<script src="\#(name)"></script>"#)
        }
        XCTAssertEqual(undone + "\n", template, "only those elements are replaced (and the final newline dropped)")
    }

    /// The policy is strict: inline code runs only if it is one of the page's own blocks, named by
    /// its SHA-256, and nothing comes from anywhere else. Each hash is worked out here again from
    /// the page as served (Foundation's base64), and the markup around the blocks holds nothing a
    /// hash policy refuses (style or event handler attributes, javascript: URLs).
    func testTheContentSecurityPolicyNamesEachInlineBlockByItsHash() throws {
        let s = try TestServer(fixtures: [errorTableFixture])
        defer { s.stop() }
        let r = try s.client().get("/")
        XCTAssertEqual(r.status, 200)
        let html = r.text
        // Every <script> and <style> element of the page, split out by hand.
        var markup = "", scripts: [String] = [], styles: [String] = []
        var rest = Substring(html)
        while true {
            let script = rest.range(of: "<script>"), style = rest.range(of: "<style>")
            guard let start = [script, style].compactMap({ $0 }).min(by: { $0.lowerBound < $1.lowerBound }) else {
                markup += rest
                break
            }
            let isScript = start == script
            let end = try XCTUnwrap(rest[start.upperBound...].range(of: isScript ? "</script>" : "</style>"))
            markup += rest[..<start.lowerBound]
            let body = String(rest[start.upperBound..<end.lowerBound])
            if isScript { scripts.append(body) } else { styles.append(body) }
            rest = rest[end.upperBound...]
        }
        let names = WebPage.files.keys
        XCTAssertEqual(scripts.count, names.filter { $0.hasSuffix(".js") }.count, "one inline script per file")
        XCTAssertEqual(styles.count, names.filter { $0.hasSuffix(".css") }.count, "one inline style per file")
        func hash(_ block: String) -> String {
            "'sha256-" + Data(SHA256.digest(Array(block.utf8))).base64EncodedString() + "'"
        }
        XCTAssertEqual(r.headers["content-security-policy"],
                       "default-src 'none'; script-src \(scripts.map(hash).joined(separator: " ")); "
                       + "style-src \(styles.map(hash).joined(separator: " ")); connect-src 'self'; object-src 'none'; "
                       + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        XCTAssertFalse(r.headers["content-security-policy"]?.contains("unsafe") ?? true)
        XCTAssertTrue(markup.contains("<main>") && !markup.contains("<script") && !markup.contains("<style"), markup)
        let lower = markup.lowercased()
        for refused in ["style=", "javascript:"] { XCTAssertFalse(lower.contains(refused), refused) }
        XCTAssertNil(lower.range(of: #"\son[a-z]+\s*="#, options: .regularExpression), "no event handler attributes")
    }

    /// The byte search that assembles the page and finds its blocks.
    func testFind() {
        let cases: [(String, String, Int, Range<Int>?)] = [
            ("<script>x", "<script>", 0, 0..<8), ("x</style>", "</style>", 0, 1..<9), ("aaab", "aab", 0, 1..<4),
            ("abcabc", "abc", 1, 3..<6), ("abc", "abd", 0, nil), ("ab", "abc", 0, nil), ("abc", "", 0, nil), ("abc", "c", 3, nil),
        ]
        for (haystack, needle, from, expected) in cases {
            XCTAssertEqual(WebPage.find(Array(needle.utf8), in: Array(haystack.utf8), from: from), expected, "\(needle) in \(haystack) from \(from)")
        }
    }

    /// The policy of a given page: hash sources in page order, each once, in standard base64 with
    /// its padding (known answers from Python's hashlib), for elements with or without attributes.
    func testPolicyForAPage() {
        let page = "<style>\na{}</style><p>x</p><script>\nx()</script><scripts></scripts>"
            + "<script type=\"text/javascript\">\nlet a = 1;</script><script>\nx()</script>"
        XCTAssertEqual(WebPage.inlineBlocks(of: "script", in: Array(page.utf8)).map { String(decoding: $0, as: UTF8.self) },
                       ["\nx()", "\nlet a = 1;", "\nx()"])
        XCTAssertEqual(WebPage.policy(for: Array(page.utf8)),
                       "default-src 'none'; script-src 'sha256-MS/g0mN+nqZ8dETVAyYjuMbyy0kNJR7ScRLVMQe72Jw=' "
                       + "'sha256-zNICszcODNxfb/tqSGD4CAgmaldni62vjSVnP/eaEZo='; "
                       + "style-src 'sha256-Wos276ClB3DtmPV7ggY3FkrD5vJJA1QcT7vVWXT1dNk='; connect-src 'self'; object-src 'none'; "
                       + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        XCTAssertEqual(WebPage.policy(for: Array("<p>nothing inline</p>".utf8)),
                       "default-src 'none'; script-src 'none'; style-src 'none'; connect-src 'self'; object-src 'none'; "
                       + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    }

    func testControlTokenProtectsThePageAndTheEventStream() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--control-token", "s3cret"])
        defer { s.stop() }
        let c = s.client()
        let denied = try c.get("/")
        XCTAssertEqual(denied.status, 401)
        XCTAssertTrue(denied.text.contains("/?token="), denied.text)
        XCTAssertEqual(try c.get("/?token=wrong").status, 401)
        XCTAssertEqual(try c.get("/?token=s3cret").status, 200)
        XCTAssertEqual(try c.request("GET", "/", headers: [("Authorization", "Bearer s3cret")]).status, 200)
        // The page's script reaches the API with the bearer header, and the event stream (where a
        // browser cannot set headers) with ?access_token=.
        XCTAssertEqual(try c.get("/api/v1/devices?access_token=s3cret").status, 200)
        XCTAssertEqual(try c.get("/api/v1/devices?access_token=nope").status, 401)
        let events = try SSEClient(port: s.port, path: "/api/v1/events?access_token=s3cret")
        XCTAssertEqual(try events.status(), 200)
    }
}

/// `GET /api/v1/messages?recipients=N`: what keeps a page of large multicasts small.
final class RecipientsLimitTests: XCTestCase {
    func testLimitsRecipientsAndReportsTheTotal() throws {
        let s = try TestServer()
        defer { s.stop() }
        let c = s.client()
        let tokens = ["demo-android-1", "demo-android-2", "demo-ios-1", "demo-android-offline"]
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        let sent = try c.postJSON("/fcm/send", #"{"registration_ids":[\#(list)],"data":{"k":"v"}}"#,
                                  headers: [("Authorization", "key=\(DemoProject.serverKey)")])
        XCTAssertEqual(sent.status, 200, sent.text)
        let full = try XCTUnwrap(items(try c.get("/api/v1/messages")).first)
        XCTAssertEqual(full["recipients"]?.arrayValue?.count, 4)
        XCTAssertNil(full["recipients_total"], "records are unchanged without the parameter")
        let cut = try XCTUnwrap(items(try c.get("/api/v1/messages?recipients=2")).first)
        let recipients = try XCTUnwrap(cut["recipients"]?.arrayValue)
        XCTAssertEqual(recipients.map { $0.objectValue?["token"]?.stringValue }, ["demo-android-1", "demo-android-2"], "the first ones, in order")
        XCTAssertEqual(cut["recipients_total"]?.numberValue?.text, "4")
        XCTAssertEqual(cut["target"]?.objectValue?["value"]?.stringValue, "4 tokens")
        XCTAssertEqual(try c.get("/api/v1/messages?recipients=0").status, 400)
        XCTAssertEqual(try c.get("/api/v1/messages?recipients=x").status, 400)
    }
}
