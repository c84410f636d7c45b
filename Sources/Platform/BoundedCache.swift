/// A table that remembers what was costly to work out (a verified signature, a key parsed from
/// its bytes), bounded: when it holds `capacity` entries, the next insert empties it first. The
/// one cache every room uses (verified OAuth assertions, APNs provider tokens, VAPID tokens,
/// client certificates, subscriptions' private keys): a client reuses one credential for as long
/// as it lives, so a full table only means a client that makes a new one per request, which
/// then only refills it; an emptied table costs each live credential one check again. No entry
/// is ever evicted but by a full table: what can go stale (a revoked key, an expired token) is
/// judged again by the caller on every use.
///
/// Its own lock: reading it never waits for the engine's state.
public final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    public let capacity: Int
    private let table: Locked<[Key: Value]>

    public init(capacity: Int) {
        precondition(capacity > 0, "a cache holds at least one entry")
        self.capacity = capacity
        table = Locked([:])
    }

    /// The value remembered under `key`.
    public subscript(_ key: Key) -> Value? {
        table.withLock { $0[key] }
    }

    /// Remembers `value` under `key`, emptying a full table first.
    public func insert(_ value: Value, for key: Key) {
        table.withLock { t in
            if t[key] == nil, t.count >= capacity { t.removeAll(keepingCapacity: true) }
            t[key] = value
        }
    }

    /// The value under `key`, made by `make` (outside the lock) and remembered when there was
    /// none; nil, and nothing remembered, when `make` gives nil.
    public func value(for key: Key, orMake make: () -> Value?) -> Value? {
        if let known = self[key] { return known }
        guard let made = make() else { return nil }
        insert(made, for: key)
        return made
    }

    /// How many entries it holds.
    public var count: Int { table.withLock { $0.count } }
}
