import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// The device side's HTTP surfaces: faults by transport (docs/real-clients.md).
extension GCMTests {
    func fault(_ json: String) throws {
        let r = try server.client().postJSON("/api/v1/faults", json)
        XCTAssertEqual(r.status, 201, r.text)
    }

    /// The device-side surfaces are HTTP: a fault naming one with `when.transport` `http` fires
    /// there as one without a transport does; one naming another transport never does.
    func testDeviceSideFaultsFireForTheHTTPTransportOnly() throws {
        let auth = try checkin()
        try fault(#"{"when":{"transport":"xmpp","path":"/checkin"},"then":{"status":500}}"#)
        try fault(#"{"when":{"transport":"apns","path":"/c2dm/register3"},"then":{"status":500}}"#)
        try fault(#"{"when":{"transport":"http_v1","path":"/v1/projects/*/installations"},"then":{"status":500}}"#)
        _ = try checkin()
        XCTAssertTrue(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1.hasPrefix("token="))
        let inst = try server.client().postJSON("/v1/projects/demo-project/installations",
                                                #"{"appId":"1:123456789012:web:abc","authVersion":"FIS_v2"}"#, headers: [("x-goog-api-key", "any")])
        XCTAssertEqual(inst.status, 200, inst.text)

        try fault(#"{"when":{"transport":"http","path":"/checkin"},"then":{"status":503,"retry_after_s":3},"times":1}"#)
        let r = try server.client().request("POST", "/checkin", body: Self.checkinRequest())
        XCTAssertEqual(r.status, 503)
        XCTAssertEqual(r.text, "fault f4 answered HTTP 503")
        XCTAssertEqual(r.headers["retry-after"], "3")
        try fault(#"{"when":{"transport":"http","path":"/c2dm/register3"},"then":{"error":"QUOTA_EXCEEDED"},"times":1}"#)
        let q = try register("app=org.chromium.linux&sender=745476177629", auth: auth)
        XCTAssertEqual(q.0, 200)
        XCTAssertEqual(q.1, "Error=QUOTA_EXCEEDED")
        try fault(#"{"when":{"transport":"http","path":"/v1/projects/*/installations"},"then":{"status":429},"times":1}"#)
        let i = try server.client().postJSON("/v1/projects/demo-project/installations",
                                             #"{"appId":"1:123456789012:web:abc","authVersion":"FIS_v2"}"#, headers: [("x-goog-api-key", "any")])
        XCTAssertEqual(i.status, 429)
        XCTAssertEqual(i.text, #"{"error":{"code":429,"message":"fault f6 answered HTTP 429","status":"RESOURCE_EXHAUSTED"}}"#)
        // Spent, they leave the surfaces alone again.
        _ = try checkin()
        XCTAssertTrue(try register("app=org.chromium.linux&sender=745476177629", auth: auth).1.hasPrefix("token="))
    }
}
