public import FCMCore

/// A protocol's own rules for the messages sent through it, where FCM's are not the rule: what
/// an offline device holds of them, and whether the one a phone shows under a collapse id gives
/// way to the next. The room whose rules they are hands them to the engine at start
/// (`RoomHooks.holding`); the engine keeps the entries and the screen (`Screen`) and applies
/// the changes. APNs's are Apple's store-and-forward (the APNs room's `APNsStorage`).
public struct HoldingRules: Sendable {
    /// What holding `new` for an offline device does to the entries it holds (`new` is kept):
    /// the status changes of those that leave.
    package var hold: @Sendable (_ new: StoredEntry, _ entries: inout [StoredEntry], _ now: Int64) -> [StatusChange]
    /// A delivery shown under a collapse id replaces the one the phone showed under it, which
    /// becomes `replaced`.
    package var replacesOnScreen: Bool

    public init(hold: @escaping @Sendable (_ new: StoredEntry, _ entries: inout [StoredEntry], _ now: Int64) -> [StatusChange],
                replacesOnScreen: Bool) {
        self.hold = hold
        self.replacesOnScreen = replacesOnScreen
    }
}
