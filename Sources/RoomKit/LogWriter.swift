import Platform

/// Queues log events and writes them to stderr in batches from one thread, so a busy server (one
/// access-log line per request and per stanza) pays an array append per line on its own threads
/// instead of formatting and a write system call. Lines reach stderr within about 5 ms; warnings
/// and errors wake the writer at once and their caller waits (briefly) until they are written, and
/// `Log.flush()` has the queue written before exit (3 s at most).
///
/// Stderr may stop being read (a pipe nobody drains): the writer then blocks in write(2), and
/// what waits behind it is bounded (`queueLimit`). Lines past the bound are dropped and counted,
/// and once a write goes through again one warning line says how many. No logging thread ever
/// writes itself or waits on a blocked writer, so serving goes on whatever stderr does.
///
/// `@unchecked Sendable`: `pending`, `queuedBytes`, `dropped`, `droppedJSON`, `started`,
/// `urgent`, `appended`, `written` and `writeStartedAt` are only touched inside `cond.withLock`;
/// only the writer thread (`run`) writes, so lines go out in order, and only it uses
/// `timestamp`; `sink` and `limit` are immutable.
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
    /// Only used by the writer thread.
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

    /// Has the writer thread write every queued line now (a dropped-lines notice it queues
    /// included), and waits until it has, `seconds` at most: before exit, when stderr may be a
    /// pipe nobody reads, the rest is then lost rather than waited for for ever.
    func flush(within seconds: Double) {
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        cond.withLock { urgent = true }
        cond.broadcast()
        cond.withLock {
            while written < appended && monotonicNanos() < deadline { _ = cond.wait(untilMonotonicNanos: deadline) }
        }
    }

    /// The number of lines dropped and not yet told, by level (for tests).
    var droppedCounts: [Int] { cond.withLock { dropped } }

    /// Writes what is queued, then queues the dropped-lines notice if lines were dropped
    /// meanwhile. On the writer thread only.
    private func writeBatch() {
        let batch = cond.withLock { () -> [LogEntry] in
            urgent = false
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        guard !batch.isEmpty else { return }
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
        cond.withLock {
            queuedBytes -= size
            queueDroppedNotice()
        }
    }

    /// Queues the warning that says how many lines were dropped, if any were, once a write went
    /// through; call inside `cond.withLock`. One line for a whole spell, whatever squeezed in
    /// meanwhile (a short line may fit where a long one did not); it may take the queue a few
    /// bytes past the bound.
    private func queueDroppedNotice() {
        let total = dropped.reduce(0, +)
        guard total > 0 else { return }
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
            writeBatch()
        }
    }
}
