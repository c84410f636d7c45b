import FCMEngine
public import FCMCore
import Foundation
public import HTTPServer
import Platform

/// The project's HTTP/1.1 client (HTTPServer's `HTTPClient`) under the names the tests use.
public typealias HTTPTestClient = HTTPClient

extension WireResponse {
    /// The body parsed as JSON (nil when it is not JSON).
    public var json: JSONValue? { try? JSONParser.parse(body) }

    /// The body as a JSON object (nil otherwise).
    public var object: JSONObject? { json?.objectValue }
}

extension HTTPClient {
    /// POSTs a JSON text.
    public func postJSON(_ path: String, _ json: String, headers: [(String, String)] = []) throws -> WireResponse {
        try request("POST", path, headers: [("Content-Type", "application/json")] + headers, body: Array(json.utf8))
    }
}

/// A TCP connection to 127.0.0.1:`port`.
public func connectLoopback(port: Int) throws -> Int32 {
    do {
        return try ConnectSocket.open(host: "127.0.0.1", port: port)
    } catch {
        throw TestError(error.description)
    }
}

/// A failure inside the test support code.
public struct TestError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
