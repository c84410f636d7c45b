import HTTPServer
import Platform

/// Keeps the pushes to one device in the order they came in while their bodies are decrypted on
/// several threads at once: each push takes a place in its device's line when it arrives (on the
/// HTTP thread, after its checks), and its `submit` runs only once every push before it in the
/// line has run its own. Topic replacement, collapse and the message ids (taken at submit)
/// depend on that order.
///
/// Whichever thread finishes the push at the head of a line runs it, then any that finished
/// behind it meanwhile, in order: no push waits for a thread switch to be submitted. A line
/// with nothing in it is forgotten.
///
/// `@unchecked Sendable`: `lines` is reached only through its `Locked`.
final class WebPushPushOrder: @unchecked Sendable {
    private struct Line {
        /// The place the next push to arrive takes.
        var next: UInt64 = 0
        /// The place whose turn it is.
        var turn: UInt64 = 0
        /// Pushes finished before their turn, by place.
        var parked: [UInt64: @Sendable () -> Void] = [:]
        /// A thread is running the pushes whose turn came.
        var running = false
    }

    private let lines = Locked<[String: Line]>([:])

    /// A place in the line of `key` (on the thread the push came in on, in arrival order).
    func take(_ key: String) -> UInt64 {
        lines.withLock { l in
            var line = l[key] ?? Line()
            defer { l[key] = line }
            line.next += 1
            return line.next - 1
        }
    }

    /// Whether pushes to `key` are waiting their turn or under way: a push that would be
    /// submitted at once (no body to decrypt) must then take a place behind them.
    func isBusy(_ key: String) -> Bool {
        lines.withLock { $0[key] != nil }
    }

    /// Place `place` of `key` is ready: `submit` runs now, on this thread, if its turn has come
    /// (and after it the pushes parked behind it), else when the push before it has run.
    func finish(_ key: String, _ place: UInt64, _ submit: @escaping @Sendable () -> Void) {
        var job: (@Sendable () -> Void)? = lines.withLock { l in
            guard var line = l[key] else { return submit }  // not taken: nothing to wait for
            defer { l[key] = line }
            if place != line.turn || line.running {
                line.parked[place] = submit
                return nil
            }
            line.running = true
            return submit
        }
        while let run = job {
            run()
            job = lines.withLock { l -> (@Sendable () -> Void)? in
                guard var line = l[key] else { return nil }
                line.turn += 1
                if let following = line.parked.removeValue(forKey: line.turn) {
                    l[key] = line
                    return following
                }
                line.running = false
                // Nothing more came in: forget the line (a new push starts a new one at 0).
                if line.turn == line.next { l[key] = nil } else { l[key] = line }
                return nil
            }
        }
    }
}

/// Which pushes the room decrypts on its pool rather than on the thread they came in on.
struct WebPushHandOff: Sendable, Equatable {
    /// Also pushes over HTTP/1.1.
    var all: Bool

    /// `FCM_MOCK_WEBPUSH_HANDOFF`: `all`, else (unset or anything else) HTTP/2's only.
    init(environment value: String?) {
        all = value == "all"
    }

    /// Whether `r`'s body goes to the pool.
    func takes(_ r: HTTPRequest) -> Bool { all || r.isHTTP2 }
}
