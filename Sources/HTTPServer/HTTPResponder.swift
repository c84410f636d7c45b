import CMicroHTTPD
import Dispatch
import Synchronization

/// Where a handler sends its answer: exactly once, now or later, from any thread. Answers after
/// the first are ignored.
///
/// The same responder answers an HTTP/1.1 request of the plain port's loop (the answer is handed
/// to the connection's loop), one of libmicrohttpd (its connection suspended until the answer
/// comes) and an HTTP/2 stream (the answer is handed to the stream's connection), so handlers
/// never know which protocol they serve.
///
/// `@unchecked Sendable`: all mutable state is reached under `lock` (a `Mutex`: allocation-free,
/// and contended only when a late answer races the handler's return); `connection` is only used
/// (to resume) while the request is suspended, which keeps it alive inside libmicrohttpd;
/// `stream` and `http1` are immutable and Sendable.
public final class HTTPResponder: @unchecked Sendable {
    private let lock = Mutex<State>(State())
    private let connection: OpaquePointer?
    private let stream: HTTP2StreamTarget?
    private let http1: HTTP1Target?
    private unowned let core: ServerCore

    struct State {
        var response: HTTPResponse?
        var answered = false
        var suspended = false
        /// An answer decided but held back (`send(_:afterMillis:)`): what a stopping server
        /// sends instead of 503.
        var decided: HTTPResponse?
    }

    /// The responder of an HTTP/1.1 request on a libmicrohttpd connection.
    init(connection: OpaquePointer, core: ServerCore) {
        self.connection = connection
        self.stream = nil
        self.http1 = nil
        self.core = core
    }

    /// The responder of an HTTP/1.1 request on the plain port's own loop: answers go to the
    /// connection's loop (directly when sent on its thread).
    init(http1: HTTP1Target, core: ServerCore) {
        self.connection = nil
        self.stream = nil
        self.http1 = http1
        self.core = core
    }

    /// The responder of an HTTP/2 stream: answers go to `stream`'s connection.
    init(stream: HTTP2StreamTarget, core: ServerCore) {
        self.connection = nil
        self.stream = stream
        self.http1 = nil
        self.core = core
    }

    /// Sends `response` `ms` milliseconds from now, or at once if the server stops before then
    /// (the answer is decided: a request whose work is done must not get 503).
    public func send(_ response: HTTPResponse, afterMillis ms: Int) {
        lock.withLock { $0.decided = response }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(ms), execute: { self.send(response) })
    }

    /// The answer to send while stopping: the one decided, else 503.
    var answerWhileStopping: HTTPResponse { lock.withLock { $0.decided } ?? ServerCore.shuttingDown }

    /// Whether an answer was sent already.
    var isAnswered: Bool { lock.withLock { $0.answered } }

    /// Sends `response`.
    public func send(_ response: HTTPResponse) {
        if let http1 {
            let first = lock.withLock { s -> Bool in
                defer { s.answered = true }
                return !s.answered
            }
            if first { http1.connection.loop.answer(http1.connection, http1.seq, response) }
            return
        }
        if let stream {
            let first = lock.withLock { s -> Bool in
                defer { s.answered = true }
                return !s.answered
            }
            if first { stream.connection.answer(stream.id, response) }
            return
        }
        let resume: Bool = lock.withLock { s in
            guard !s.answered else { return false }
            s.answered = true
            s.response = response
            if s.suspended {
                s.suspended = false
                return true
            }
            return false
        }
        if resume, let connection {
            core.unregister(self)
            MHD_resume_connection(connection)
        }
    }

    /// Called by the loop after the handler returned: the response to queue now, or nil after
    /// suspending the connection until `send`. (HTTP/1.1 only.)
    func responseOrSuspend() -> HTTPResponse? {
        lock.withLock { s in
            if s.answered { return s.response.take() }
            // Once the server is stopping nothing is suspended any more (libmicrohttpd must not
            // be stopped with a suspended connection): the request is answered 503 at once.
            guard core.register(self) else {
                s.answered = true
                return s.decided ?? ServerCore.shuttingDown
            }
            // Suspend while holding the lock, so a concurrent `send` resumes only after this.
            s.suspended = true
            if let connection { MHD_suspend_connection(connection) }
            return nil
        }
    }

    /// The answer after a resume.
    func takeResponse() -> HTTPResponse? {
        lock.withLock { $0.response.take() }
    }
}

/// An HTTP/2 stream a responder answers: its connection and its id.
struct HTTP2StreamTarget: Sendable {
    let connection: HTTP2Connection
    let id: Int32
}
