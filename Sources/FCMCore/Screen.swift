/// What a phone shows of the notifications it received, by collapse id, for a protocol whose
/// rules replace on the screen (`HoldingRules.replacesOnScreen`: APNs's `apns-collapse-id`). One
/// per device, in memory; bounded, the ids seen longest ago forgotten first.
public struct Screen: Sendable {
    /// Collapse ids a device remembers at most.
    public static let capacity = 64
    /// Collapse id → the delivery showing it, oldest first.
    private var shown: [(collapseID: String, deliveryID: Int64)] = []

    public init() {}

    /// `deliveryID` is shown under `collapseID`; returns the delivery it replaces, if one showed it.
    public mutating func show(_ deliveryID: Int64, collapseID: String) -> Int64? {
        var replaced: Int64?
        if let i = shown.firstIndex(where: { $0.collapseID == collapseID }) {
            replaced = shown[i].deliveryID
            shown.remove(at: i)
        } else if shown.count >= Self.capacity {
            shown.removeFirst()
        }
        shown.append((collapseID, deliveryID))
        return replaced
    }
}
