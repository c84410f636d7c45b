public import FCMModel
public import FCMCore
import FCMStore
import Platform

extension Engine {
    // MARK: Held messages

    /// Removes a message a device holds (RFC 8030 §6.2: `DELETE` of its `Location`): its
    /// delivery becomes `deleted`. False when none is held under that id (delivered, expired,
    /// settled otherwise, or unknown).
    public func deletePending(_ messageID: MessageID) throws(EngineError) -> Bool {
        let id = messageID.micros
        try expireDue()
        var event: (String, String)?
        let ticket: Store.Ticket? = state.withLock { s in
            let now = clock.nowMillis()
            for (device, entries) in s.stored {
                // Only a Web Push message, under its whole id (the sender's suffix too): an FCM or
                // APNs message held for the same device, or an id with another sender's suffix,
                // is not this endpoint's to delete.
                guard let i = entries.firstIndex(where: { $0.deliveryID == id && $0.isWebPush }) else { continue }
                guard let d = s.devices[device], messageIDSuffix(senderID: d.senderID) == messageID.suffix else { return nil }
                var kept = entries
                kept.remove(at: i)
                s.stored[device] = kept.isEmpty ? nil : kept
                if events.hasReaders {
                    event = ("message.deleted", EventJSON.delivery(
                        messageID: messageID.description, token: d.token,
                        status: "deleted", at: now))
                }
                return submit([Writes.setDeliveryStatuses([(id, "deleted")], at: now)])
            }
            return nil
        }
        guard let ticket else { return false }
        try commitControl(ticket)
        if let event { events.publish([event]) }
        return true
    }

    // MARK: Health

    /// The endpoint base, how many subscriptions there are (and ended), and the pushes taken
    /// since start (and how many would not decrypt).
    public func webPushHealth() -> (base: String, subscriptions: Int, expired: Int, counts: WebPushCounts) {
        state.withLock { s in
            var live = 0, expired = 0
            for (id, sub) in s.webPush where s.devices[id] != nil {
                if sub.expired { expired += 1 } else { live += 1 }
            }
            return (s.webPushBase, live + expired, expired, s.webPushCounts)
        }
    }
}
