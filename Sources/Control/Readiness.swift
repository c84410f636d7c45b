import RoomKit
import Synchronization

/// Whether the server is ready for traffic: set once every listener is up (`Application.start`),
/// read by `GET /readyz`. The store's own health is read where it is kept (`engine.storeFailure`).
public final class Readiness: Sendable {
    private let listenersUp: Atomic<Bool>

    /// Not ready until `markListenersUp()`; `ready: true` for an application that has no
    /// listeners of its own to wait for.
    public init(ready: Bool = false) {
        listenersUp = Atomic(ready)
    }

    /// Every listener accepts connections.
    public func markListenersUp() {
        listenersUp.store(true, ordering: .releasing)
    }

    /// Whether every listener accepts connections.
    public var areListenersUp: Bool { listenersUp.load(ordering: .acquiring) }
}
