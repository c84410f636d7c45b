import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// Every 405 of the push service names in `Allow` what its path takes (docs/webpush.md).
extension WebPushTests {
    /// Every 405 names in `Allow` what its path takes: `DELETE` on a message's `Location`,
    /// `POST` on a push endpoint (for the method, and for a fault that answers 405); the body is
    /// exactly autopush's.
    func testEvery405SaysWhatThePathAllows() throws {
        let s = try subscribe(online: false)
        let push = try post(s.path, [("TTL", "600"), ("Content-Encoding", "aes128gcm")], try encrypt("held", for: s))
        XCTAssertEqual(push.status, 201, push.text)
        let location = String(try XCTUnwrap(push.headers["location"]).dropFirst(origin.count))
        for method in ["GET", "PUT", "PATCH", "OPTIONS"] {
            for path in [location, "/m/nonsense"] {
                let r = try request(method, path)
                XCTAssertEqual(r.status, 405, "\(method) \(path): \(r.text)")
                XCTAssertEqual(r.headers["allow"], "DELETE", "\(method) \(path)")
                XCTAssertEqual(r.text, #"{"code":405,"errno":999,"error":"Method Not Allowed","message":"\#(method) on a message: it takes DELETE only"}"#)
            }
            let r = try request(method, s.path)
            XCTAssertEqual(r.status, 405, "\(method): \(r.text)")
            XCTAssertEqual(r.headers["allow"], "POST", method)
            XCTAssertEqual(r.text, #"{"code":405,"errno":999,"error":"Method Not Allowed","message":"\#(method) on a push endpoint: it takes POST only"}"#)
        }
        // The refusals took nothing: the push is still held, and DELETE takes it back.
        XCTAssertEqual(try request("DELETE", location).status, 204)
        // A 404 or a 204 names no methods.
        XCTAssertNil(try request("DELETE", location).headers["allow"])
        let add = try server.client().postJSON("/api/v1/faults", #"{"when":{"transport":"webpush"},"then":{"status":405},"times":1}"#)
        XCTAssertEqual(add.status, 201, add.text)
        let faultID = try XCTUnwrap(add.object?["id"]?.stringValue)
        let fault = try post(s.path, [("TTL", "5"), ("Content-Encoding", "aes128gcm")], try encrypt("x", for: s))
        XCTAssertEqual(fault.status, 405, fault.text)
        XCTAssertEqual(fault.headers["allow"], "POST")
        XCTAssertEqual(fault.text, #"{"code":405,"errno":999,"error":"Method Not Allowed","message":"fault \#(faultID) answered HTTP 405"}"#)
    }

    func testEvery405SaysWhatThePathAllowsOverH2C() throws {
        overH2C = true
        try testEvery405SaysWhatThePathAllows()
    }
}
