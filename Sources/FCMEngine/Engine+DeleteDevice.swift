public import FCMModel
import FCMCore
import FCMStore
import Platform

extension Engine {
    /// Forgets a device entirely: its token is unknown again. Its past deliveries keep the token
    /// as text so message records still say whom they addressed; what it held is `deleted`.
    public func deleteDevice(_ token: String) throws(EngineError) {
        var deletedID: Int64 = 0
        var published: [(String, String)] = [], released: [(String, String)] = []
        var orders = ClientOrders()
        let result: Result<Store.Ticket, EngineError> = state.withLock { s in
            let now = clock.nowMillis()  // under the lock: a clock reset cannot come in between
            guard let d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            deletedID = d.id
            s.remove(d)
            let id = d.id
            // What it held goes with it: `deleted` (not `pending` for ever on the records), and so
            // does what a real client's connection has not acknowledged yet (not `sent` for ever).
            var held = (s.stored[id] ?? []).map { ($0.deliveryID, "deleted") }
            // Only what is on a connection's unacknowledged list: what the client acknowledged or
            // rejected lately (still remembered) keeps its status.
            var holders: [String] = []
            if d.client != nil {
                for (clientID, client) in s.realClients {
                    let mine = client.connection?.unacked.filter { s.clientDeliveryDevice[$0] == id } ?? []
                    guard !mine.isEmpty else { continue }
                    s.realClients[clientID]?.connection?.unacked.removeAll { s.clientDeliveryDevice[$0] == id }
                    held += mine.map { ($0, "deleted") }
                    holders.append(clientID)
                }
            }
            held.sort { $0.0 < $1.0 }
            if events.hasReaders {
                let suffix = messageIDSuffix(senderID: d.senderID)
                published = held.map { ("message.deleted", EventJSON.delivery(messageID: MessageID(micros: $0.0, suffix: suffix).description,
                                                                              token: token, status: "deleted", at: now)) }
            }
            if let link = d.client {
                s.realClients[link.id]?.devices.removeAll { $0 == id }
                if let via = link.via { s.fcmRiders[via]?.removeAll { $0 == id } }
                if let channel = link.channelID { s.clientChannels[channel] = nil }
                for delivery in s.clientDeliveryDevice.compactMap({ $0.value == id ? $0.key : nil }) { s.forgetClientDelivery(delivery) }
            }
            let deliveries = s.inbox.removeValue(forKey: id)?.recent ?? []
            s.stored[id] = nil
            // The room those took on their connections goes to what waits for it.
            var updates: [ClientDeliveryUpdate] = [], changes: [(Int64, String)] = []
            var fired: [(delivery: Int64, fault: String)] = []
            for holder in holders {
                fired += flushHeld(of: holder, now: now, orders: &orders, updates: &updates, changes: &changes, events: &released, state: &s)
            }
            let flushed = holders.isEmpty ? [] : clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
            s.unsubscribeAll(device: id)
            // Out of its groups too; a group left empty goes, as FCM deletes empty groups.
            var changedGroups: [DeviceGroup] = [], emptied: [String] = []
            for (key, var g) in s.groups where g.members.contains(id) {
                g.members.removeAll { $0 == id }
                if g.members.isEmpty { s.remove(group: key); emptied.append(key) } else { s.insert(g); changedGroups.append(g) }
            }
            let (regroup, drop) = (changedGroups, emptied)
            return .success(submit(regroup.map(\.save) + drop.map(Writes.deleteGroup)
                                   + (held.isEmpty ? [] : [Writes.setDeliveryStatuses(held, at: now)])
                                   + [Writes.deleteDevice(id, token: token, deliveries: deliveries)] + s.deleteWebPush(device: id) + flushed))
        }
        try commitControl(try result.get())
        events.publish(published)
        events.publish(released)
        if !orders.writes.isEmpty { notifyChanged() }
        dispatch(orders)
        unregisterRiders(of: [deletedID])
    }
}
