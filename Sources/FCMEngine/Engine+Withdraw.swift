public import FCMModel
public import FCMCore
import FCMStore
import Platform

extension Engine {
    /// Takes back a message a device holds that was sent through `transport` (the Web Push room's
    /// `DELETE` of a push's `Location`): its delivery becomes `deleted`. False when none is held
    /// under that id (delivered, expired, settled otherwise, or unknown) or it came another way.
    public func withdrawHeld(_ messageID: MessageID, sentThrough transport: Transport) throws(EngineError) -> Bool {
        let id = messageID.micros
        try expireDue()
        var event: (String, String)?
        var orders = ClientOrders()
        var released: [(String, String)] = []
        let ticket: Store.Ticket? = state.withLock { s in
            let now = clock.nowMillis()
            for (device, entries) in s.stored {
                // Under its whole id (the sender's suffix too): an id with another sender's suffix
                // is not this sender's to take back.
                guard let i = entries.firstIndex(where: { $0.deliveryID == id }) else { continue }
                // A `deleted_messages` notice is the service's, not the sender's to take back.
                guard !entries[i].isNotice, entries[i].source == transport.tag else { return nil }
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
            // Taken for a real client's connection, its write held by a fault's delay: still
            // `pending` (nothing written), so still the sender's to take back.
            // (On the connection it was decided for: the device may travel over another by now.)
            guard let cd = s.clientDeliveries[id], cd.sends == 0, cd.ack == nil, !cd.entry.isNotice, cd.entry.source == transport.tag,
                  let d = s.clientDeliveryDevice[id].flatMap({ s.devices[$0] }),
                  messageIDSuffix(senderID: d.senderID) == messageID.suffix,
                  let clientID = s.realClients.first(where: { $0.value.connection?.info.id == cd.connectionID })?.key,
                  s.realClients[clientID]?.connection?.unacked.contains(id) == true else { return nil }
            s.realClients[clientID]?.connection?.unacked.removeAll { $0 == id }
            s.forgetClientDelivery(id)
            if events.hasReaders {
                event = ("message.deleted", EventJSON.delivery(messageID: messageID.description, token: d.token, status: "deleted", at: now))
            }
            // Its place among the connection's unacknowledged goes to what waits for room.
            var changes: [(Int64, String)] = [(id, "deleted")]
            var updates: [ClientDeliveryUpdate] = []
            let fired = flushHeld(of: clientID, now: now, orders: &orders, updates: &updates, changes: &changes, events: &released, state: &s)
            return submit(clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now))
        }
        guard let ticket else { return false }
        try commitControl(ticket)
        if let event { events.publish([event]) }
        events.publish(released)
        if !orders.writes.isEmpty { notifyChanged() }
        dispatch(orders)
        return true
    }
}
