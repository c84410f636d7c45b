/// Up to `threads` threads of its own taking jobs from one queue, first in first out: for CPU
/// work a caller hands off so that its own thread stays free (Web Push decryption, off the HTTP
/// threads).
///
/// Threads start with the first jobs that find none idle and end after `idleMillis` with no
/// job, so a pool nobody uses (a server stopped, a test's) holds no thread for long and needs
/// no stop from its owner. `stop()` ends them once the jobs queued are done; a job handed over
/// after it runs on the caller's thread, so no job is ever dropped.
///
/// `@unchecked Sendable`: `jobs`, `started`, `idle` and `stopped` are reached only under `lock`.
public final class WorkerPool: @unchecked Sendable {
    private let lock = ConditionLock()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var started = 0
    private var idle = 0
    private var stopped = false
    public let threads: Int
    private let idleNanos: UInt64

    public init(threads: Int, idleMillis: Int = 2000) {
        self.threads = max(1, threads)
        idleNanos = UInt64(max(1, idleMillis)) * 1_000_000
    }

    /// Queues `job` for the next free thread (from any thread).
    public func run(_ job: @escaping @Sendable () -> Void) {
        enum Then { case queued, spawn, runHere }
        let then = lock.withLock { () -> Then in
            if stopped { return .runHere }
            jobs.append(job)
            if idle > 0 {
                lock.broadcast()
                return .queued
            }
            guard started < threads else { return .queued }
            started += 1
            return .spawn
        }
        switch then {
        case .queued: break
        case .spawn:
            guard !trySpawnThread({ [self] in work() }) else { return }
            // No thread to be had (a process or address-space limit): a running one takes the
            // job; with none running, what is queued runs here rather than never.
            let orphans = lock.withLock { () -> [@Sendable () -> Void] in
                started -= 1
                guard started == 0 else { return [] }
                defer {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                }
                return Array(jobs[head...])
            }
            for j in orphans { j() }
        case .runHere: job()
        }
    }

    /// Lets the threads end once the jobs queued are done; later jobs run on their callers.
    public func stop() {
        lock.withLock {
            stopped = true
            lock.broadcast()
        }
    }

    /// The threads running now (started and not yet ended).
    public var runningThreads: Int { lock.withLock { started } }

    private func work() {
        while true {
            let job = lock.withLock { () -> (@Sendable () -> Void)? in
                var deadline: UInt64?
                while head == jobs.count && !stopped {
                    let d = deadline ?? monotonicNanos() + idleNanos
                    deadline = d
                    idle += 1
                    let woken = lock.wait(untilMonotonicNanos: d)
                    idle -= 1
                    if !woken && head == jobs.count { break }
                }
                guard head < jobs.count else {
                    started -= 1
                    return nil
                }
                let j = jobs[head]
                head += 1
                // Taken jobs are dropped in bulk: no shifting of the array per job.
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 1024 && head * 2 >= jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                return j
            }
            guard let job else { return }
            job()
        }
    }
}
