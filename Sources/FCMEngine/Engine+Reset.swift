import FCMModel
import Platform
import Synchronization
import FCMCore
import FCMStore

extension Engine {
    /// Forgets devices, messages and deliveries; keeps projects; returns the clock to real time.
    /// With `fixtures` (the start-up fixtures' devices, every document's in the order they were
    /// applied: `EngineState.fixtureDevices` holds places in it), the devices they declare are kept with
    /// their ids and creation times, put back to what the fixture says (registered, its online
    /// flag), and made again where they are gone, all under one lock: a reset writes only what
    /// changed, not a whole fixture's rows, and no send sees the store without them.
    /// Real clients (`keepClients`) keep their devices, registered again, and their
    /// connections; without, they are forgotten and their connections closed.
    func reset(fixtures: [DeviceSpec]?, keepClients: Bool = true) throws(EngineError) {
        let hook = resetListeners.withLock { $0 }?.call
        var afterwards: (@Sendable () -> Void)?
        let now = clock.nowMillis()
        var orders = ClientOrders()
        // The connections a reset that forgets clients closes: each ends as a connection's end
        // shows it (the room's own report of the close finds no client).
        var closed: [(String, String)] = []
        let ticket = state.withLock { s in
            var removed: [Device] = []
            var changed: [Device] = []
            var clientWrites: [WriteOp] = []
            for d in s.devices.values {
                if keepClients, var link = d.client {
                    var back = d
                    back.state = .registered
                    back.canonicalID = nil
                    link.held = false
                    link.unregisterCode = nil
                    back.client = link
                    // Online while its connection lives: its client's, or for an FCM registration
                    // that of the client whose subscription it travels over.
                    back.online = s.carrier(of: back)?.connection != nil
                    if back != d {
                        changed.append(back)
                        clientWrites.append(Writes.setDeviceClient(device: d.id, link.stored))
                    }
                    continue
                }
                guard let fixtures, let place = s.fixtureDevices[d.id], fixtures.indices.contains(Int(place)),
                      case let f = fixtures[Int(place)], f.matches(d) else {
                    removed.append(d)
                    continue
                }
                var back = d
                back.state = f.state
                back.canonicalID = nil
                back.online = f.online
                if back != d { changed.append(back) }
            }
            let webPushReset = s.resetWebPush(removed: removed.map(\.id))
            for d in removed {
                s.remove(d)
                s.fixtureDevices[d.id] = nil
            }
            for d in changed { s.devices[d.id] = d }
            if !removed.isEmpty {
                // A kept device whose APNs token or fid a removed one held (a refreshed token's
                // new device carries both) is found by them again.
                for d in s.devices.values {
                    if let apns = d.apnsToken, s.apnsIndex[apns] == nil { s.apnsIndex[apns] = d.id }
                    if s.fidIndex[d.fid] == nil { s.fidIndex[d.fid] = d.id }
                }
            }
            var created: [Device] = []
            if let fixtures, s.devices.count < fixtures.count {
                // A fixture device deleted since comes back under its old id, so lists keep the
                // order they had at start; one never made (its project was gone) gets a new one.
                for (id, place) in s.fixtureDevices.sorted(by: { $0.key < $1.key })
                where s.devices[id] == nil && fixtures.indices.contains(Int(place)) {
                    if case .success((let d, true)) = placeDevice(fixtures[Int(place)], in: &s, now: now, id: id) { created.append(d) }
                }
                for (place, f) in fixtures.enumerated() where f.token.flatMap({ s.tokenIndex[$0] }) == nil {
                    if case .success((let d, true)) = placeDevice(f, in: &s, now: now) {
                        created.append(d)
                        s.fixtureDevices[d.id] = Int32(place)
                    }
                }
            }
            s.inbox.removeAll()
            s.stored.removeAll()
            s.clientDeliveries.removeAll()
            s.clientDeliveryDevice.removeAll()
            s.clientPayloads.removeAll()
            s.acknowledged.removeAll()
            for id in s.realClients.keys { s.realClients[id]?.connection?.unacked.removeAll() }
            if !keepClients { clientWrites += forgetClients(now: now, orders: &orders, closed: &closed, state: &s) }
            s.screens.removeAll()
            s.stats = SendStats()
            s.faults = FaultTable()
            faultsArmed.store(false, ordering: .relaxed)
            s.topicSubscribers.removeAll()
            s.deviceTopics.removeAll()
            s.groups.removeAll()
            s.groupKeyByName.removeAll()
            s.retiredTokens.removeAll()
            s.upstream.removeAll()
            s.upstreamOrder.removeAll()
            credentials.withLock { c in
                c.accessTokens.removeAll()
                c.revokedTokens.removeAll()
            }
            restartClock(&s)
            afterwards = hook?(())
            return submit([store.resetHistory(),
                           Writes.reset(keepsAny: s.devices.count > created.count, removed: removed.map(\.id),
                                        restored: changed.map { ($0.id, $0.state.rawValue, $0.online) })]
                          + webPushReset + deviceWrites(created, state: s) + clientWrites)
        }
        try commitControl(ticket)
        afterwards?()
        events.publish(closed)
        dispatch(orders)
    }

    /// A reset's `?clients=false`: every client forgotten with its registrations and
    /// installations, its connection closed (`orders`) with the `client.closed` it makes
    /// (`closed`); the store's writes returned.
    private func forgetClients(now: Int64, orders: inout ClientOrders, closed: inout [(String, String)],
                               state s: inout EngineState) -> [WriteOp] {
        let reason = "reset: the client was forgotten"
        for var c in s.realClients.values {
            guard let conn = c.connection else { continue }
            orders.close.append(ClientClose(transport: c.kind, clientID: c.row.id, connectionID: conn.info.id, reason: reason))
            c.connection = nil
            closed.append(("client.closed", EventJSON.clientClosed(client: s.renderClient(c), connectionID: conn.info.id,
                                                                   code: c.kind == .autopush ? 1000 : 0, reason: reason, at: now)))
        }
        let writes = [Writes.deleteClients(Array(s.realClients.keys))] + s.installations.keys.map(Writes.deleteInstallation)
        s.realClients.removeAll()
        s.clientChannels.removeAll()
        s.gcmRegistrations.removeAll()
        s.gcmRegistrationKeys.removeAll()
        s.installations.removeAll()
        s.installationAuth.removeAll()
        s.earlierAuth.removeAll()
        s.fcmRiders.removeAll()
        return writes
    }

    /// Returns the clock to real time. Rate-limit windows start afresh: what they counted was
    /// stamped on the clock that ran ahead, and would hold the limit for as long.
    public func resetClock() {
        state.withLock { restartClock(&$0) }
    }

    /// The clock back to real time and the rate-limit windows empty; call with `s` locked, so no
    /// send sees cleared windows on the old clock.
    private func restartClock(_ s: inout EngineState) {
        s.deviceWindows = RateWindows()
        s.topicWindows = RateWindows()
        clock.reset()
    }

    /// Commits a control change, mapping a store failure to a control-API error.
    func commitControl(_ ticket: Store.Ticket) throws(EngineError) {
        do {
            try commit(ticket)
        } catch {
            throw .internal("the store failed: \(error.description)")
        }
    }
}
