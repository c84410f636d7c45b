import Dispatch
import Synchronization

/// Where a handler sends its answer: exactly once, now or later, from any thread. Answers after
/// the first are ignored.
///
/// The same responder answers an HTTP/1.1 request (the answer is handed to the connection's
/// loop) and an HTTP/2 stream (the answer is handed to the stream's connection), so handlers
/// never know which protocol they serve.
///
/// `@unchecked Sendable`: all mutable state is reached under `lock` (a `Mutex`: allocation-free,
/// and contended only when a late answer races the handler's return); `stream` and `http1` are
/// immutable and Sendable.
public final class HTTPResponder: @unchecked Sendable {
    private let lock = Mutex<State>(State())
    private let stream: HTTP2StreamTarget?
    private let http1: HTTP1Target?

    struct State {
        var answered = false
        /// An answer decided but held back (`send(_:afterMillis:)`): what a stopping server
        /// sends instead of 503.
        var decided: HTTPResponse?
    }

    /// The responder of an HTTP/1.1 request on one of the server's loops: answers go to the
    /// connection's loop (directly when sent on its thread).
    init(http1: HTTP1Target) {
        self.stream = nil
        self.http1 = http1
    }

    /// The responder of an HTTP/2 stream: answers go to `stream`'s connection.
    init(stream: HTTP2StreamTarget) {
        self.stream = stream
        self.http1 = nil
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
        let first = lock.withLock { s -> Bool in
            defer { s.answered = true }
            return !s.answered
        }
        guard first else { return }
        if let http1 {
            http1.connection.loop.answer(http1.connection, http1.seq, response)
        } else if let stream {
            // A WebSocket's 101 cannot be served on an HTTP/2 stream (routes refuse first).
            stream.connection.answer(stream.id, response.webSocket == nil ? response : WebSocketUpgrade.notUpgradable)
        }
    }
}

extension HTTPResponder {
    /// Runs `body` on the thread that serves this request's connection (its HTTP/1.1 loop, or its
    /// HTTP/2 connection's thread) in that thread's next round, followed there by the server's
    /// `afterBatch`, from any thread. For work done off the loop (a Web Push body decrypted on a
    /// pool of threads) whose end must be finished where the request came in: what `body` leaves
    /// pending (a send queued for the store) is committed with that round's sends, by the loop's
    /// one commit a round, and `body` answers through this responder as a handler does.
    ///
    /// `body`'s argument is what `HTTPRequest.inBatch` says for a handler: true on that thread
    /// when the server has an `afterBatch`; false when the connection has ended (or its loop
    /// stopped) before the work came back, and `body` then runs on the calling thread, so it
    /// must commit what it queues itself.
    public func continueOnConnection(_ body: @escaping @Sendable (_ inBatch: Bool) -> Void) {
        if let http1 {
            http1.connection.loop.post(.run(body))
        } else if let stream {
            stream.connection.post(.run(body))
        }
    }
}

/// An HTTP/2 stream a responder answers: its connection and its id.
struct HTTP2StreamTarget: Sendable {
    let connection: HTTP2Connection
    let id: Int32
}
