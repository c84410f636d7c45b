import FCMCore
@testable import WebPush
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// A VAPID token the push service verified once is remembered; `aud` and `exp` are judged for it
/// by the same rule as for a new one (docs/webpush.md, "VAPID").
extension WebPushTests {
    /// A signed push through curl (HTTP/1.1 or h2c) with `Host` (`:authority`) given: the origin
    /// VAPID's `aud` must be.
    func push(_ s: Subscription, host: String, token: String, body: [UInt8], http2: Bool) throws -> WireResponse {
        let file = NSTemporaryDirectory() + "wp-body-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data(body).write(to: URL(fileURLWithPath: file))
        let r = try runProcess(try HTTP2Tests.tool("curl"), [
            "-sS", "-i", "--max-time", "20", http2 ? "--http2-prior-knowledge" : "--http1.1",
            "-H", "Host: \(host)", "-H", "TTL: 5", "-H", "Content-Encoding: aes128gcm",
            "-H", "Authorization: vapid t=\(token), k=\(vapidKey.publicKey.base64URL)",
            "--data-binary", "@\(file)", "http://127.0.0.1:\(server.port)\(s.path)",
        ])
        XCTAssertEqual(r.status, 0, r.stderr)
        return curlAnswer(r.stdout)
    }

    /// Taken on the origin it was signed for, a token is remembered; sent to another origin it
    /// answers exactly what a new token with the same claims answers there (a long `aud`
    /// shortened alike); on the moved clock both have expired.
    func testARememberedTokenIsJudgedByTheSameRuleAsANewOne() throws {
        let s = try subscribe(boundTo: vapidKey)
        let body = try encrypt("hi", for: s)
        let now = Int64(Date().timeIntervalSince1970)
        let plain = "127.0.0.1:\(server.port)"
        let long = String(repeating: "h", count: 70) + ".example:\(server.port)"
        var n = 0
        for http2 in [false, true] {
            for (host, other) in [(plain, "localhost:\(server.port)"), (long, plain)] {
                n += 1
                let remembered = try jwt(aud: "http://" + host, exp: now + 3600, sub: "mailto:kept\(n)@example.com")
                XCTAssertEqual(try push(s, host: host, token: remembered, body: body, http2: http2).status, 201)
                // Another `sub`: another text, so a token never seen.
                let fresh = try jwt(aud: "http://" + host, exp: now + 3600, sub: "mailto:new\(n)@example.com")
                let shown = host == long ? String(("http://" + host).prefix(64)) + "…" : "http://" + host
                let expected = WebPushError(.unauthorized, "the VAPID JWT's aud \"\(shown)\" is not the endpoint's origin http://\(other)")
                for token in [remembered, fresh] {
                    let r = try push(s, host: other, token: token, body: body, http2: http2)
                    XCTAssertEqual(r.status, 401, r.text)
                    XCTAssertEqual(r.text, expected.body, "http2: \(http2), \(token == fresh ? "new" : "remembered")")
                }
            }
        }
        let remembered = try jwt(exp: now + 60, sub: "mailto:clock@example.com")
        XCTAssertEqual(try push(s, host: plain, token: remembered, body: body, http2: false).status, 201)
        XCTAssertEqual(try server.client().postJSON("/api/v1/clock", #"{"advance_s":3600}"#).status, 200)
        for token in [remembered, try jwt(exp: now + 60, sub: "mailto:clock-new@example.com")] {
            let r = try push(s, host: plain, token: token, body: body, http2: false)
            XCTAssertEqual(r.status, 401, r.text)
            XCTAssertTrue(r.text.hasPrefix(#"{"code":401,"errno":109,"error":"Unauthorized","message":"the VAPID JWT expired 354"#), r.text)
        }
    }

    /// An `exp` at the 64-bit limits is judged like any other (long expired, or too far ahead);
    /// it once stopped the server on an overflow, before the push's signature was of any use.
    func testAnExpAtTheLimitsIsRefusedAndTheServerGoesOn() throws {
        let s = try subscribe(boundTo: vapidKey)
        let body = try encrypt("hi", for: s)
        let plain = "127.0.0.1:\(server.port)"
        for exp in [Int64.min, Int64.max] {
            let r = try push(s, host: plain, token: try jwt(exp: exp, sub: "mailto:limits\(exp)@example.com"), body: body, http2: false)
            XCTAssertEqual(r.status, 401, r.text)
            XCTAssertTrue(r.text.contains(#""errno":109"#), r.text)
        }
        XCTAssertEqual(try push(s, host: plain, token: try jwt(), body: body, http2: false).status, 201)
    }
}
