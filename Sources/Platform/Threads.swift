#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starts a detached thread running `body` (a plain pthread: the server has no other use for
/// Foundation's Thread, and not linking Foundation saves several megabytes of resident memory).
public func spawnThread(_ body: @escaping @Sendable () -> Void) {
    let rc = startThread(body)
    if rc != 0 { fatalError("pthread_create failed: \(rc)") }
}

/// Starts a detached thread running `body`, or returns false when the system gives no more
/// threads (a process or address-space limit): for a thread per connection, whose connection is
/// then refused instead of the process stopping.
public func trySpawnThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    startThread(body) == 0
}

/// `pthread_create`'s result; `body` runs only when it is 0.
private func startThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let arg = Unmanaged.passRetained(Box(body)).toOpaque()
    var tid = pthread_t()
    let rc = pthread_create(&tid, nil, { raw in
        guard let raw else { return nil }
        let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
        box.body()
        return nil
    }, arg)
    if rc == 0 {
        pthread_detach(tid)
    } else {
        Unmanaged<Box>.fromOpaque(arg).release()
    }
    return rc
}

/// Runs `body` every `everyMillis` on its own thread until `stop()`.
///
/// `@unchecked Sendable`: `stopped` and `finished` are reached only under `lock`; `body` is
/// immutable.
public final class PeriodicTask: @unchecked Sendable {
    private let lock = ConditionLock()
    private var stopped = false
    private var finished = false
    private var worker: pthread_t?

    public init(everyMillis: Int, _ body: @escaping @Sendable () -> Void) {
        spawnThread { [self] in
            lock.withLock { worker = pthread_self() }
            while true {
                let stop = lock.withLock { () -> Bool in
                    if !stopped { _ = lock.wait(untilMonotonicNanos: monotonicNanos() + UInt64(everyMillis) * 1_000_000) }
                    return stopped
                }
                if stop { break }
                body()
            }
            lock.withLock { finished = true }
            lock.broadcast()
        }
    }

    /// Ends the thread and waits for it (a run under way finishes first). Calling it again
    /// returns at once; called from `body` itself, it ends the thread after this run without
    /// waiting (it could not wait for itself).
    public func stop() {
        lock.withLock {
            stopped = true
            lock.broadcast()
            if let w = worker, pthread_equal(w, pthread_self()) != 0 { return }
            while !finished { lock.wait() }
        }
    }
}
