import FCMEngine
public import FCMCore
public import Foundation
import Platform
import TLS
public import XMPPServer

/// A raw-socket XMPP client for tests: sends exactly the bytes it is given and parses what the
/// server sends into stream events.
public final class XMPPTestClient {
    private let fd: Int32
    private var parser = XMLStreamParser()
    private var pending: [XMLStreamEvent] = []
    /// Every byte received, for byte-exact checks.
    public private(set) var received: [UInt8] = []

    /// A client TLS session (no certificate check: tests trust the mock's self-signed one).
    private var tls: TLSSession?

    /// Connects to 127.0.0.1:`port`, with direct TLS when `tls`.
    public init(port: Int, tls useTLS: Bool = false) throws {
        let s = try connectLoopback(port: port)
        fd = s
        if useTLS {
            setReceiveTimeout(s, seconds: 10)
            tls = try TLSSession(clientOn: s, host: "fcm-xmpp.googleapis.com", trust: .anyone)
        }
    }

    deinit {
        tls = nil  // freed before the descriptor closes
        close(fd)
    }

    /// How many certificates the server presented, when connected with TLS.
    public var peerCertificateCount: Int { tls?.peerCertificateCount ?? 0 }

    /// Sends raw bytes.
    public func send(_ text: String) { sendBytes(Array(text.utf8)) }

    public func sendBytes(_ bytes: [UInt8]) {
        if let tls {
            _ = tls.write(bytes)
            return
        }
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Closes the socket abruptly.
    public func drop() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// The next event, or nil on time-out; throws when the server closed the connection.
    public func next(timeout: TimeInterval = 10) throws -> XMLStreamEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while pending.isEmpty {
            let ms = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let buffered = tls?.hasBufferedData ?? false
            guard buffered || poll(&pfd, 1, ms) > 0 else { return nil }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n: Int = buf.withUnsafeMutableBytes { b in
                if let tls { return tls.read(b.baseAddress!, b.count) }
                return recv(fd, b.baseAddress, b.count, 0)
            }
            guard n > 0 else { throw TestError("the server closed the connection") }
            received.append(contentsOf: buf[0..<n])
            pending += try parser.feed(Array(buf[0..<n]))
        }
        return pending.removeFirst()
    }

    /// Stanzas that arrived while `login` waited for its own answers.
    private var stash: [XMLElement] = []

    /// The next stanza (skipping stream headers), or nil on time-out.
    public func nextStanza(timeout: TimeInterval = 10) throws -> XMLElement? {
        if !stash.isEmpty { return stash.removeFirst() }
        while let e = try next(timeout: timeout) {
            if case .stanza(let s) = e { return s }
            if case .streamClose = e { return nil }
        }
        return nil
    }

    /// Whether the server ends the stream (`</stream:stream>` then the socket) within `timeout`.
    public func waitForClose(timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            do {
                guard let e = try next(timeout: deadline.timeIntervalSinceNow) else { return false }
                if case .streamClose = e { return true }
            } catch {
                return true
            }
        }
        return false
    }

    public static let header = #"<stream:stream to="fcm.googleapis.com" version="1.0" xmlns="jabber:client" xmlns:stream="http://etherx.jabber.org/streams">"#

    /// Opens the stream, authenticates with SASL PLAIN and binds; returns the bound JID.
    /// `withBind` is sent in the same write as the bind request (a client that does not wait).
    @discardableResult
    public func login(user: String, password: String, authzid: String = "", resource: String = "test",
                      withBind: String = "") throws -> String {
        send(Self.header)
        guard case .streamOpen? = try next() else { throw TestError("no stream header") }
        guard try nextStanza()?.localName == "features" else { throw TestError("no features") }
        let plain = Base64.encode(Array(authzid.utf8) + [0] + Array(user.utf8) + [0] + Array(password.utf8))
        send("<auth mechanism=\"PLAIN\" xmlns=\"urn:ietf:params:xml:ns:xmpp-sasl\">\(plain)</auth>")
        guard let answer = try nextStanza() else { throw TestError("no SASL answer") }
        guard answer.localName == "success" else { throw TestError("SASL: \(answer.xml)") }
        parser = XMLStreamParser()  // the server starts a new stream after success
        send(Self.header)
        guard case .streamOpen? = try next() else { throw TestError("no second stream header") }
        guard let features = try nextStanza(), features.child("bind") != nil else { throw TestError("no bind feature") }
        send("<iq type=\"set\" id=\"bind-1\"><bind xmlns=\"urn:ietf:params:xml:ns:xmpp-bind\"><resource>\(resource)</resource></bind></iq>" + withBind)
        guard let bound = try nextStanza(), let jid = bound.child("bind")?.child("jid")?.text else { throw TestError("no bind result") }
        send("<iq type=\"set\" id=\"sess-1\"><session xmlns=\"urn:ietf:params:xml:ns:xmpp-session\"/></iq>")
        // Messages may come before the session answer (queued upstream, receipts): keep them.
        var early: [XMLElement] = []
        while let s = try nextStanza() {
            if s.localName == "iq" && s.attributes["id"] == "sess-1" { break }
            early.append(s)
        }
        stash = early + stash
        return jid
    }

    /// Sends a downstream message with this JSON payload.
    public func sendDownstream(_ json: String, id: String = "") {
        send("<message id=\"\(id)\"><gcm xmlns=\"google:mobile:data\">\(xmlEscapeText(json))</gcm></message>")
    }

    /// The JSON payload of the next `<message>` from the server.
    public func nextGCM(timeout: TimeInterval = 10) throws -> JSONObject? {
        guard let m = try nextStanza(timeout: timeout), m.localName == "message" else { return nil }
        guard let gcm = m.children.first(where: { $0.localName == "gcm" }) else { return nil }
        return try JSONParser.parse(gcm.text).objectValue
    }
}
