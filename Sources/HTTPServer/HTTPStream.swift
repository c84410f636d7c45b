import Synchronization

/// The body of a streaming response (server-sent events): written by a producer on any thread,
/// sent as it comes; while there is nothing to send, the connection is suspended and holds no
/// thread.
///
/// `@unchecked Sendable`: all mutable state is reached under `state`'s lock.
public final class HTTPStream: @unchecked Sendable {
    struct State {
        var backlog = StreamBacklog()
        var finished = false
        /// Ended by `cut()`: nothing more is sent, the reader is let go.
        var cut = false
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
    public var buffered: Int { state.withLock { $0.backlog.count } }

    /// Whether `cut()` ended the stream (its connection lets the reader go, not ends the body).
    var isCut: Bool { state.withLock { $0.cut } }

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
            s.backlog.append(bytes)
            return s.takeSuspended()
        }
        resume.run()
    }

    /// Ends the stream at once, dropping what was not sent: its connection lets the reader go
    /// (HTTP/1.1 closes the connection, HTTP/2 resets the stream). For a reader too far behind:
    /// ended with `finish()` it would keep its whole backlog for as long as it stays connected
    /// without reading.
    public func cut() {
        // The backlog comes out of the lock to be freed.
        let (wake, _) = state.withLock { s -> ((@Sendable () -> Void)?, StreamBacklog) in
            s.cut = true
            s.finished = true
            let backlog = s.backlog
            s.backlog = StreamBacklog()
            // Woken even when not suspended: a connection waiting for its socket to drain (a
            // reader that stopped reading) would otherwise never look at the stream again.
            s.suspended = false
            return (s.wake, backlog)
        }
        wake?()
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
            if s.backlog.count > 0 {
                let out = s.backlog.take(max: max)
                return (out, s.finished && s.backlog.count == 0)
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
            s.backlog = StreamBacklog()
            defer { s.onClose = [] }
            return s.onClose
        }
        for h in hooks { h() }
    }
}

/// What a stream's producer wrote and its connection has not taken yet, as blocks of at most
/// `blockBytes` (a write larger than that is a block of its own). One growing array doubled its
/// capacity as it went: a reader 4 MiB behind had 8 MiB reserved, and every take copied all that
/// stayed. Here what is held stays within a block of what is buffered, a block of 64 KiB is
/// allocated with its own mapping (`SystemIO.mapLargeAllocations`) and so goes back to the system
/// when dropped, and taking bytes copies nothing.
struct StreamBacklog {
    static let blockBytes = 64 * 1024
    private var blocks: [[UInt8]] = []
    /// Bytes of `blocks[0]` taken already.
    private var taken = 0
    /// Bytes held and not taken.
    private(set) var count = 0

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        count += bytes.count
        guard let last = blocks.indices.last, blocks[last].count + bytes.count <= Self.blockBytes else {
            // Kept as written: the event bus hands every reader the same array, shared until one
            // of them appends to it.
            blocks.append(bytes)
            return
        }
        let needed = blocks[last].count + bytes.count
        if needed > blocks[last].capacity {
            // Doubling as an array grows, but never past a block.
            blocks[last].reserveCapacity(Swift.min(Swift.max(needed, 2 * blocks[last].capacity), Self.blockBytes))
        }
        blocks[last].append(contentsOf: bytes)
    }

    /// What the blocks have reserved, held or not (at most a block more than `count`, and what
    /// writes larger than a block reserved past their size).
    var reservedBytes: Int { blocks.reduce(0) { $0 + $1.capacity } }

    /// Up to `max` bytes from the front (fewer at the end of a block), without copying.
    mutating func take(max: Int) -> ArraySlice<UInt8> {
        guard let first = blocks.first else { return [] }
        let n = Swift.min(max, first.count - taken)
        let out = first[taken..<(taken + n)]
        taken += n
        count -= n
        if taken == first.count {
            blocks.removeFirst()
            taken = 0
        }
        return out
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
