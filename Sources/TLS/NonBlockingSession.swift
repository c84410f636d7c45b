import CGnuTLS

#if canImport(Glibc)
    import Glibc
#endif

/// The server side of one TLS session over a non-blocking socket, for an event loop: no call
/// waits. The handshake, reads and writes return `.wouldBlock` when the socket has nothing to
/// give or no room to take; the loop calls again when the socket is ready (an edge-triggered
/// epoll registered for both directions needs nothing more; `wantsWrite` says which direction
/// GnuTLS was blocked on, for a loop that watches one at a time).
///
/// GnuTLS reads and writes the descriptor itself (`transport_set_int`: its default push and pull
/// are `send` and `recv`, whose `EAGAIN` it returns as `GNUTLS_E_AGAIN`). The session never
/// closes the socket; `bye()` sends the closing alert if the socket takes it at once.
///
/// Not `Sendable`: one thread (the loop's) owns a session and everything it calls.
public final class NonBlockingTLSSession {
    public enum Progress: Equatable {
        /// The handshake is complete.
        case done
        /// Call again when the socket is ready.
        case wouldBlock
        /// The handshake failed (GnuTLS's message).
        case failed(String)
    }

    public enum ReadResult: Equatable {
        /// This many bytes were read into the buffer (at least one).
        case bytes(Int)
        /// Nothing now: call again when the socket is readable (or writable: `wantsWrite`).
        case wouldBlock
        /// The peer ended the stream (a closing alert, or the socket closed).
        case end
        /// The session failed (GnuTLS's message).
        case failed(String)
    }

    public enum WriteResult: Equatable {
        /// This many of the bytes were sent (at least one).
        case wrote(Int)
        /// The socket is full: call again with the same bytes when it is writable.
        case wouldBlock
        case failed(String)
    }

    private let session: gnutls_session_t
    /// Kept alive as long as the session uses them.
    private let credentials: TLSCredentials
    /// The size of a record send GnuTLS was interrupted in (`GNUTLS_E_AGAIN`): it must be called
    /// again with the same size, its bytes already taken.
    private var pendingWrite = 0
    public private(set) var isHandshakeDone = false

    /// Sets up the server side on non-blocking `fd` presenting `credentials`, with the shared
    /// default priorities; nothing is read or written before `handshake()`.
    public init(serverOn fd: Int32, credentials: TLSCredentials) throws(TLSError) {
        var s: gnutls_session_t?
        let rc = gnutls_init(&s, UInt32(GNUTLS_SERVER) | UInt32(GNUTLS_NO_SIGNAL) | UInt32(GNUTLS_NONBLOCK))
        guard rc >= 0, let s else { throw TLSError("gnutls_init", rc) }
        TLSPriorities.apply(to: s)
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.credentials))
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_IGNORE)
        gnutls_transport_set_int2(s, fd, fd)
        session = s
        self.credentials = credentials
    }

    deinit { gnutls_deinit(session) }

    /// Advances the handshake as far as the socket allows.
    public func handshake() -> Progress {
        guard !isHandshakeDone else { return .done }
        while true {
            let rc = gnutls_handshake(session)
            if rc >= 0 {
                isHandshakeDone = true
                return .done
            }
            if rc == GNUTLS_E_AGAIN { return .wouldBlock }
            if rc == GNUTLS_E_INTERRUPTED || gnutls_error_is_fatal(rc) == 0 { continue }
            return .failed(TLSError("TLS handshake failed", rc).description)
        }
    }

    /// Whether the last call that gave `.wouldBlock` waits for the socket to take bytes rather
    /// than to give them (`gnutls_record_get_direction`).
    public var wantsWrite: Bool { gnutls_record_get_direction(session) == 1 }

    /// Whether decrypted bytes wait in the session (epoll would not see them).
    public var hasBufferedData: Bool { gnutls_record_check_pending(session) > 0 }

    /// Reads up to `max` bytes of application data.
    public func read(into buffer: UnsafeMutableRawPointer, max: Int) -> ReadResult {
        while true {
            let n = gnutls_record_recv(session, buffer, max)
            if n > 0 { return .bytes(n) }
            if n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION { return .end }
            if n == GNUTLS_E_AGAIN { return .wouldBlock }
            if n == GNUTLS_E_INTERRUPTED || gnutls_error_is_fatal(Int32(n)) == 0 { continue }
            return .failed(TLSError("TLS read failed", Int32(n)).description)
        }
    }

    /// Sends the first bytes of `bytes` (at most a record's worth). After `.wouldBlock`, call
    /// again with the same first bytes (more may follow them).
    public func write(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        guard bytes.count > 0 else { return .wrote(0) }
        let size = pendingWrite > 0 ? pendingWrite : Swift.min(bytes.count, 16 << 10)
        precondition(size <= bytes.count, "a write after wouldBlock must repeat its bytes")
        while true {
            let n = gnutls_record_send(session, bytes.baseAddress, size)
            if n > 0 {
                pendingWrite = 0
                return .wrote(n)
            }
            if n == GNUTLS_E_AGAIN {
                pendingWrite = size
                return .wouldBlock
            }
            if n == GNUTLS_E_INTERRUPTED || (n < 0 && gnutls_error_is_fatal(Int32(n)) == 0) { continue }
            return .failed(TLSError("TLS write failed", Int32(n)).description)
        }
    }

    /// Sends the closing alert if the socket takes it now (never waits; an alert that does not
    /// fit is dropped, as the socket closes next anyway).
    public func bye() { _ = gnutls_bye(session, GNUTLS_SHUT_WR) }
}
