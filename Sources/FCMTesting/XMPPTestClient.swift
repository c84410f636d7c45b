import CGnuTLS
import FCMCore
import Foundation
import XMPPServer

/// A raw-socket XMPP client for tests: sends exactly the bytes it is given and parses what the
/// server sends into stream events.
public final class XMPPTestClient {
    private let fd: Int32
    private var parser = XMLStreamParser()
    private var pending: [XMLStreamEvent] = []
    /// Every byte received, for byte-exact checks.
    public private(set) var received: [UInt8] = []

    /// A client TLS session (no certificate check: tests trust the mock's self-signed one).
    private var tls: gnutls_session_t?
    private var credentials: gnutls_certificate_credentials_t?

    /// Connects to 127.0.0.1:`port`, with direct TLS when `tls`.
    public init(port: Int, tls useTLS: Bool = false) throws {
        let s = try connectLoopback(port: port)
        fd = s
        if useTLS {
            var tv = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var cred: gnutls_certificate_credentials_t?
            gnutls_certificate_allocate_credentials(&cred)
            var session: gnutls_session_t?
            gnutls_init(&session, UInt32(GNUTLS_CLIENT))
            guard let session, let cred else { throw TestError("gnutls_init failed") }
            gnutls_set_default_priority(session)
            gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(cred))
            gnutls_server_name_set(session, GNUTLS_NAME_DNS, "fcm-xmpp.googleapis.com", 23)
            fcm_gnutls_transport_set_fd(session, s)
            var r: Int32
            repeat { r = gnutls_handshake(session) } while r < 0 && gnutls_error_is_fatal(r) == 0
            guard r >= 0 else { throw TestError("TLS handshake failed: \(String(cString: gnutls_strerror(r)))") }
            tls = session
            credentials = cred
        }
    }

    deinit {
        if let tls { gnutls_deinit(tls) }
        if let credentials { gnutls_certificate_free_credentials(credentials) }
        close(fd)
    }

    /// The server's certificate, DER, when connected with TLS.
    public var peerCertificateCount: Int {
        guard let tls else { return 0 }
        var n: UInt32 = 0
        _ = gnutls_certificate_get_peers(tls, &n)
        return Int(n)
    }

    /// Sends raw bytes.
    public func send(_ text: String) { sendBytes(Array(text.utf8)) }

    public func sendBytes(_ bytes: [UInt8]) {
        if let tls {
            _ = bytes.withUnsafeBytes { gnutls_record_send(tls, $0.baseAddress, $0.count) }
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
            let buffered = tls.map { gnutls_record_check_pending($0) > 0 } ?? false
            guard buffered || poll(&pfd, 1, ms) > 0 else { return nil }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n: Int = buf.withUnsafeMutableBytes { b in
                if let tls { return gnutls_record_recv(tls, b.baseAddress, b.count) }
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
