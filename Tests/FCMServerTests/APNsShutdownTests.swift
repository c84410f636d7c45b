import FCMCore
import FCMServer
import FCMTesting
import Foundation
import HTTPServer
import TLS
import XCTest

/// An APNs send in flight when the server stops (the server in-process, the client nghttp over
/// h2c): the client gets GOAWAY NO_ERROR whose last stream id covers the held stream and whose
/// debug data is Apple's `{"reason":"Shutdown"}`, then that stream's answer.
final class APNsShutdownTests: XCTestCase {
    func testGoAwayCoversTheSendInFlightWhichIsAnswered() throws {
        let server = try TestServer()
        var stopped = false
        defer { if !stopped { server.stop() } }
        let c = server.client()
        let team = "TEAM123456", app = DemoProject.iosApp
        let made = try XCTUnwrap(try c.post("/api/v1/apns/keys", #"{"team_id":"\#(team)","bundle_ids":["\#(app)"]}"#).object)
        let jwt = try apnsProviderToken(pem: try XCTUnwrap(made["private_key_pem"]?.stringValue),
                                        keyID: try XCTUnwrap(made["key_id"]?.stringValue), team: team)
        let device = try XCTUnwrap(try c.get("/api/v1/devices/demo-ios-1").object?["apns_token"]?.stringValue)
        XCTAssertEqual(try c.post("/api/v1/faults", #"{"when":{"transport":"apns"},"then":{"delay_ms":8000},"times":1}"#).status, 201)
        let body = NSTemporaryDirectory() + "apns-goaway-\(UUID().uuidString).json"
        try #"{"aps":{"alert":"at shutdown"}}"#.write(toFile: body, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: body) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try HTTP2Tests.tool("nghttp"))
        p.arguments = ["-v", "-d", body, "-H", "authorization: bearer \(jwt)", "-H", "apns-topic: \(app)",
                       "http://127.0.0.1:\(server.port)/3/device/\(device)"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let send = RunningTool(process: p, output: out)
        // The send is decided (delivered) at once; only its answer is held by the fault.
        let inbox = try c.get("/api/v1/devices/demo-ios-1/messages?wait=5").object?["items"]?.arrayValue ?? []
        XCTAssertEqual(inbox.first?.objectValue?["status"]?.stringValue, "delivered", "\(inbox)")
        usleep(200_000)
        XCTAssertTrue(p.isRunning, "the answer is still held when the server stops")
        let started = Date()
        server.stop()
        stopped = true
        let text = send.finish()
        XCTAssertLessThan(Date().timeIntervalSince(started), 6, "a held answer is sent at once when stopping, not after its delay")
        let goaway = try XCTUnwrap(text.range(of: "recv GOAWAY frame"), text)
        // The stream nghttp sent the request on (after the streams it opens for priorities).
        let headers = try XCTUnwrap(text.range(of: "send HEADERS frame <"), text)
        let idField = try XCTUnwrap(text[headers.upperBound...].range(of: "stream_id="), text)
        let streamID = String(text[idField.upperBound...].prefix { $0.isNumber })
        XCTAssertFalse(streamID.isEmpty, text)
        XCTAssertTrue(text.contains("last_stream_id=\(streamID)"), "the GOAWAY covers the request's stream \(streamID): \(text)")
        XCTAssertTrue(text.contains("error_code=NO_ERROR"), text)
        XCTAssertTrue(text.contains(#"opaque_data(21)=[{"reason":"Shutdown"}]"#), text)
        let status = try XCTUnwrap(text.range(of: ":status: 200"), text)
        XCTAssertLessThan(goaway.lowerBound, status.lowerBound, "GOAWAY first, then the held stream's answer: \(text)")
        XCTAssertTrue(text.contains("apns-id: "), text)
        XCTAssertEqual(p.terminationStatus, 0, text)
    }
}

/// An APNs provider token: ES256 over `{"alg":"ES256","kid":keyID}` and `{"iss":team,"iat":now}`
/// with the `.p8` key `pem`.
func apnsProviderToken(pem: String, keyID: String, team: String) throws -> String {
    let input = base64URLEncode(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
        + base64URLEncode(Array(#"{"iss":"\#(team)","iat":\#(Int64(Date().timeIntervalSince1970))}"#.utf8))
    return input + "." + base64URLEncode(try P256PrivateKey(pem: pem).signES256(Array(input.utf8)))
}
