/// Apple's store-and-forward for notifications sent through APNs (docs/spec/apns.md section 5),
/// with no I/O: the engine applies the returned changes. FCM messages held by the same device
/// keep FCM's rules (`DeviceStorage`); these rules touch APNs entries only.
public enum APNsStorage {
    /// What holding `new` for an offline device does: APNs keeps only the newest notification per
    /// app, so the one the device held (a device is one app) leaves as `replaced`. Entries past
    /// their expiration leave first, as `expired`.
    public static func store(_ new: StoredEntry, in entries: inout [StoredEntry], now: Int64) -> [StatusChange] {
        var changes = DeviceStorage.expire(&entries, now: now)
        entries.removeAll { e in
            guard e.isAPNs else { return false }
            changes.append(StatusChange(deliveryID: e.deliveryID, status: "replaced"))
            return true
        }
        var held = new
        held.isAPNs = true
        entries.append(held)
        return changes
    }
}

/// What a phone shows of the notifications it received through APNs, by `apns-collapse-id`: a
/// notification with the id of one shown replaces it (Apple: "the device shows only the
/// newest"). One per device, in memory; bounded, the ids seen longest ago forgotten first.
public struct APNsShown: Sendable {
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
