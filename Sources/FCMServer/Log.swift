import FCMCore

#if canImport(Glibc)
    import Glibc
#endif
import HTTPServer

/// A small leveled logger writing one line per event to stderr, as text or JSON.
///
/// Libraries take it instead of creating one; messages are autoclosures, so a disabled level costs
/// nothing on the hot path.
public struct Log: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        init(_ name: String) {
            switch name {
            case "debug": self = .debug
            case "warning": self = .warning
            case "error": self = .error
            default: self = .info
            }
        }
        var name: String { ["debug", "info", "warning", "error"][rawValue] }
    }

    public let level: Level
    public let json: Bool

    /// A logger at `level` (`debug`…`error`) in `format` (`text` or `json`).
    public init(level: String = "info", format: String = "text") {
        self.level = Level(level)
        self.json = format == "json"
    }

    /// Logs `message` with dotted metadata keys when `at` is enabled.
    public func log(_ at: Level, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, String)] = []) {
        guard at >= level else { return }
        let ts = rfc3339(millis: wallClockMicros() / 1000)
        var line: String
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.key("ts"); w.value(ts)
            w.key("level"); w.value(at.name)
            w.key("msg"); w.value(message())
            for (k, v) in metadata() { w.key(k); w.value(v) }
            w.endObject()
            line = w.string
        } else {
            line = "\(ts) \(at.name) \(message())"
            for (k, v) in metadata() { line += " \(k)=\(v)" }
        }
        LogWriter.shared.append(line + "\n", now: at >= .warning)
    }

    /// Writes out every buffered line (call before the process exits).
    public static func flush() { LogWriter.shared.flush() }

    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }

    /// The access-log line of one HTTP request (info): method, path, status, body bytes, time,
    /// and the credential in masked form.
    public func access(_ a: HTTPAccess) {
        log(.info, "http", [("method", a.method), ("path", a.path), ("status", String(a.status)),
                            ("bytes", a.bytes < 0 ? "stream" : String(a.bytes)),
                            ("ms", Self.millis(a.nanos)), ("auth", Self.maskCredential(a.authorization))])
    }

    /// A time in milliseconds with three decimals.
    static func millis(_ nanos: UInt64) -> String {
        let micros = nanos / 1000
        let frac = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// An Authorization value safe to print: the scheme stays, the secret does not. A server key
    /// keeps its last four characters, so a reader can tell keys apart; anything else is `***`.
    /// `key=AAAAfcmmock:demo-server-key` → `key=***-key`; `Bearer s3cret` → `Bearer ***`; none → `-`.
    public static func maskCredential(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        let v = value.drop { $0 == " " }
        if v.lowercased().hasPrefix("key=") {
            let secret = v.dropFirst(4)
            return secret.count >= 16 ? "key=***" + secret.suffix(4) : "key=***"
        }
        if let space = v.firstIndex(of: " ") {
            return String(v[..<space]) + " ***"
        }
        return "***"
    }
}


/// Buffers log lines and writes them to stderr in batches from one thread, so a busy server (one
/// access-log line per request and per stanza) pays a memory append per line instead of a write
/// system call. Lines reach stderr within about 5 ms; warnings and errors are written at once,
/// and `Log.flush()` empties the buffer before exit.
///
/// `@unchecked Sendable`: `buffer` and `started` are only touched inside `cond.withLock`; the
/// write order is kept by `writing`, held from taking a batch until it is written.
final class LogWriter: @unchecked Sendable {
    static let shared = LogWriter()
    private let cond = ConditionLock()
    private let writing = Locked<Void>(())
    private var buffer: [UInt8] = []
    private var started = false

    func append(_ line: String, now: Bool) {
        let start = cond.withLock { () -> Bool in
            buffer.append(contentsOf: line.utf8)
            defer { started = true }
            return !started
        }
        if start { spawnThread { [self] in run() } }
        if now { flush() } else { cond.broadcast() }
    }

    func flush() {
        writing.withLock { _ in
            let batch = cond.withLock { () -> [UInt8] in
                defer { buffer.removeAll(keepingCapacity: true) }
                return buffer
            }
            guard !batch.isEmpty else { return }
            var off = 0
            while off < batch.count {
                let n = batch.withUnsafeBytes { write(2, $0.baseAddress! + off, $0.count - off) }
                if n <= 0 { return }
                off += n
            }
        }
    }

    private func run() {
        while true {
            cond.withLock {
                while buffer.isEmpty { cond.wait() }
            }
            usleep(5_000)  // gather the lines of the next few milliseconds into one write
            flush()
        }
    }
}
