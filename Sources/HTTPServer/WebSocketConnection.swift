import Synchronization

/// What a protocol room does with its WebSocket connections. Every call comes on the
/// connection's HTTP/1.1 loop thread, so it should not block.
public protocol WebSocketHandler: AnyObject, Sendable {
    /// The 101 is queued; the connection is open. Called on the connection's loop thread.
    func opened(_ ws: WebSocketConnection)
    /// One complete text message: reassembled from fragments, valid UTF-8, at most
    /// options.maxMessageBytes. Loop thread.
    func received(_ text: String, on ws: WebSocketConnection)
    /// Any frame came from the client (data or control, incl. ping): lets the room note
    /// heartbeats. Loop thread. May be a no-op.
    func sawFrame(on ws: WebSocketConnection)
    /// The connection ended, exactly once, whatever ended it (client close frame, server close,
    /// protocol error, EOF, idle, shutdown). `code` is the close code sent or received (1006 when
    /// the TCP connection just went), `reason` text. Loop thread.
    func closed(_ ws: WebSocketConnection, code: UInt16, reason: String)
}

/// A WebSocket connection's limits and deadlines.
public struct WebSocketOptions: Sendable {
    /// One frame or a reassembled message over it: close 1009.
    public var maxMessageBytes = 64 * 1024
    /// No frame at all from the client that long: close 1000 ("idle").
    public var idleSeconds = 3600
    /// No complete text message within this many seconds of the upgrade: close 1008 with
    /// `firstMessageReason`.
    public var firstMessageSeconds: Int? = nil
    public var firstMessageReason = "no message"
    public init() {}
}

/// Process-wide connection ids, from 1.
private let nextWebSocketID = Atomic<UInt64>(0)

/// One open WebSocket connection, as its room sees it: send text and close from any thread.
///
/// The connection itself (its frames, its state, its closing) lives on its HTTP/1.1 loop
/// (`HTTP1Connection+WebSocket.swift`); this object is what other threads may touch: the
/// outbox under a lock, and the time of the client's last frame. Checked `Sendable`: every stored
/// property is immutable or a `Mutex`/`Atomic`.
public final class WebSocketConnection: Sendable {
    /// Unique per server process, increasing from 1; the room names it "ws\(id)".
    public let id: UInt64
    /// The client's "ip:port" (for the HTTPS port: the TCP peer the TLS listener accepted).
    public let remote: String
    public let isSecure: Bool
    let connection: HTTP1Connection
    private let outbox = Mutex<Outbox>(Outbox())
    private let lastFrame: Atomic<UInt64>

    /// What other threads hand the loop: frames in call order, a close asked for, and whether the
    /// loop was woken for them already.
    struct Outbox {
        var frames: [UInt8] = []
        var close: (code: UInt16, reason: String)?
        /// Closed (by either side, or gone): sends are dropped.
        var ended = false
        var wakeQueued = false
        /// More than `maxQueuedBytes` waited for the loop: the client is dropped.
        var overflowed = false
    }

    /// Bytes queued by `send` that the loop has not taken yet, past which the connection is
    /// dropped as a client that does not read would be.
    static let maxQueuedBytes = 4 * 1024 * 1024

    init(remote: String, isSecure: Bool, connection: HTTP1Connection, now: UInt64) {
        id = nextWebSocketID.add(1, ordering: .relaxed).newValue
        self.remote = remote
        self.isSecure = isSecure
        self.connection = connection
        lastFrame = Atomic(now)
    }

    /// Sends `text` as one text frame, from any thread; messages go out in call order. After the
    /// connection closed (either side), dropped.
    public func send(text: String) {
        let wake = outbox.withLock { o -> Bool in
            guard !o.ended, o.close == nil, !o.overflowed else { return false }
            WebSocketFrames.append(opcode: WebSocketOpcode.text, payload: text.utf8, into: &o.frames)
            if o.frames.count > Self.maxQueuedBytes {
                o.overflowed = true
                o.frames = []
            }
            defer { o.wakeQueued = true }
            return !o.wakeQueued
        }
        if wake { connection.loop.wake(connection) }
    }

    /// Closes the connection from any thread: the close frame with `code` and `reason` (cut to
    /// 123 bytes), then the TCP connection after the client's close or 2 s. `handler.closed` is
    /// called once. Later calls, and calls after the connection ended, do nothing.
    public func close(code: UInt16, reason: String) {
        let wake = outbox.withLock { o -> Bool in
            guard !o.ended, o.close == nil else { return false }
            o.close = (code, reason)
            defer { o.wakeQueued = true }
            return !o.wakeQueued
        }
        if wake { connection.loop.wake(connection) }
    }

    /// Monotonic nanoseconds of the client's last frame (the upgrade's time before the first).
    public var lastFrameAtNanos: UInt64 { lastFrame.load(ordering: .relaxed) }

    // MARK: the loop's side

    func sawFrame(at now: UInt64) { lastFrame.store(now, ordering: .relaxed) }

    /// Takes what other threads queued (the loop thread).
    func takeOutbox() -> (frames: [UInt8], close: (code: UInt16, reason: String)?, overflowed: Bool) {
        outbox.withLock { o in
            defer {
                if o.close != nil { o.ended = true }
                o.frames = []
                o.close = nil
                o.wakeQueued = false
            }
            return (o.frames, o.close, o.overflowed)
        }
    }

    /// The connection is closing or gone: nothing more is queued.
    func markEnded() {
        outbox.withLock { o in
            o.ended = true
            o.frames = []
        }
    }
}
