import CGnuTLS
import Dispatch
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// GnuTLS's default priorities, parsed once and shared by every session, blocking
/// (`TLSSession`) or not (`NonBlockingTLSSession`). A session given its own
/// (`gnutls_set_default_priority`) parses and keeps a copy: about 8 KiB each, so an MCS port
/// holding 1,000 idle connections spent 8 MB on copies of one list.
///
/// `@unchecked Sendable`: the priority cache is immutable once made, GnuTLS reference-counts it
/// per session and only reads it, from any thread; it lives as long as the process.
struct TLSPriorities: @unchecked Sendable {
    let cache: gnutls_priority_t?

    /// The shared cache; nil when GnuTLS could not make it (sessions then fall back to their own).
    static let shared = TLSPriorities(cache: {
        var p: gnutls_priority_t?
        return gnutls_priority_init(&p, nil, nil) >= 0 ? p : nil
    }())

    /// Sets the default priorities on `session`, from the shared cache when there is one.
    @discardableResult
    static func apply(to session: gnutls_session_t) -> Int32 {
        if let cache = shared.cache { return gnutls_priority_set(session, cache) }
        return gnutls_set_default_priority(session)
    }
}

/// Whom a client session trusts.
public enum TLSTrust: Sendable {
    /// The system's trust store.
    case system
    /// The certificates in this PEM file (`--cacert`, a local certificate authority).
    case caFile(String)
    /// Anyone: no certificate or host name check (tests of the mock's own self-signed
    /// certificate).
    case anyone
}

/// One TLS session over a connected blocking socket, server or client side: the one place the
/// handshake, record reads and writes and the closing alert are written.
///
/// The session never closes the socket, and freeing it sends nothing: the closing alert goes out
/// only through `bye()`, so the owner decides when (after its last write, before it closes the
/// descriptor).
///
/// `@unchecked Sendable`: GnuTLS allows one thread receiving while another sends on the same
/// session; the owner serializes its sends (XMPPConnection does, under its lock), and one thread
/// alone receives.
public final class TLSSession: @unchecked Sendable {
    let session: gnutls_session_t
    /// Kept alive as long as the session uses them: the server's shared credentials, or a client's
    /// own (its trust store), freed with it.
    private let serverCredentials: TLSCredentials?
    private let clientCredentials: gnutls_certificate_credentials_t?
    /// The host name a client checks the certificate against: GnuTLS keeps the pointer, not a
    /// copy, so it lives as long as the session.
    private let verifiedHost: UnsafeMutablePointer<CChar>?

    /// The server side: handshakes on `fd` presenting `credentials` (blocking; bounded by the
    /// socket's time-outs and ten seconds). With `protocols` (ALPN names in order of preference,
    /// `["h2", "http/1.1"]`), the first of them the client also offers is chosen; see
    /// `negotiatedProtocol`. With `requestingClientCertificate`, the server asks the client for a
    /// certificate but takes a client without one too (APNs certificate authentication); the
    /// certificate is not checked here: see `peerCertificate` and
    /// `LocalCertificateAuthority.hasIssued`.
    public init(serverOn fd: Int32, credentials: TLSCredentials, protocols: [String] = [],
                requestingClientCertificate: Bool = false, handshakeSeconds: Int = TLSSession.handshakeSeconds) throws(TLSError) {
        var s: gnutls_session_t?
        var rc = gnutls_init(&s, UInt32(GNUTLS_SERVER) | UInt32(GNUTLS_NO_SIGNAL))
        guard rc >= 0, let s else { throw TLSError("gnutls_init", rc) }
        TLSPriorities.apply(to: s)
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.credentials))
        gnutls_certificate_server_set_request(s, requestingClientCertificate ? GNUTLS_CERT_REQUEST : GNUTLS_CERT_IGNORE)
        rc = Self.handshake(s, fd: fd, protocols: protocols, flags: GNUTLS_ALPN_SERVER_PRECEDENCE.rawValue, seconds: handshakeSeconds)
        guard rc >= 0 else {
            gnutls_deinit(s)
            throw TLSError("TLS handshake failed", rc)
        }
        session = s
        serverCredentials = credentials
        clientCredentials = nil
        verifiedHost = nil
    }

    /// The client side: handshakes on `fd` with `host` (sent as the server name). Unless `trust`
    /// is `.anyone`, the handshake fails unless the server's certificate chains to a trusted
    /// certificate and names `host`. With `protocols`, offers them by ALPN in this order. With
    /// `certificate` (PEM texts of a certificate and its key), presents it when the server asks.
    public init(clientOn fd: Int32, host: String, trust: TLSTrust, protocols: [String] = [],
                certificate: (pem: String, keyPEM: String)? = nil) throws(TLSError) {
        var c: gnutls_certificate_credentials_t?
        var rc = gnutls_certificate_allocate_credentials(&c)
        guard rc >= 0, let c else { throw TLSError("TLS with \(host) failed", rc) }
        if let certificate {
            rc = withDatum(Array(certificate.pem.utf8)) { cd in
                withDatum(Array(certificate.keyPEM.utf8)) { kd in gnutls_certificate_set_x509_key_mem(c, &cd, &kd, GNUTLS_X509_FMT_PEM) }
            }
            guard rc >= 0 else {
                gnutls_certificate_free_credentials(c)
                throw TLSError("cannot load the client certificate", rc)
            }
        }
        var s: gnutls_session_t?
        let checked: UnsafeMutablePointer<CChar>?
        if case .anyone = trust { checked = nil } else { checked = strdup(host) }
        rc = Self.openClient(&s, credentials: c, fd: fd, host: host, checking: checked, trust: trust, protocols: protocols)
        guard rc >= 0, let s else {
            if let s { gnutls_deinit(s) }
            gnutls_certificate_free_credentials(c)
            free(checked)
            throw TLSError("TLS with \(host) failed", rc)
        }
        session = s
        serverCredentials = nil
        clientCredentials = c
        verifiedHost = checked
    }

    deinit {
        gnutls_deinit(session)
        if let clientCredentials { gnutls_certificate_free_credentials(clientCredentials) }
        free(verifiedHost)
    }

    /// Sets up a client session in `out` (left for the caller to free) and handshakes, checking
    /// the certificate against `checked` (nil: no check); 0 or a GnuTLS error code.
    private static func openClient(_ out: inout gnutls_session_t?, credentials: gnutls_certificate_credentials_t, fd: Int32,
                                   host: String, checking checked: UnsafeMutablePointer<CChar>?, trust: TLSTrust,
                                   protocols: [String]) -> Int32 {
        var rc: Int32
        switch trust {
        case .system:
            rc = gnutls_certificate_set_x509_system_trust(credentials)
        case .caFile(let path):
            rc = gnutls_certificate_set_x509_trust_file(credentials, path, GNUTLS_X509_FMT_PEM)
            if rc == 0 { rc = GNUTLS_E_NO_CERTIFICATE_FOUND }  // a file without one trusts nobody
        case .anyone:
            rc = 0
        }
        guard rc >= 0 else { return rc }
        rc = gnutls_init(&out, UInt32(GNUTLS_CLIENT) | UInt32(GNUTLS_NO_SIGNAL))
        guard rc >= 0, let s = out else { return rc }
        rc = TLSPriorities.apply(to: s)
        guard rc >= 0 else { return rc }
        rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials))
        guard rc >= 0 else { return rc }
        rc = gnutls_server_name_set(s, GNUTLS_NAME_DNS, host, host.utf8.count)
        guard rc >= 0 else { return rc }
        if let checked { gnutls_session_set_verify_cert(s, checked, 0) }
        return handshake(s, fd: fd, protocols: protocols, flags: 0, seconds: handshakeSeconds)
    }

    /// Offers `protocols` by ALPN, binds `s` to `fd` and handshakes; 0 or a GnuTLS error code.
    private static func handshake(_ s: gnutls_session_t, fd: Int32, protocols: [String], flags: UInt32, seconds given: Int) -> Int32 {
        let seconds = max(1, given)
        var rc: Int32 = 0
        if !protocols.isEmpty {
            // GnuTLS copies the names: the buffers need not outlive the call.
            let joined = protocols.flatMap { Array($0.utf8) }
            rc = joined.withUnsafeBufferPointer { all in
                var datums: [gnutls_datum_t] = []
                var offset = 0
                for p in protocols {
                    let n = p.utf8.count
                    datums.append(gnutls_datum_t(data: UnsafeMutablePointer(mutating: all.baseAddress! + offset), size: UInt32(n)))
                    offset += n
                }
                return gnutls_alpn_set_protocols(s, datums, UInt32(datums.count), flags)
            }
            guard rc >= 0 else { return rc }
        }
        gnutls_transport_set_int2(s, fd, fd)
        gnutls_handshake_set_timeout(s, UInt32(seconds * 1000))
        // The socket's receive time-out bounds each wait, and a peer that sends a byte now and
        // then would renew it forever: past the deadline the socket is shut down, which ends the
        // blocked read and the handshake with it. Under the lock, so the socket is still this
        // handshake's (the caller closes it only after this returns).
        let done = Locked(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
            done.withLock { finished in if !finished { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) } }
        }
        defer { done.withLock { $0 = true } }
        repeat {
            rc = gnutls_handshake(s)
        } while rc < 0 && gnutls_error_is_fatal(rc) == 0
        return rc
    }

    /// How long a handshake may take in all, however the peer paces its bytes.
    public static let handshakeSeconds = 10

    /// The protocol chosen by ALPN, or nil when none was (the peer offered none, or none in
    /// common).
    public var negotiatedProtocol: String? {
        var d = gnutls_datum_t(data: nil, size: 0)
        guard gnutls_alpn_get_selected_protocol(session, &d) == 0, let p = d.data else { return nil }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(d.size)), as: UTF8.self)
    }

    /// How many certificates the peer presented.
    public var peerCertificateCount: Int {
        var n: UInt32 = 0
        _ = gnutls_certificate_get_peers(session, &n)
        return Int(n)
    }

    /// The peer's own certificate (DER), the first it presented; nil when it presented none (a
    /// client that had none to give).
    public var peerCertificate: [UInt8]? {
        var n: UInt32 = 0
        guard let list = gnutls_certificate_get_peers(session, &n), n > 0, let data = list[0].data else { return nil }
        return Array(UnsafeBufferPointer(start: data, count: Int(list[0].size)))
    }

    /// Whether decrypted bytes wait in the session (a `poll` on the socket would not see them).
    public var hasBufferedData: Bool { gnutls_record_check_pending(session) > 0 }

    /// Reads up to `max` bytes; 0 at the end of the stream (a closing alert, or the peer closed
    /// the socket), -1 on error: with `errno` EAGAIN when the socket's receive time-out ran out.
    public func read(_ buffer: UnsafeMutableRawPointer, _ max: Int) -> Int {
        while true {
            let n = gnutls_record_recv(session, buffer, max)
            if n >= 0 { return n }
            if n == GNUTLS_E_AGAIN {
                // The socket's receive time-out (blocking sockets give EAGAIN for nothing else).
                errno = EAGAIN
                return -1
            }
            if n == GNUTLS_E_PREMATURE_TERMINATION { return 0 }
            if gnutls_error_is_fatal(Int32(n)) == 0 { continue }
            return -1
        }
    }

    /// Writes all of `bytes`; false on error.
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var off = 0
        while off < bytes.count {
            let n = gnutls_record_send(session, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 {
                // EAGAIN on a blocking socket is its send time-out: the peer stopped reading.
                if n != GNUTLS_E_AGAIN && gnutls_error_is_fatal(Int32(n)) == 0 { continue }
                return false
            }
            off += n
        }
        return true
    }

    /// Writes all of `bytes`; false on error.
    public func write(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { write($0) } }

    /// Sends the closing alert (blocking, up to the socket's send time-out).
    public func bye() { gnutls_bye(session, GNUTLS_SHUT_WR) }
}
