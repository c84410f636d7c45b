import TLS

/// The opening handshake of RFC 6455 (§4.2) on the server's HTTP/1.1 loop: whether a request asks
/// for a WebSocket, the answer that refuses it, and the 101 that hands the connection to a
/// `WebSocketHandler` once written.
public enum WebSocketUpgrade {
    /// RFC 6455 §1.3: appended to the client's key before hashing.
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// True when the request asks for a WebSocket (`Upgrade: websocket` token, case-insensitive,
    /// and `Connection` containing the `upgrade` token).
    public static func isUpgrade(_ request: HTTPRequest) -> Bool {
        guard let upgrade = request.header("Upgrade"), hasToken(upgrade, "websocket"),
              let connection = request.header("Connection"), hasToken(connection, "upgrade") else { return false }
        return true
    }

    /// The offered subprotocols (Sec-WebSocket-Protocol, comma-separated, trimmed), in order.
    public static func offeredProtocols(_ request: HTTPRequest) -> [String] {
        guard let value = request.header("Sec-WebSocket-Protocol") else { return [] }
        return value.split(separator: ",").map { trimmed($0) }.filter { !$0.isEmpty }
    }

    /// nil when `request` is an acceptable upgrade (GET, HTTP/1.1 not HTTP/2, Upgrade/Connection
    /// as `isUpgrade` says, Sec-WebSocket-Version 13, Sec-WebSocket-Key a base64 of 16 bytes);
    /// else the refusal to send: 426 with `Upgrade: websocket` and `Connection: Upgrade` when it
    /// is not an upgrade, or comes over HTTP/2 or HTTP/1.0; 426 with `Sec-WebSocket-Version: 13`
    /// when the version is not 13; 400 for another method than GET or a bad key. Each has a short
    /// text/plain sentence saying what is wrong.
    public static func refusal(_ request: HTTPRequest) -> HTTPResponse? {
        if request.isHTTP2 { return upgradeRequired("WebSocket is served over HTTP/1.1 only (not HTTP/2).\n") }
        if !isUpgrade(request) {
            return upgradeRequired("This resource needs a WebSocket upgrade (Upgrade: websocket, Connection: Upgrade).\n")
        }
        if request.isHTTP10 { return upgradeRequired("A WebSocket upgrade needs HTTP/1.1.\n") }
        if request.method != "GET" { return plain(400, "A WebSocket upgrade is a GET request.\n") }
        if request.header("Sec-WebSocket-Version").map(trimmed) != "13" {
            return plain(426, "Sec-WebSocket-Version must be 13.\n", headers: [("Sec-WebSocket-Version", "13")])
        }
        guard let key = request.header("Sec-WebSocket-Key"), isKey(trimmed(key)) else {
            return plain(400, "Sec-WebSocket-Key must be the base64 of 16 bytes.\n")
        }
        return nil
    }

    /// The 101 answer that hands the connection to `handler` once written: `Upgrade: websocket`,
    /// `Connection: Upgrade`, `Sec-WebSocket-Accept` (base64 SHA-1 of key + GUID),
    /// `Sec-WebSocket-Protocol: <subprotocol>` when non-nil; never `Sec-WebSocket-Extensions`
    /// (permessage-deflate declined). A request `refusal` refuses gets that refusal instead.
    /// When the server already has `HTTP1Limits.maxWebSockets` WebSocket connections open, the
    /// connection writes 503 (text/plain, `Retry-After`) instead and the handler is never told;
    /// so it does when the server is stopping. On an HTTP/2 stream the answer becomes a 426.
    public static func accept(_ request: HTTPRequest, subprotocol: String?, handler: any WebSocketHandler,
                              options: WebSocketOptions) -> HTTPResponse {
        if let refusal = refusal(request) { return refusal }
        let key = trimmed(request.header("Sec-WebSocket-Key") ?? "")
        var headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptValue(key: key))]
        if let subprotocol { headers.append(("Sec-WebSocket-Protocol", subprotocol)) }
        var r = HTTPResponse(status: 101, headers: headers)
        r.webSocket = WebSocketAccept(handler: handler, options: options)
        return r
    }

    /// `Sec-WebSocket-Accept` for `key`: base64 of SHA-1 of the key and the GUID.
    static func acceptValue(key: String) -> String {
        base64(SHA1.digest(Array((key + guid).utf8)))
    }

    // MARK: refusals

    /// What a 101 becomes where it cannot be served (an HTTP/2 stream, a request that was not an
    /// upgrade).
    static let notUpgradable = upgradeRequired("WebSocket is served over HTTP/1.1 only, on a GET upgrade request.\n")

    /// The answer when `HTTP1Limits.maxWebSockets` are open.
    static var tooMany: HTTPResponse {
        var r = plain(503, "Too many WebSocket connections are open; try again later.\n", headers: [("Retry-After", "5")])
        r.closeConnection = true
        return r
    }

    private static func upgradeRequired(_ text: String) -> HTTPResponse {
        plain(426, text, headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")])
    }

    private static func plain(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=UTF-8", body: text, headers: headers)
    }

    // MARK: tokens and base64

    private static func trimmed(_ s: some StringProtocol) -> String {
        String(s.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    private static func hasToken(_ value: String, _ token: String) -> Bool {
        value.split(separator: ",").contains { equalIgnoringASCIICase(trimmed($0), token) }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// A base64 text of exactly 16 bytes: 22 characters of the alphabet, then `==`.
    static func isKey(_ key: String) -> Bool {
        let b = Array(key.utf8)
        guard b.count == 24, b[22] == UInt8(ascii: "="), b[23] == UInt8(ascii: "=") else { return false }
        return b[0..<22].allSatisfy { alphabet.contains($0) }
    }

    /// Standard base64 with padding (RFC 4648 §4).
    static func base64(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = Swift.min(3, bytes.count - i)
            let chunk = UInt32(bytes[i]) << 16 | (n > 1 ? UInt32(bytes[i + 1]) << 8 : 0) | (n > 2 ? UInt32(bytes[i + 2]) : 0)
            for k in 0..<4 {
                out.append(k <= n ? alphabet[Int(chunk >> UInt32(18 - 6 * k) & 0x3F)] : UInt8(ascii: "="))
            }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What a 101 carries to the connection that writes it: who takes the connection over, and its
/// limits.
struct WebSocketAccept: Sendable {
    let handler: any WebSocketHandler
    let options: WebSocketOptions
}
