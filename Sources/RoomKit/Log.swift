import FCMEngine
import FCMCore
public import FCMStore
import Platform

#if canImport(Glibc)
    import Glibc
#endif
public import HTTPServer

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
        // Only the values are taken here; the line is formatted on the writer thread, off the
        // threads that serve requests and stanzas.
        LogWriter.shared.append(LogEntry(micros: wallClockMicros(), level: at, json: json,
                                         body: .event(message(), metadata())),
                                now: at >= .warning)
    }

    /// Writes out every buffered line (call before the process exits), waiting at most
    /// `exitFlushSeconds` for stderr to take them: when it is a pipe nobody reads (a test harness
    /// that never drains it), the rest is lost and the process ends all the same, instead of
    /// waiting for a reader for ever.
    public static func flush() {
        let done = Locked(false)
        let finished = ConditionLock()
        let started = trySpawnThread {
            LogWriter.shared.flush()
            finished.withLock { done.withLock { $0 = true } }
            finished.broadcast()
        }
        guard started else { return LogWriter.shared.flush() }
        let deadline = monotonicNanos() + UInt64(exitFlushSeconds * 1e9)
        finished.withLock {
            while !done.withLock({ $0 }) && monotonicNanos() < deadline { _ = finished.wait(untilMonotonicNanos: deadline) }
        }
    }

    /// How long `flush()` waits for stderr at most.
    public static let exitFlushSeconds = 3.0

    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }

    /// The access-log line of one HTTP request (info): method, path, status, body bytes, time,
    /// and the credential in masked form.
    public func access(_ a: HTTPAccess) {
        guard Level.info >= level else { return }
        // The request's own values only: masking and formatting happen on the writer thread.
        LogWriter.shared.append(LogEntry(micros: wallClockMicros(), level: .info, json: json, body: .http(a)), now: false)
    }

    /// A time in milliseconds with three decimals.
    static func millis(_ nanos: UInt64) -> String {
        let micros = nanos / 1000
        let frac = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// An Authorization value safe to print: the scheme stays, the secret does not (see
    /// `maskSecret`; a bearer token or an unknown form is `***` whatever its length).
    /// `key=AAAAfcmmock:demo-server-key` → `key=***-key`; `Bearer s3cret` → `Bearer ***`; none → `-`.
    public static func maskCredential(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        let v = value.drop { $0 == " " }
        if hasPrefixIgnoringCase(v.utf8, "key=") { return "key=" + maskSecret(v.dropFirst(4)) }
        if let space = v.firstIndex(of: " ") {
            return String(v[..<space]) + " ***"
        }
        return "***"
    }

    /// A server key safe to print: its last four characters, so a reader can tell keys apart, when
    /// it is long enough for that to give nothing away; else `***`. A value with a comma is two
    /// headers joined (`key=…, Bearer x`): its end may be another credential, so none is shown.
    public static func maskSecret(_ secret: Substring) -> String {
        secret.count >= 16 && !secret.contains(",") ? "***" + secret.suffix(4) : "***"
    }
}

extension Log {
    /// The two lines of a spell of failing writes: a warning with SQLite's reason when the first
    /// commit fails (full disk, I/O error, read-only file), an info line when one succeeds again.
    /// Requests failed in between have only their access lines.
    public func storeHealth(_ failure: StoreError?) {
        if let failure {
            warning("store writes are failing: sends answer 500 and health 503 until a write succeeds",
                    [("code", String(failure.code)), ("reason", failure.reason)])
        } else {
            info("store writes succeed again")
        }
    }
}

/// One log event, formatted when it is written.
struct LogEntry: Sendable {
    enum Body: Sendable {
        /// A message with dotted metadata keys.
        case event(String, [(String, String)])
        /// The access-log line of one HTTP request (message `http`).
        case http(HTTPAccess)
    }

    let micros: Int64
    let level: Log.Level
    let json: Bool
    let body: Body

    func format(into out: inout [UInt8], clock: inout LogTimestamp) {
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.key("ts"); w.value(rfc3339(millis: micros / 1000))
            w.key("level"); w.value(level.name)
            w.key("msg"); w.value(message)
            forEachField { k, v in w.key(k); w.value(v) }
            w.endObject()
            out.append(contentsOf: w.string.utf8)
        } else {
            clock.append(millis: micros / 1000, into: &out)
            out.append(32)
            out.append(contentsOf: level.name.utf8)
            out.append(32)
            out.append(contentsOf: message.utf8)
            if case .http(let a) = body {
                Self.appendAccessFields(a, into: &out)
            } else {
                forEachField { k, v in Self.append(k, v.utf8, into: &out) }
            }
        }
        out.append(10)
    }

    /// About the bytes this entry holds and formats to: the UTF-8 length of its strings plus an
    /// allowance for the timestamp, level, keys and the entry itself. Cheap (a string's UTF-8 count
    /// is stored), since every line pays it on the thread that logs it.
    var queuedSize: Int {
        switch body {
        case .event(let message, let metadata):
            var n = 64 + message.utf8.count
            for (k, v) in metadata { n += 2 + k.utf8.count + v.utf8.count }
            return n
        case .http(let a):
            return 128 + a.method.utf8.count + a.path.utf8.count + (a.authorization?.utf8.count ?? 0)
        }
    }

    var message: String {
        switch body {
        case .event(let message, _): return message
        case .http: return "http"
        }
    }

    /// The metadata pairs in order (an access line's are made from its raw values here, on the
    /// writer thread).
    func forEachField(_ field: (String, String) -> Void) {
        switch self.body {
        case .event(_, let metadata):
            for (k, v) in metadata { field(k, v) }
        case .http(let a):
            field("method", a.method)
            field("path", a.path)
            field("status", String(a.status))
            field("bytes", a.bytes < 0 ? "stream" : String(a.bytes))
            field("ms", Log.millis(a.nanos))
            field("auth", Log.maskCredential(a.authorization))
        }
    }

    /// The fields of an access line in text form, written as bytes: the same text as
    /// `forEachField` gives, without the strings it makes (one line per request).
    static func appendAccessFields(_ a: HTTPAccess, into out: inout [UInt8]) {
        appendLiteral(" method=", into: &out)
        out.append(contentsOf: a.method.utf8)
        appendLiteral(" path=", into: &out)
        out.append(contentsOf: a.path.utf8)
        appendLiteral(" status=", into: &out)
        appendDecimal(UInt64(max(0, a.status)), into: &out)
        appendLiteral(" bytes=", into: &out)
        if a.bytes < 0 { appendLiteral("stream", into: &out) } else { appendDecimal(UInt64(a.bytes), into: &out) }
        appendLiteral(" ms=", into: &out)
        let micros = a.nanos / 1000
        appendDecimal(micros / 1000, into: &out)
        let frac = Int(micros % 1000)
        out.append(46)
        out.append(UInt8(48 + frac / 100))
        out.append(UInt8(48 + frac / 10 % 10))
        out.append(UInt8(48 + frac % 10))
        appendLiteral(" auth=", into: &out)
        appendMaskedCredential(a.authorization, into: &out)
    }

    @inline(__always)
    private static func appendLiteral(_ s: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private static func appendDecimal(_ n: UInt64, into out: inout [UInt8]) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buf in
            var i = buf.count
            var v = n
            repeat {
                i -= 1
                buf[i] = UInt8(48 + v % 10)
                v /= 10
            } while v > 0
            out.append(contentsOf: buf[i...])
        }
    }

    /// `Log.maskCredential(value)` appended as bytes. Where the bytes the rules look at are
    /// printable ASCII (every real credential) they are masked as bytes, without reading the rest
    /// of a long token; anything else goes through the string form, whose rules see characters.
    static func appendMaskedCredential(_ value: String?, into out: inout [UInt8]) {
        guard var value, !value.isEmpty else { return out.append(UInt8(ascii: "-")) }
        @inline(__always) func printable(_ b: UInt8) -> Bool { b >= 0x20 && b <= 0x7E }
        let done = value.withUTF8 { u -> Bool in
            var start = 0
            while start < u.count && u[start] == 32 { start += 1 }
            let v = UnsafeBufferPointer(rebasing: u[start...])
            // A character after the blanks could merge with the last of them (a combining mark).
            if let first = v.first, !printable(first) { return false }
            if hasPrefixIgnoringCase(v, "key=") {
                // The secret's length and last characters are shown: every byte counts.
                guard v.allSatisfy(printable) else { return false }
                appendLiteral("key=***", into: &out)
                if v.count - 4 >= 16 && !v.contains(UInt8(ascii: ",")) { out.append(contentsOf: v[(v.count - 4)...]) }
            } else if let space = v.firstIndex(of: 32) {
                // The scheme, and the byte after the blank (a combining mark would make the
                // blank part of another character).
                guard v[..<space].allSatisfy(printable), space + 1 >= v.count || printable(v[space + 1]) else { return false }
                out.append(contentsOf: v[..<space])
                appendLiteral(" ***", into: &out)
            } else {
                // No blank byte at all: no blank character either.
                appendLiteral("***", into: &out)
            }
            return true
        }
        if !done { out.append(contentsOf: Log.maskCredential(value).utf8) }
    }

    private static func append(_ key: String, _ value: String.UTF8View, into out: inout [UInt8]) {
        out.append(32)
        out.append(contentsOf: key.utf8)
        out.append(61)
        out.append(contentsOf: value)
    }
}

/// RFC 3339 timestamps for a run of log lines: the date and time of day are formatted once per
/// second, the milliseconds for each line.
struct LogTimestamp {
    private var second = Int64.min
    private var prefix: [UInt8] = []

    mutating func append(millis: Int64, into out: inout [UInt8]) {
        let sec = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        if sec != second {
            // `YYYY-MM-DDTHH:MM:SS` of the full form `YYYY-MM-DDTHH:MM:SS.mmmZ`.
            prefix = Array(rfc3339(millis: sec * 1000).utf8.dropLast(5))
            second = sec
        }
        out.append(contentsOf: prefix)
        let ms = Int(millis - sec * 1000)
        out.append(46)
        out.append(UInt8(48 + ms / 100))
        out.append(UInt8(48 + ms / 10 % 10))
        out.append(UInt8(48 + ms % 10))
        out.append(90)
    }
}

/// Queues log events and writes them to stderr in batches from one thread, so a busy server (one
/// access-log line per request and per stanza) pays an array append per line on its own threads
/// instead of formatting and a write system call. Lines reach stderr within about 5 ms; warnings
/// and errors wake the writer at once and their caller waits (briefly) until they are written, and
/// `Log.flush()` empties the queue before exit.
///
/// Stderr may stop being read (a pipe nobody drains): the writer then blocks in write(2), and
/// what waits behind it is bounded (`queueLimit`). Lines past the bound are dropped and counted,
/// and once a write goes through again one warning line says how many. No logging thread ever
/// writes itself or waits on a blocked writer, so serving goes on whatever stderr does.
///
/// `@unchecked Sendable`: `pending`, `queuedBytes`, `dropped`, `droppedJSON`, `started`,
/// `urgent`, `appended`, `written` and `writeStartedAt` are only touched inside `cond.withLock`;
/// the write order is kept by `writing`, held from taking a batch until it is written, and
/// `timestamp` is only used inside `writing`; `sink` and `limit` are immutable.
final class LogWriter: @unchecked Sendable {
    static let shared = LogWriter()
    /// The most that may wait to be written, in bytes of formatted text (estimated before
    /// formatting, see `LogEntry.queuedSize`), the batch being written included. Bytes rather than
    /// lines because lines range from a hundred bytes to tens of kilobytes (a request path or a
    /// message is logged whole): a line count would bound nothing, 50,000 lines of 7 KB paths are
    /// 350 MB. 16 MiB holds about 100,000 ordinary access lines, some seconds of a busy server.
    static let queueLimit = 16 << 20
    /// Room kept for warnings and errors beyond `queueLimit`, so a flood of access lines does not
    /// crowd out the few lines that say something went wrong.
    static let urgentReserve = 1 << 20
    static let linesPerWrite = 1000
    /// How long a warning's caller waits for its line to be written at most (a writer short of
    /// CPU), and how long a write may be under way before the writer counts as stuck: a caller
    /// then returns at once, so it waits 10 ms at most on a stderr nobody reads.
    static let urgentWaitNanos: UInt64 = 200_000_000
    static let stuckNanos: UInt64 = 10_000_000

    private let cond = ConditionLock()
    /// A plain lock (a `Locked<Void>` puts its empty value at the object's start, which
    /// ThreadSanitizer takes for a race with the object's header).
    private let writing = ConditionLock()
    private let sink: @Sendable ([UInt8]) -> Void
    private let limit: Int
    private var pending: [LogEntry] = []
    /// The estimated size of `pending` and of the batch being written.
    private var queuedBytes = 0
    /// Lines dropped since the last notice, by level.
    private var dropped = [0, 0, 0, 0]
    private var droppedJSON = false
    private var started = false
    /// A warning or error waits: the writer does not gather.
    private var urgent = false
    /// Sequence numbers: of the last entry queued, and of the last written.
    private var appended: UInt64 = 0
    private var written: UInt64 = 0
    /// When the write(2) under way began (monotonic nanoseconds); 0 when none is.
    private var writeStartedAt: UInt64 = 0
    /// Only used inside `writing`.
    private var timestamp = LogTimestamp()

    /// A writer to `sink` (stderr unless a test gives its own) keeping at most `limit` bytes
    /// waiting (plus `urgentReserve` for warnings and errors).
    init(limit: Int = LogWriter.queueLimit, sink: @escaping @Sendable ([UInt8]) -> Void = { SystemIO.writeStderr($0) }) {
        self.limit = limit
        self.sink = sink
    }

    /// Queues `entry`, or drops and counts it when the queue is full. With `now` (warnings and
    /// errors) the writer is woken at once and the caller waits until the line is written, unless
    /// the writer is stuck in a write or `urgentWaitNanos` pass.
    func append(_ entry: LogEntry, now: Bool) {
        let size = entry.queuedSize
        let (start, wake, sequence) = cond.withLock { () -> (Bool, Bool, UInt64?) in
            defer { started = true }
            guard queuedBytes + size <= limit + (entry.level >= .warning ? Self.urgentReserve : 0) else {
                dropped[entry.level.rawValue] += 1
                droppedJSON = entry.json
                return (!started, false, nil)
            }
            let wasEmpty = pending.isEmpty
            pending.append(entry)
            queuedBytes += size
            appended += 1
            if now { urgent = true }
            // The writer waits for a first line, or gathers for 5 ms: only a first line or a
            // warning needs to wake it.
            return (!started, wasEmpty || now, appended)
        }
        if start { spawnThread { [self] in run() } }
        if wake { cond.broadcast() }
        if now, let sequence { waitUntilWritten(sequence) }
    }

    /// Writes out every queued line on the calling thread (before exit; blocks while stderr does).
    func flush() {
        writing.withLock {
            // A notice queued by a batch is written before returning.
            while writeBatch() {}
        }
    }

    /// The number of lines dropped and not yet told, by level (for tests).
    var droppedCounts: [Int] { cond.withLock { dropped } }

    /// Writes what is queued; returns true when lines had been dropped meanwhile and their notice
    /// was queued after the batch. Call inside `writing`.
    private func writeBatch() -> Bool {
        let batch = cond.withLock { () -> [LogEntry] in
            urgent = false
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        guard !batch.isEmpty else { return false }
        // A thousand lines to a write: a backlog (stderr not read for a while) is written as it
        // is formatted, in a buffer of one slice's size.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(min(batch.count, Self.linesPerWrite) * 128)
        var size = 0
        var start = 0
        while start < batch.count {
            let end = min(start + Self.linesPerWrite, batch.count)
            bytes.removeAll(keepingCapacity: true)
            for e in batch[start..<end] {
                e.format(into: &bytes, clock: &timestamp)
                size += e.queuedSize
            }
            cond.withLock { writeStartedAt = monotonicNanos() }
            sink(bytes)
            cond.withLock {
                writeStartedAt = 0
                written += UInt64(end - start)
            }
            cond.broadcast()  // a warning's caller may be waiting for these lines
            start = end
        }
        // The batch's room is given back once it is written, so the queue and the batch in
        // hand together stay within the bound.
        return cond.withLock { () -> Bool in
            queuedBytes -= size
            return queueDroppedNotice()
        }
    }

    /// Queues the warning that says how many lines were dropped, if any were, once a write went
    /// through; call inside `cond.withLock`. One line for a whole spell, whatever squeezed in
    /// meanwhile (a short line may fit where a long one did not); it may take the queue a few
    /// bytes past the bound.
    private func queueDroppedNotice() -> Bool {
        let total = dropped.reduce(0, +)
        guard total > 0 else { return false }
        var fields = [("dropped", String(total))]
        for level in [Log.Level.debug, .info, .warning, .error] where dropped[level.rawValue] > 0 {
            fields.append(("dropped." + level.name, String(dropped[level.rawValue])))
        }
        let notice = LogEntry(micros: wallClockMicros(), level: .warning, json: droppedJSON,
                              body: .event("log lines dropped: stderr was not read and the log queue was full", fields))
        pending.append(notice)
        queuedBytes += notice.queuedSize
        appended += 1
        dropped = [0, 0, 0, 0]
        return true
    }

    /// Waits until the entry numbered `sequence` is written, `urgentWaitNanos` at most, and not at
    /// all while a write has been under way for `stuckNanos` (stderr not read): the line is then
    /// written when stderr takes it, and the caller (perhaps a thread serving requests) goes on.
    private func waitUntilWritten(_ sequence: UInt64) {
        let deadline = monotonicNanos() + Self.urgentWaitNanos
        cond.withLock {
            while written < sequence {
                let now = monotonicNanos()
                if now >= deadline { return }
                if writeStartedAt != 0 && now &- writeStartedAt >= Self.stuckNanos { return }
                _ = cond.wait(untilMonotonicNanos: min(deadline, now + Self.stuckNanos))
            }
        }
    }

    private func run() {
        while true {
            cond.withLock {
                while pending.isEmpty { cond.wait() }
                // Gather the events of the next few milliseconds into one write, unless a warning
                // waits.
                let until = monotonicNanos() + 5_000_000
                while !urgent && monotonicNanos() < until { _ = cond.wait(untilMonotonicNanos: until) }
            }
            writing.withLock { _ = writeBatch() }
        }
    }
}
