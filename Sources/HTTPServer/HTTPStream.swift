import Synchronization

/// The body of a streaming response (server-sent events): written by a producer on any thread,
/// sent as it comes; while there is nothing to send, the connection is suspended and holds no
/// thread.
///
/// `@unchecked Sendable`: all mutable state is reached under `state`'s lock.
public final class HTTPStream: @unchecked Sendable {
    struct State {
        var buffer: [UInt8] = []
        var finished = false
        var closed = false
        var suspended = false
        /// Asks the stream's connection (its HTTP/1.1 loop or HTTP/2 thread) to read it again.
        var wake: (@Sendable () -> Void)?
        var onClose: [@Sendable () -> Void] = []
    }
    let state = Mutex<State>(State())

    /// An empty open stream.
    public init() {}

    /// Bytes written but not yet handed to the connection.
    public var buffered: Int { state.withLock { $0.buffer.count } }

    /// Runs `body` once when the connection behind the stream is gone.
    public func onClose(_ body: @escaping @Sendable () -> Void) {
        let closedAlready = state.withLock { s -> Bool in
            if s.closed { return true }
            s.onClose.append(body)
            return false
        }
        if closedAlready { body() }
    }

    /// Appends bytes to send.
    public func write(_ bytes: [UInt8]) {
        let resume = state.withLock { s -> Resume in
            guard !s.finished, !s.closed else { return .nothing }
            s.buffer.append(contentsOf: bytes)
            return s.takeSuspended()
        }
        resume.run()
    }

    /// Ends the stream once what was written is sent.
    public func finish() {
        let resume = state.withLock { s -> Resume in
            s.finished = true
            return s.takeSuspended()
        }
        resume.run()
    }

    /// The connection's thread: the next bytes to send (at most `max`); `end`
    /// once finished and drained; nothing and not `end` marks the stream suspended until `write`
    /// or `finish` calls `wake`.
    func nextBytes(max: Int) -> (bytes: ArraySlice<UInt8>, end: Bool) {
        state.withLock { s in
            if !s.buffer.isEmpty {
                let n = Swift.min(max, s.buffer.count)
                let out = s.buffer[0..<n]
                s.buffer.removeFirst(n)
                return (out, s.finished && s.buffer.isEmpty)
            }
            if s.finished || s.closed { return ([], true) }
            s.suspended = true
            return ([], false)
        }
    }

    /// The response is gone (sent to the end, or the client left).
    func released() {
        let hooks = state.withLock { s -> [@Sendable () -> Void] in
            s.closed = true
            s.buffer = []
            defer { s.onClose = [] }
            return s.onClose
        }
        for h in hooks { h() }
    }
}

/// What `write` or `finish` must do to get a suspended stream read again.
enum Resume {
    case nothing
    case wake(@Sendable () -> Void)

    func run() {
        if case .wake(let w) = self { w() }
    }
}

extension HTTPStream.State {
    /// How to resume the reader, clearing the suspended mark.
    mutating func takeSuspended() -> Resume {
        guard suspended, let wake else { return .nothing }
        suspended = false
        return .wake(wake)
    }
}
