public import FCMCore

/// A protocol's rules for the messages sent through it: what an offline device holds of them,
/// and whether the one a phone shows under a collapse id gives way to the next. FCM's
/// (`HoldingRules.fcm`, FCMCore's `DeviceStorage`) are every protocol's but those whose room
/// hands the engine its own at start (`RoomHooks.holding`): APNs's, Apple's store-and-forward
/// (the APNs room's `APNsStorage`). The engine keeps the entries and the screen (`Screen`),
/// marks each entry with where it came from (`StoredEntry.source`, `ownRules`) and applies the
/// changes.
public struct HoldingRules: Sendable {
    /// What holding `new` for an offline device does to the entries it holds, and to `new`.
    package var hold: @Sendable (_ new: StoredEntry, _ entries: inout [StoredEntry], _ now: Int64) -> DeviceStorage.Held
    /// A delivery shown under a collapse id replaces the one the phone showed under it, which
    /// becomes `replaced`.
    package var replacesOnScreen: Bool

    public init(hold: @escaping @Sendable (_ new: StoredEntry, _ entries: inout [StoredEntry], _ now: Int64) -> DeviceStorage.Held,
                replacesOnScreen: Bool) {
        self.hold = hold
        self.replacesOnScreen = replacesOnScreen
    }

    /// FCM's storage rules (docs/spec/fcm-legacy.md section 6); the screen keeps everything.
    package static let fcm = HoldingRules(hold: { DeviceStorage.store($0, in: &$1, now: $2) }, replacesOnScreen: false)
}

extension Transport {
    /// The transport as a held entry's `source`: its place among the cases.
    package var tag: UInt8 {
        switch self {
        case .http: 0
        case .httpV1: 1
        case .xmpp: 2
        case .apns: 3
        case .webpush: 4
        case .autopush: 5
        case .mcs: 6
        }
    }

    /// The transport whose `tag` is `tag` (the same table as `tag`, read the other way).
    package init?(tag: UInt8) {
        guard let t = Self.allCases.first(where: { $0.tag == tag }) else { return nil }
        self = t
    }
}
