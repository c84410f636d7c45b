import FCMCore
public import FCMModel
public import FCMStore
import Platform
import Synchronization

/// Sends counted as they are decided (`GET /api/v1/stats`): one step per send under the state
/// lock, plus what the store held at start, counted from it in the background right after start
/// (a pass over every message, which start-up does not wait for: `Engine.countStoredSends`), so
/// the numbers agree with the store after a restart and a reset clears them with everything else.
struct SendStats: Sendable, Equatable {
    /// The sends decided since start (or the last reset).
    var counts = SendCounts()
    /// The store's sends from before start, the rows with ids up to `floor`; nil until counted.
    var before: SendCounts?
    var floor: Int64 = 0
    /// Sends and errors per second over the last hour (the chart's history).
    var seconds = SecondRing()

    /// Counting from an empty store, or one whose ids go up to `floor` (counted after start).
    init(floor: Int64 = 0) {
        self.floor = floor
        before = floor == 0 ? SendCounts() : nil
    }

    /// Everything counted.
    var total: SendCounts {
        guard let before else { return counts }
        var sum = before
        sum.accepted += counts.accepted
        sum.rejected += counts.rejected
        for (code, n) in counts.errors { sum.errors[code, default: 0] += n }
        return sum
    }

    /// A send the send path decided: its record, and its recipients' rows.
    mutating func count(_ message: MessageRow, rows: [DeliveryRow]) {
        var failed: Int64 = 0
        for r in rows {
            if let e = r.error { counts.errors[e, default: 0] += 1; failed += 1 }
        }
        count(status: message.status, error: message.recipients == 0 ? message.error : nil, at: message.acceptedAt, failed: failed)
    }

    /// A record's status, and the error of a record refused before it had a recipient; `at`: its
    /// acceptance time (mock clock, milliseconds), for the per-second history.
    /// `failed`: its recipients that failed (counted by the caller).
    mutating func count(status: String, error: String?, at: Int64, failed: Int64 = 0) {
        switch status {
        case "accepted": counts.accepted += 1
        case "rejected": counts.rejected += 1
        default: break
        }
        if let error { counts.errors[error, default: 0] += 1 }
        seconds.add(second: at / 1000, sends: 1, errors: failed + (error == nil ? 0 : 1))
    }
}

/// Sends and errors per second of the mock clock over the last hour: a ring of 3,600 slots, each
/// knowing which second it holds, so a series costs the same at 1 M stored messages as at none.
struct SecondRing: Sendable, Equatable {
    static let span = 3600
    private var second = [Int64](repeating: .min, count: span)
    private var sends = [Int64](repeating: 0, count: span)
    private var errors = [Int64](repeating: 0, count: span)
    /// The latest second anything was added for.
    private(set) var newest: Int64 = .min

    private static func slot(_ s: Int64) -> Int { Int(((s % Int64(span)) + Int64(span)) % Int64(span)) }

    mutating func add(second s: Int64, sends n: Int64, errors e: Int64) {
        // Older than the hour before the newest second: outside any window a series shows.
        guard newest == .min || s > newest - Int64(Self.span) else { return }
        let i = Self.slot(s)
        if second[i] != s { second[i] = s; sends[i] = 0; errors[i] = 0 }
        sends[i] += n
        errors[i] += e
        newest = max(newest, s)
    }

    /// The store's count from before start, added in.
    mutating func add(_ counted: [Int64: SecondCount]) {
        for (s, c) in counted.sorted(by: { $0.key < $1.key }) { add(second: s, sends: c.sends, errors: c.errors) }
    }

    /// Sends and errors in `count` buckets of `bucket` seconds, the last one ending with second `now`.
    func series(now: Int64, bucket: Int, count: Int) -> (sends: [Int64], errors: [Int64]) {
        var outSends = [Int64](repeating: 0, count: count)
        var outErrors = [Int64](repeating: 0, count: count)
        let first = now - Int64(bucket * count) + 1
        for k in 0..<(bucket * count) {
            let s = first + Int64(k)
            let i = Self.slot(s)
            guard second[i] == s else { continue }
            outSends[k / bucket] += sends[i]
            outErrors[k / bucket] += errors[i]
        }
        return (outSends, outErrors)
    }
}

/// Who is counting the store's sends from before start, so that one thread counts and the others
/// wait for it: the thread started with the listeners (`startCountingStoredSends`), or a
/// `GET /api/v1/stats` that finds nobody counting (one that came first, or after a failed write's
/// recovery moved the floor).
///
/// `running` is read and written only while `lock` is held (it is atomic to be Sendable, not to
/// be read without the lock); the state lock may be taken inside `lock`, never the other way.
final class StoredSendCount: Sendable {
    let lock = ConditionLock()
    let running = Atomic<Bool>(false)
}

extension Engine {
    /// The counters, read from memory: constant work in the number of messages stored. Until the
    /// count of what the store held at start is done (a fraction of a second after start), a call
    /// waits for it.
    public func stats() throws(StoreError) -> StatsSnapshot {
        while true {
            try countStoredSends()
            // A failed write's recovery may have asked for a new count since: wait for that too.
            if let snapshot = state.withLock({ s -> StatsSnapshot? in
                guard s.stats.before != nil else { return nil }
                return StatsSnapshot(counts: s.stats.total, pending: s.stored.values.reduce(0) { $0 + $1.count }, devices: s.devices.count)
            }) {
                return snapshot
            }
        }
    }

    /// How far back `sendSeries` reaches, in seconds.
    public static var seriesSeconds: Int { SecondRing.span }

    /// Sends and errors in `count` buckets of `bucket` seconds up to now (mock clock), from the
    /// last hour's per-second counts in memory (with the store's from before start): constant
    /// work in the number of messages stored. Returns the first bucket's start too (ms).
    public func sendSeries(bucket: Int, count: Int) throws(StoreError) -> (start: Int64, sends: [Int64], errors: [Int64]) {
        try countStoredSends()
        let now = clock.nowMillis()
        let series = state.withLock { $0.stats.seconds.series(now: now / 1000, bucket: bucket, count: count) }
        return ((now / 1000 - Int64(bucket * count) + 1) * 1000, series.sends, series.errors)
    }

    /// Whether the store's sends from before start are counted (`stats()` answers at once).
    public var storedSendsCounted: Bool { state.withLock { $0.stats.before != nil } }

    /// Counts the store's sends from before start on a thread of its own (when there are any), so
    /// that the page's first `GET /api/v1/stats` finds them counted; called once the listeners
    /// are up. Sends do not wait for it (the store reads on a connection of its own). A failure
    /// is left to the next call of `stats()`, which counts again and throws if it fails too.
    public func startCountingStoredSends() {
        guard state.withLock({ $0.stats.before == nil }) else { return }
        spawnThread { [self] in try? countStoredSends() }
    }

    /// Returns once the store's sends from before start are counted (at once, but for the first
    /// moments after a start): counts them if nobody is, else waits for whoever is.
    func countStoredSends() throws(StoreError) {
        if state.withLock({ $0.stats.before != nil }) { return }
        let count = storedSendCount
        while true {
            let job: Int64? = count.lock.withLock {
                while true {
                    guard let floor = state.withLock({ $0.stats.before == nil ? $0.stats.floor : nil }) else { return nil }
                    if !count.running.load(ordering: .relaxed) {
                        count.running.store(true, ordering: .relaxed)
                        return floor
                    }
                    count.lock.wait()
                }
            }
            guard let floor = job else { return }
            let counted: Result<SendCounts, StoreError>
            do {
                counted = .success(try store.sendCounts(upTo: floor,
                                                        secondsSince: clock.nowMillis() - Int64(SecondRing.span) * 1000))
            } catch {
                counted = .failure(error)
            }
            // A reset in the meantime has set `before` (to nothing) already: it wins. A failed
            // write in the meantime moved the floor (Engine+Recovery.swift): the loop counts again.
            if case .success(let before) = counted {
                state.withLock { s in
                    if s.stats.before == nil && s.stats.floor == floor {
                        s.stats.before = before
                        s.stats.seconds.add(before.seconds)
                    }
                }
            }
            count.lock.withLock {
                count.running.store(false, ordering: .relaxed)
                count.lock.broadcast()
            }
            if case .failure(let error) = counted { throw error }
        }
    }
}
