import FCMCore
public import FCMModel
import Platform
import Synchronization

/// One live reader of the events: the control API's event stream (an HTTP stream) is one.
public protocol EventReader: AnyObject, Sendable {
    /// Bytes written but not yet taken by the reader's connection.
    var buffered: Int { get }
    /// Runs `body` once when the reader's connection is gone.
    func onClose(_ body: @escaping @Sendable () -> Void)
    /// Appends bytes to send.
    func write(_ bytes: [UInt8])
    /// Ends the stream once what was written is sent.
    func finish()
    /// Ends the stream at once and lets the reader go, dropping what it was not sent.
    func cut()
}

/// Live events for `GET /api/v1/events` (server-sent events).
///
/// Publishing never waits for a reader: each reader's stream buffers what it has not taken yet,
/// and a reader that falls more than `maxBehindBytes` behind (or went away) is dropped, so a slow
/// or vanished reader cannot slow sends down. At most `maxReaders` are connected at once, so
/// readers that do not read hold at most `maxReaders` × `maxBehindBytes` between them.
public final class EventBus: Sendable {
    /// The web page holds one reader per open tab, a test suite one or a few: 64 is more than a
    /// demanding user opens, and bounds what readers that stop reading can hold (64 × 4 MiB),
    /// where any number of them could each hold 4 MiB before.
    public static let defaultMaxReaders = 64

    private let readers = Locked<[ObjectIdentifier: any EventReader]>([:])
    private let count = Atomic<Int>(0)
    /// How far a reader may fall behind before it is dropped.
    let maxBehindBytes: Int
    /// How many readers may be connected at once.
    public let maxReaders: Int
    /// How often a comment line goes to every reader while any is connected.
    let keepaliveMillis: Int
    /// A trim of the heap is under way or about to start (`releaseFreedMemory`).
    private let trimming = Atomic<Bool>(false)
    /// Sends the comment; started with the first reader, stopped by `closeAll()`.
    private let keepalive = Mutex<(task: PeriodicTask?, closed: Bool)>((nil, false))

    /// A bus dropping readers that fall `maxBehindBytes` behind, taking at most `maxReaders`.
    init(maxBehindBytes: Int = 4 << 20, keepaliveMillis: Int = 15_000, maxReaders: Int = defaultMaxReaders) {
        self.maxBehindBytes = maxBehindBytes
        self.keepaliveMillis = keepaliveMillis
        self.maxReaders = maxReaders
    }

    /// Whether anyone listens (publishers skip building events when not).
    var hasReaders: Bool { count.load(ordering: .relaxed) > 0 }

    /// How many readers are connected.
    public var readerCount: Int { count.load(ordering: .relaxed) }

    /// Adds a reader; it is removed when its connection goes. Refused (`unavailable`) when
    /// `maxReaders` are connected already.
    public func subscribe(_ s: any EventReader) throws(EngineError) {
        let id = ObjectIdentifier(s)
        let full = readers.withLock { r -> Int? in
            guard r.count < maxReaders else { return r.count }
            r[id] = s
            count.wrappingAdd(1, ordering: .relaxed)
            return nil
        }
        if let full {
            throw .unavailable("\(full) event streams are open and the limit is \(maxReaders): close one (a page's tab, a test's reader) and connect again")
        }
        s.onClose { [weak self] in self?.remove(id) }
        // A comment line first, so the client sees the stream is open before any event.
        s.write(Array(": fcm-mock events\n\n".utf8))
        // Then one now and then: idle proxies keep the stream, and a reader that went away is
        // found by the failed write and dropped (it was counted in health until the next event).
        keepalive.withLock { k in
            guard k.task == nil, !k.closed else { return }
            k.task = PeriodicTask(everyMillis: keepaliveMillis) { [weak self] in self?.sendKeepalive() }
        }
    }

    private func sendKeepalive() {
        guard hasReaders else { return }
        deliver(Array(": keepalive\n\n".utf8))
    }

    private func remove(_ id: ObjectIdentifier) {
        readers.withLock { r in
            if r.removeValue(forKey: id) != nil { count.wrappingSubtract(1, ordering: .relaxed) }
        }
    }

    /// Writes `bytes` to every reader, in the order they are called, dropping those too far
    /// behind: a dropped reader's stream is cut, so what it was not sent goes at once (rather than
    /// stay for as long as the reader stays connected without reading).
    private func deliver(_ bytes: [UInt8]) {
        var dropped = false
        for (id, s) in readers.withLock({ $0 }) {
            if s.buffered > maxBehindBytes {
                // Too slow: let it go (it can reconnect) rather than hold memory for it.
                s.cut()
                remove(id)
                dropped = true
            } else {
                s.write(bytes)
            }
        }
        if dropped { releaseFreedMemory() }
    }

    /// Up to 4 MiB a dropped reader held went back to the heap: its free pages go to the system
    /// now, not at the pruner's next trim (within 10 s). On a thread of its own, as trimming a
    /// heap that freed much takes milliseconds (13 ms measured after freeing 128 MB), which a
    /// publisher must not wait; drops close together share one trim.
    private func releaseFreedMemory() {
        guard !trimming.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let started = trySpawnThread { [self] in
            trimming.store(false, ordering: .releasing)
            SystemIO.releaseFreedMemory()
        }
        // No thread to be had: the pruner's trim will do.
        if !started { trimming.store(false, ordering: .releasing) }
    }

    /// Sends events (name, JSON data) to every reader, in order.
    public func publish(_ events: [(String, String)]) {
        guard hasReaders, !events.isEmpty else { return }
        var bytes: [UInt8] = []
        for (name, data) in events {
            bytes.append(contentsOf: Array("event: \(name)\ndata: ".utf8))
            bytes.append(contentsOf: Array(data.utf8))
            bytes.append(contentsOf: [10, 10])
        }
        deliver(bytes)
    }

    /// Ends every stream (at shutdown).
    func closeAll() {
        let task = keepalive.withLock { k in
            k.closed = true
            defer { k.task = nil }
            return k.task
        }
        task?.stop()
        for (_, s) in readers.withLock({ $0 }) { s.finish() }
    }
}

/// Builders of event payloads.
enum EventJSON {
    /// `more`: members after `at` (a real client's delivery's `client_delivery`).
    static func delivery(messageID: String, token: String?, status: String, at: Int64,
                         more: (inout JSONWriter) -> Void = { _ in }) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("message_id"); w.value(messageID)
        w.key("token"); w.value(token)
        w.key("status"); w.value(status)
        w.key("at"); w.value(rfc3339(millis: at))
        more(&w)
        w.endObject()
        return w.string
    }

    /// The event name for a delivery status.
    static func name(forStatus status: String) -> String? {
        switch status {
        case "delivered": return "message.delivered"
        case "sent": return "message.sent"
        case "client_rejected": return "message.client_rejected"
        case "expired": return "message.expired"
        case "collapsed": return "message.collapsed"
        case "dropped": return "message.dropped"
        case "replaced": return "message.replaced"
        case "undecryptable": return "message.undecryptable"
        case "undeliverable": return "message.undeliverable"
        case "deleted": return "message.deleted"
        default: return nil
        }
    }
}
