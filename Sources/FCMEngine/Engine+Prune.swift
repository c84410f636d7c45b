public import FCMModel
import FCMCore
import FCMStore
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps the store within its limits, on its own thread, in small batches through the store's
/// writer queue (each batch is one write among the sends, a few milliseconds at most), so sends
/// never wait for more than one batch:
///
/// - every pass counts the records added since the last (`Store.refreshHistory`), which is what
///   `GET /api/v1/health` reports;
/// - it empties the tables a reset set aside (`Store.emptyLeftovers`);
/// - past `--max-messages` or `--max-age` it deletes the oldest records with their deliveries,
///   skipping (and remembering) those a device still holds, until their TTL passes or the
///   device takes them;
/// - and it forgets acked or nacked upstream messages past the same limits.
///
/// `progress` is touched by the task's thread only; it sits in a lock because the class is shared.
public final class Pruner: Sendable {
    /// Milliseconds between passes: also how stale health's count may be.
    static let passMillis = 100
    /// Most time one pass spends deleting before it lets the next pass come (and `stop` in).
    static let passBudgetNanos: UInt64 = 250_000_000
    /// One batch: at most this many records, and as many as fit within `batchRows` deliveries
    /// (about a millisecond of the writer each: a record costs 1-2 µs to delete, a delivery ~1).
    static let batchMessages = 500
    static let batchRows = 1000
    /// Rows of a set-aside table deleted per batch.
    static let leftoverRows = 1000

    /// Passes between two returns of freed heap pages to the system (`trimHeap`).
    static let trimEveryPasses = 100

    let engine: Engine
    let limits: StorageLimits
    private let progress = Locked(Progress())
    private let passes = Locked(0)
    private let task = Locked<PeriodicTask?>(nil)

    /// Where the scan of the oldest records stands: every stamp below `boundary` has been decided
    /// (deleted, or kept in `kept` because a device held it then).
    struct Progress {
        var boundary: Int64 = 0
        var kept: [MessageSpan] = []
    }

    public init(engine: Engine, limits: StorageLimits) {
        self.engine = engine
        self.limits = limits
    }

    public func start() {
        task.withLock { t in
            guard t == nil else { return }
            t = PeriodicTask(everyMillis: Self.passMillis) { [weak self] in self?.pass() }
        }
    }

    /// Ends the thread after the pass under way.
    public func stop() {
        task.withLock { t in defer { t = nil }; return t }?.stop()
    }

    /// One pass; a store that fails is tried again on the next (the store's health says why).
    func pass() {
        trimHeap()
        let deadline = monotonicNanos() + Self.passBudgetNanos
        do {
            try engine.store.refreshHistory()
            while monotonicNanos() < deadline, try paced({ () throws(StoreError) in try engine.store.emptyLeftovers(rows: Self.leftoverRows) }) {}
            if !limits.isUnlimited {
                try pruneMessages(until: deadline)
                try pruneUpstream()
            }
        } catch {
            return
        }
    }

    /// Every `trimEveryPasses` passes (10 s), gives the heap's free pages back to the system.
    /// What a thread frees (a burst of event-stream buffers, the state a reset dropped) stays
    /// resident in its malloc arena until reused; see design.md, "Memory".
    private func trimHeap() {
        let due = passes.withLock { n in
            n += 1
            return n % Self.trimEveryPasses == 0
        }
        if due { SystemIO.releaseFreedMemory() }
    }

    /// Runs one batch, then rests three times as long as it took: the pruner takes at most a
    /// quarter of the writer's time, and the pages it frees reach the log at a pace the
    /// checkpointer keeps up with (emptying a reset's 190,000 records back to back made sends'
    /// commits wait up to 90 ms for the disk; paced, about as often as they do without it).
    /// `behind`: records over the limit. Past one batch of them the rest shrinks in proportion
    /// (to half a millisecond at least), so the pruner keeps up with sends however fast they
    /// come: at 35,000 sends a second, a quarter of the writer's time pruned about 14,000 a
    /// second and the store grew to six times its limit over a million sends.
    private func paced<T>(behind: Int = 0, _ batch: () throws(StoreError) -> T) throws(StoreError) -> T {
        let start = monotonicNanos()
        let result = try batch()
        let took = monotonicNanos() - start
        var rest = 3 * took
        if behind > Self.batchMessages { rest = rest * UInt64(Self.batchMessages) / UInt64(behind) }
        usleep(useconds_t(min(max(rest / 1000, 500), 50_000)))
        return result
    }

    /// With `--max-age`: what is accepted before this (mock clock, milliseconds) is too old.
    private func ageCutoff() -> Int64? {
        limits.maxAgeSeconds.map { engine.clock.nowMillis() - $0 * 1000 }
    }

    /// Deletes the oldest records past the limits, the ones kept earlier first.
    private func pruneMessages(until deadline: UInt64) throws(StoreError) {
        let store = engine.store
        var excess = limits.maxMessages.map { max(0, Int(store.messageCount) - $0) } ?? 0
        let cutoff = ageCutoff()
        func old(_ s: MessageSpan) -> Bool { cutoff.map { s.acceptedAt < $0 } ?? false }
        var p = progress.withLock { $0 }
        defer { progress.withLock { $0 = p } }
        var forgotten: [(device: Int64, id: Int64)] = []
        defer { engine.forgetPrunedDeliveries(forgotten) }

        // Records kept because a device held them: the oldest, so they go first once free.
        if !p.kept.isEmpty && (excess > 0 || p.kept.contains(where: old)) {
            var free: [Range<Int64>] = []
            var still: [MessageSpan] = []
            // Asked a batch at a time: each question holds the connection.
            for start in stride(from: 0, to: p.kept.count, by: Self.batchMessages) {
                let chunk = Array(p.kept[start..<min(start + Self.batchMessages, p.kept.count)])
                for (s, held) in zip(chunk, try store.stillHeld(chunk)) {
                    guard let held else { continue }  // gone already (a reset)
                    if !held && (excess > 0 || old(s)) {
                        free.append(s.id..<s.end)
                        excess = max(0, excess - 1)
                    } else {
                        still.append(s)
                    }
                }
            }
            for start in stride(from: 0, to: free.count, by: Self.batchMessages) {
                let runs = Array(free[start..<min(start + Self.batchMessages, free.count)])
                forgotten += try paced(behind: excess) { () throws(StoreError) in try store.deleteHistory(runs) }
            }
            p.kept = still
        }

        // Then onwards from the boundary, oldest first, until within the limits.
        while excess > 0 || cutoff != nil, monotonicNanos() < deadline {
            let spans = try store.oldestMessages(from: p.boundary, limit: Self.batchMessages, maxRows: Self.batchRows)
            if spans.isEmpty { return }
            var runs: [Range<Int64>] = []
            var held: [MessageSpan] = []
            var runStart = p.boundary
            var reached = false
            for s in spans {
                if s.held {
                    held.append(s)
                } else if excess > 0 || old(s) {
                    excess = max(0, excess - 1)
                    // A run starts where the last decided record ended: deliveries left between
                    // records belong to none, and go with it.
                    if let last = runs.last, last.upperBound == runStart {
                        runs[runs.count - 1] = last.lowerBound..<s.end
                    } else {
                        runs.append(runStart..<s.end)
                    }
                } else {
                    reached = true
                    break
                }
                runStart = s.end
            }
            if !runs.isEmpty {
                let batch = runs
                forgotten += try paced(behind: excess) { () throws(StoreError) in try store.deleteHistory(batch) }
            }
            p.kept += held
            p.boundary = runStart
            if reached { return }
        }
    }

    /// Forgets acked and nacked upstream messages past the limits, oldest first (queued and sent
    /// ones wait for a connection to take them and are kept).
    private func pruneUpstream() throws(StoreError) {
        let cutoff = ageCutoff()
        let ticket: Store.Ticket? = engine.state.withLock { s in
            var excess = limits.maxMessages.map { s.upstream.count - $0 } ?? 0
            let oldest = s.upstreamOrder.first.flatMap { s.upstream[$0]?.createdAt }
            let aged = cutoff.flatMap { c in oldest.map { $0 < c } } ?? false
            guard excess > 0 || aged else { return nil }
            var gone: Set<String> = []
            for id in s.upstreamOrder {
                guard let u = s.upstream[id], u.status == "acked" || u.status == "nacked" else { continue }
                if excess > 0 || cutoff.map({ u.createdAt < $0 }) == true {
                    gone.insert(id)
                    excess -= 1
                }
            }
            guard !gone.isEmpty else { return nil }
            for id in gone { s.upstream[id] = nil }
            s.upstreamOrder.removeAll { gone.contains($0) }
            return engine.submit([Writes.deleteUpstream(Array(gone))])
        }
        if let ticket { try engine.store.wait(for: ticket) }
    }
}

extension Engine {
    /// Takes pruned deliveries out of the in-memory inbox index (each device's ascending delivery
    /// ids). Pruned ids left there would cost memory, never a wrong answer (an inbox skips ids
    /// whose row is gone).
    func forgetPrunedDeliveries(_ gone: [(device: Int64, id: Int64)]) {
        guard !gone.isEmpty else { return }
        var byDevice: [Int64: [Int64]] = [:]
        for g in gone { byDevice[g.device, default: []].append(g.id) }
        state.withLock { s in
            for (device, var ids) in byDevice {
                guard var entry = s.inbox.removeValue(forKey: device) else { continue }
                ids.sort()
                entry.forget(ids)
                if !entry.recent.isEmpty || entry.chunkedThrough > 0 { s.inbox[device] = entry }
            }
        }
    }
}
