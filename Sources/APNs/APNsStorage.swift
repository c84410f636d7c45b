import FCMCore
import FCMModel

/// Apple's store-and-forward for notifications sent through APNs (docs/spec/apns.md section 5),
/// with no I/O: the engine applies the changes it returns. FCM messages the same device holds
/// keep FCM's rules (`DeviceStorage`); these touch APNs entries only (held by their own rules,
/// from the same source as the new one).
enum APNsStorage {
    /// What holding `new` for an offline device does: APNs keeps only the newest notification per
    /// app, so the one the device held (a device is one app) leaves as `replaced`. Entries past
    /// their expiration leave first, as `expired`. Nothing is dropped or purged.
    static func store(_ new: StoredEntry, in entries: inout [StoredEntry], now: Int64) -> DeviceStorage.Held {
        var changes = DeviceStorage.expire(&entries, now: now)
        entries.removeAll { e in
            guard e.ownRules, e.source == new.source else { return false }
            changes.append(StatusChange(deliveryID: e.deliveryID, status: "replaced"))
            return true
        }
        entries.append(new)
        return (changes, false, 0)
    }

    /// Apple's rules as the engine takes them: offline, the newest notification only; online, one
    /// with the `apns-collapse-id` of a notification the phone shows replaces it there.
    static let rules = HoldingRules(hold: { store($0, in: &$1, now: $2) }, replacesOnScreen: true)
}
