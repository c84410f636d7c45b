import CMicroHTTPD
import Synchronization

/// The body of a streaming response (server-sent events): written by a producer on any thread,
/// sent as it comes; while there is nothing to send, the connection is suspended and holds no
/// thread.
///
/// `@unchecked Sendable`: all mutable state is reached under `state`'s lock; `connection` is set
/// once, by the loop thread that queues the response, before any read.
public final class HTTPStream: @unchecked Sendable {
    struct State {
        var buffer: [UInt8] = []
        var finished = false
        var closed = false
        var suspended = false
        /// The connection's address as an integer (0: not queued yet), so the state stays Sendable.
        var connection: UInt = 0
        /// On HTTP/2: asks the stream's connection to read again (instead of resuming `connection`).
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

    /// HTTP/2 and the plain port's HTTP/1.1 loop: the next bytes to send (at most `max`); `end`
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

    /// libmicrohttpd asks for the next bytes (on the connection's loop thread).
    func read(into buf: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { s in
            if !s.buffer.isEmpty {
                let n = Swift.min(max, s.buffer.count)
                s.buffer.withUnsafeBytes { src in
                    UnsafeMutableRawPointer(buf).copyMemory(from: src.baseAddress!, byteCount: n)
                }
                s.buffer.removeFirst(n)
                return n
            }
            if s.finished { return FCM_MHD_END_OF_STREAM }
            // Nothing yet: suspend until `write` or `finish` resumes (allowed from a reader callback).
            if let c = OpaquePointer(bitPattern: s.connection) {
                s.suspended = true
                MHD_suspend_connection(c)
            }
            return 0
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
    case connection(UInt)
    case wake(@Sendable () -> Void)

    func run() {
        switch self {
        case .nothing: break
        case .connection(let c): if let c = OpaquePointer(bitPattern: c) { MHD_resume_connection(c) }
        case .wake(let w): w()
        }
    }
}

extension HTTPStream.State {
    /// How to resume the reader, clearing the suspended mark.
    mutating func takeSuspended() -> Resume {
        guard suspended else { return .nothing }
        if let wake {
            suspended = false
            return .wake(wake)
        }
        guard connection != 0 else { return .nothing }
        suspended = false
        return .connection(connection)
    }
}

let streamReader: MHD_ContentReaderCallback = { cls, _, buf, max in
    guard let cls, let buf else { return FCM_MHD_END_OF_STREAM }
    return Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue().read(into: buf, max: max)
}

let streamFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let s = Unmanaged<HTTPStream>.fromOpaque(cls).takeRetainedValue()
    s.released()
}
