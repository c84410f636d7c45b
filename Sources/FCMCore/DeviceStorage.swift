/// A message a device holds while offline (one pending delivery row).
public struct StoredEntry: Sendable, Equatable {
    public var deliveryID: Int64
    public var collapseKey: String?
    public var expiresAt: Int64
    /// A `deleted_messages` notice: never counted against the limits, never dropped.
    public var isNotice = false
    /// A notice's `total_deleted` (what every purge since the device went away discarded).
    public var noticeTotal: Int32 = 0
    /// Held by the rules of the protocol it was sent through, not FCM's (APNs's: the APNs room's
    /// `APNsStorage`): outside FCM's limits.
    public var ownRules = false
    /// What it was sent through, as the engine numbers the ways in (a tag these rules do not read;
    /// a protocol's own rules and a sender's take-back compare it).
    public var source: UInt8 = 0

    public init(deliveryID: Int64, collapseKey: String?, expiresAt: Int64, isNotice: Bool = false, noticeTotal: Int32 = 0,
                ownRules: Bool = false, source: UInt8 = 0) {
        self.deliveryID = deliveryID
        self.collapseKey = collapseKey
        self.expiresAt = expiresAt
        self.isNotice = isNotice
        self.noticeTotal = noticeTotal
        self.ownRules = ownRules
        self.source = source
    }

    /// Held by FCM's rules: neither a notice nor held by its protocol's own.
    var isFCM: Bool { !isNotice && !ownRules }
}

/// A change of a stored delivery's status that the store must apply, and the event it makes.
public struct StatusChange: Sendable, Equatable {
    public var deliveryID: Int64
    /// `collapsed`, `dropped`, `expired`, `replaced` (APNs).
    public var status: String

    public init(deliveryID: Int64, status: String) {
        self.deliveryID = deliveryID
        self.status = status
    }
}

/// FCM's storage rules for an offline device (docs/spec/fcm-legacy.md section 6), on the entries it holds
/// (entries held beside them by their protocol's own rules, APNs notifications by the APNs
/// room's `APNsStorage`, count against none of these limits).
/// Pure: the engine applies the returned changes to the store.
public enum DeviceStorage {
    /// What holding a new entry did: the status changes of entries already held, whether the new
    /// one was dropped, and how many were purged for a `deleted_messages` notice.
    public typealias Held = (changes: [StatusChange], newDropped: Bool, purged: Int)

    /// Distinct collapse keys a device keeps at once.
    public static let maxCollapseKeys = 4
    /// Non-collapsible messages a device keeps; one more and it discards everything it holds.
    public static let maxNonCollapsible = 100

    /// Entries whose TTL has run out by `now` leave storage as `expired`.
    public static func expire(_ entries: inout [StoredEntry], now: Int64) -> [StatusChange] {
        var changes: [StatusChange] = []
        entries.removeAll { e in
            guard e.expiresAt <= now else { return false }
            changes.append(StatusChange(deliveryID: e.deliveryID, status: "expired"))
            return true
        }
        return changes
    }

    /// What storing `new` does. Returns the status changes of entries already held, whether the
    /// new message itself was dropped, and how many messages a purge discarded (0 when none; the
    /// caller then adds a `deleted_messages` notice).
    ///
    /// - A newer message with a held collapse key replaces the held one (`collapsed`).
    /// - A fifth distinct collapse key evicts the key stored longest ago (`dropped`). FCM does not
    ///   say which key it drops; the oldest goes because the newest messages are the ones an app
    ///   most likely still wants, and it is the rule a test can predict.
    /// - A real client's device can hold more than these rules leave (pushes that waited for room
    ///   on its connection, or were written and unacknowledged when it ended, are held again
    ///   whole): several of one key are all replaced, and keys are evicted whole, oldest first,
    ///   until the new one makes four.
    /// - A 101st non-collapsible message makes the device discard everything it holds, the new
    ///   message included (`dropped`), as FCM documented.
    public static func store(_ new: StoredEntry, in entries: inout [StoredEntry], now: Int64) -> Held {
        var changes = expire(&entries, now: now)
        if let key = new.collapseKey {
            if remove(key, from: &entries, as: "collapsed", into: &changes) == 0 {
                // The keys held, oldest first.
                var keys: [String] = []
                for e in entries where e.isFCM { if let k = e.collapseKey, !keys.contains(k) { keys.append(k) } }
                while keys.count >= maxCollapseKeys { remove(keys.removeFirst(), from: &entries, as: "dropped", into: &changes) }
            }
            entries.append(new)
            return (changes, false, 0)
        }
        entries.append(new)
        let plain = entries.count(where: { $0.isFCM && $0.collapseKey == nil })
        guard plain > maxNonCollapsible else { return (changes, false, 0) }
        var purged = 0
        entries.removeAll { e in
            guard e.isFCM else { return false }
            purged += 1
            if e.deliveryID != new.deliveryID {
                changes.append(StatusChange(deliveryID: e.deliveryID, status: "dropped"))
            }
            return true
        }
        return (changes, true, purged)
    }

    /// Takes every FCM-held entry of collapse key `key` out, each with `status`; how many.
    @discardableResult
    private static func remove(_ key: String, from entries: inout [StoredEntry], as status: String, into changes: inout [StatusChange]) -> Int {
        var n = 0
        entries.removeAll { e in
            guard e.isFCM, e.collapseKey == key else { return false }
            changes.append(StatusChange(deliveryID: e.deliveryID, status: status))
            n += 1
            return true
        }
        return n
    }

    /// How many messages the device holds (what `pending` shows).
    public static func count(_ entries: [StoredEntry], now: Int64) -> Int {
        entries.count(where: { $0.expiresAt > now })
    }
}
