// Long because: a real client's life (hello, register, unregister, acknowledgements, the
// connection's end) and the delivery rules it changes (written at once, held, re-sent) share the
// state they move under one lock.
public import FCMModel
import FCMCore
import FCMStore
import Platform
import Synchronization
import Dispatch

/// How long an acknowledgement's record may wait for another commit to ride (`submitRiding`).
let ridingCommitMillis = 5

extension Engine {
    /// A client room's way to reach its clients: called with the writes a send or a control
    /// change decided, once they are committed.
    public func setClientRoom(_ kind: ClientKind, _ deliver: @escaping @Sendable (ClientOrders) -> Void) {
        clientRooms.withLock { $0[kind] = deliver }
    }

    func dispatch(_ orders: ClientOrders) {
        guard !orders.isEmpty else { return }
        let rooms = clientRooms.withLock { $0 }
        // Each connection's writes go to the room of its protocol; orders for one room (a send's,
        // an acknowledgement's) go as they are, without copying their writes.
        let kind = orders.writes.first?.transport ?? orders.close.first?.transport
        if let kind, orders.writes.allSatisfy({ $0.transport == kind }), orders.close.allSatisfy({ $0.transport == kind }) {
            rooms[kind]?(orders)
            return
        }
        for (kind, deliver) in rooms {
            let mine = ClientOrders(writes: orders.writes.filter { $0.transport == kind }, close: orders.close.filter { $0.transport == kind })
            if !mine.isEmpty { deliver(mine) }
        }
    }

    // MARK: Hello

    /// A client says who it is on a new connection: the client `id` names (a new one, made by
    /// `newID`, when it names none the mock knows), its devices online (unless held), and what
    /// they hold or had unacknowledged on a replaced connection, to write.
    /// `newID` nil: only a known client may (an MCS login); nil is returned for another.
    /// `received`: versions the client says it has (an MCS login's `received_persistent_id`):
    /// acknowledged (`by: "login"`) before anything is written again.
    public func clientHello(kind: ClientKind, id: String?, connection: ClientConnectionInfo, received: [String] = [],
                            newID: (() -> String)?) throws(EngineError) -> ClientHello? {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        var settled: [Int64] = []
        let result: (ClientHello, Store.Ticket)? = state.withLock { s in
            var isNew = false
            var client: RealClient
            if let id, let known = s.realClients[id], known.kind == kind {
                client = known
            } else {
                guard let newID else { return nil }
                isNew = true
                var fresh = newID()
                while s.realClients[fresh] != nil { fresh = newID() }
                client = RealClient(row: RealClientRow(id: fresh, kind: kind.rawValue, userAgent: nil, clientVersion: nil, createdAt: now,
                                                       lastConnectedAt: nil))
            }
            let replaced = client.connection?.info.id
            let carried = client.connection?.unacked ?? []
            // The hello (a LoginRequest) is the connection's first frame.
            client.connection = ClientConnection(info: connection, connectedAt: now, lastFrameAt: now)
            client.row.lastConnectedAt = now
            client.row.userAgent = connection.userAgent ?? client.row.userAgent
            client.row.clientVersion = connection.clientVersion ?? client.row.clientVersion
            s.realClients[client.row.id] = client
            var writes: [WriteOp] = [Writes.saveClient(client.row)]
            for deviceID in s.carried(by: client) {
                guard var d = s.devices[deviceID], let link = d.client else { continue }
                let online = !link.held
                if d.online != online {
                    d.online = online
                    d.lastSeenAt = now
                    s.devices[deviceID] = d
                    writes.append(Writes.setOnline(device: deviceID, online, at: now, flushHeld: false))
                }
            }
            var orders = ClientOrders()
            var updates: [ClientDeliveryUpdate] = []
            var changes: [(Int64, String)] = []
            // Only this client's own deliveries: another client's persistent ids settle nothing.
            let own = received.isEmpty ? [] : Set(s.carried(by: client))
            for version in received {
                guard let mid = MessageID(version),
                      let (deviceID, found) = s.receivedDelivery(mid, version, among: own, onWire: carried),
                      found.ack == nil, let d = s.devices[deviceID] else { continue }
                var cd = found
                cd.ack = ("login", nil, now)
                s.clientDeliveries[mid.micros] = cd
                s.stored[deviceID]?.removeAll { $0.deliveryID == mid.micros }
                s.clientPayloads[mid.micros] = nil
                updates.append(ClientDeliveryUpdate(id: mid.micros, status: "delivered", deliveredAt: now, stored: cd.stored()))
                if events.hasReaders {
                    published.append(("message.delivered", EventJSON.clientDelivery(messageID: version, token: d.token, status: "delivered",
                                                                                      at: now, clientDelivery: cd.json())))
                }
                s.rememberAcknowledged(mid.micros, clientID: client.row.id)
                settled.append(mid.micros)
            }
            // What the replaced connection had unacknowledged goes out again first (same version),
            // but for what the client says it has (settled just above).
            for deliveryID in carried {
                requeue(deliveryID, now: now, changes: &changes, dropped: &updates, events: &published, state: &s)
            }
            let fired = flushHeld(of: client.row.id, now: now, orders: &orders, updates: &updates, changes: &changes, events: &published, state: &s)
            // The statuses first: what the replaced connection had is `pending` again, then `sent`
            // once written on this one.
            writes += clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
            published.insert(("client.connected", s.renderClient(client)), at: 0)
            return (ClientHello(clientID: client.row.id, isNew: isNew, replaced: replaced, orders: orders), submit(writes))
        }
        guard let (hello, ticket) = result else { return nil }
        try commitControl(ticket)
        events.publish(published)
        reachedLate(settled)
        return hello
    }

    /// Puts a delivery written on a connection that is gone back where its device holds it
    /// (`pending`), or `expired` when its time ran out. The record of its sends stays. One whose
    /// channel was unregistered meanwhile is `dropped`, as what the channel held (`dropped`
    /// gets its record, `events` its event).
    private func requeue(_ deliveryID: Int64, now: Int64, changes: inout [(Int64, String)], dropped: inout [ClientDeliveryUpdate],
                         events published: inout [(String, String)], state s: inout EngineState) {
        guard let cd = s.clientDeliveries[deliveryID], let deviceID = s.clientDeliveryDevice[deliveryID] else { return }
        guard cd.ack == nil && cd.rejection == nil else { return }
        let device = s.devices[deviceID]
        if device?.state != .registered {
            // Its channel went (or its device was deleted) while it was on the connection.
            return s.dropForGoneChannel(deliveryID, of: device, now: now, updates: &dropped, events: &published)
        }
        if cd.entry.expiresAt <= now {
            changes.append((deliveryID, "expired"))
            s.forgetClientDelivery(deliveryID)
            if let d = device, events.hasReaders {
                published.append(("message.expired", EventJSON.delivery(
                    messageID: MessageID(micros: deliveryID, suffix: messageIDSuffix(senderID: d.senderID)).description,
                    token: d.token, status: "expired", at: now)))
            }
            return
        }
        var held = s.stored[deviceID] ?? []
        let at = held.firstIndex { $0.deliveryID > deliveryID } ?? held.count
        held.insert(cd.entry, at: at)
        s.stored[deviceID] = held
        changes.append((deliveryID, "pending"))
    }

    /// Writes what a client's online devices hold, oldest first, up to the connection's room
    /// for unacknowledged deliveries; expires what ran out. Returns the client faults that fired
    /// on those writes (delivery, fault), for their records (`Writes.recordClientFaults`).
    func flushHeld(of clientID: String, now: Int64, orders: inout ClientOrders, updates: inout [ClientDeliveryUpdate],
                   changes: inout [(Int64, String)], events published: inout [(String, String)],
                   state s: inout EngineState) -> [(delivery: Int64, fault: String)] {
        var fired: [(delivery: Int64, fault: String)] = []
        // Nothing held anywhere: the common case after an acknowledgement.
        guard !s.stored.isEmpty, let client = s.realClients[clientID], let conn = client.connection else { return fired }
        var waiting: [(device: Device, entry: StoredEntry)] = []
        let carried = s.carried(by: client)
        // Lists emptied here (or before) go.
        defer { for deviceID in carried where s.stored[deviceID]?.isEmpty == true { s.stored[deviceID] = nil } }
        for deviceID in carried {
            guard let d = s.devices[deviceID], let held = s.stored[deviceID] else { continue }
            guard d.state == .registered else {
                // Held for a channel that went (read back so after a restart): dropped, not written.
                for e in held { s.dropForGoneChannel(e.deliveryID, of: d, now: now, updates: &updates, events: &published) }
                s.stored[deviceID] = []
                continue
            }
            guard d.online else { continue }
            for e in held { waiting.append((d, e)) }
        }
        guard !waiting.isEmpty else { return fired }
        waiting.sort { $0.entry.deliveryID < $1.entry.deliveryID }
        var room = maxUnackedPerConnection - conn.unacked.count
        for (d, e) in waiting {
            if e.expiresAt <= now || (e.isNotice && client.kind == .autopush) {
                // A notice of deleted messages is FCM's (an MCS stanza), not autopush's: there is
                // nothing to write it as, so Firefox cannot take it (`undeliverable`).
                let status = e.expiresAt <= now ? "expired" : "undeliverable"
                changes.append((e.deliveryID, status))
                s.stored[d.id]?.removeAll { $0.deliveryID == e.deliveryID }
                s.forgetClientDelivery(e.deliveryID)
                published.append(("message." + status, EventJSON.delivery(
                    messageID: MessageID(micros: e.deliveryID, suffix: messageIDSuffix(senderID: d.senderID)).description,
                    token: d.token, status: status, at: now)))
                continue
            }
            guard room > 0 else { break }
            let firing = faultsArmed.load(ordering: .relaxed)
                ? s.faults.fireClientFault(transport: client.kind.faultTransport, senderID: d.senderID, token: d.token) : nil
            // On the record as a fault fired at the send is (the recipient's and the message's `fault`).
            if let firing { fired.append((e.deliveryID, firing.id)) }
            let fault = firing?.action
            if fault == .closeConnection {
                // The fault closes the connection instead: what is held stays held.
                orders.close.append(ClientClose(transport: client.kind, clientID: clientID, connectionID: conn.info.id,
                                                reason: "a fault (close_connection)"))
                break
            }
            var delay: Int64?
            if case .delay(let ms)? = fault, ms > 0 { delay = ms }
            room -= 1
            s.stored[d.id]?.removeAll { $0.deliveryID == e.deliveryID }
            let (write, update) = markSent(e, device: d, connection: conn.info.id, clientID: clientID, now: now, delay: delay, state: &s)
            orders.writes.append(write)
            // One a fault delays is `sent` when it is written (`delayedWriteDue`).
            guard let update else { continue }
            updates.append(update)
            guard events.hasReaders else { continue }
            guard let cd = s.clientDeliveries[e.deliveryID] else { continue }
            published.append(("message.sent", EventJSON.clientDelivery(messageID: write.version, token: d.token, status: "sent", at: now,
                                                                         clientDelivery: cd.json())))
        }
        return fired
    }

    /// The store's writes for what happened to deliveries on real clients' connections, in the
    /// order they must land: statuses first (`pending` again, `expired`), then the records of the
    /// writes and acknowledgements (`sent` on a new connection comes after `pending`), then the
    /// faults that fired on those writes.
    func clientDeliveryWrites(changes: [(Int64, String)], updates: [ClientDeliveryUpdate],
                              fired: [(delivery: Int64, fault: String)] = [], at now: Int64) -> [WriteOp] {
        var writes: [WriteOp] = []
        if !changes.isEmpty { writes.append(Writes.setDeliveryStatuses(changes, at: now)) }
        if !updates.isEmpty { writes.append(Writes.setClientDeliveries(updates, settledAt: now)) }
        if !fired.isEmpty { writes.append(Writes.recordClientFaults(fired)) }
        return writes
    }

    /// A delivery written (again) on connection `connectionID`: `sent`, its sends counted. One a
    /// fault delays (`delay`) is on the connection's unacknowledged list from now, but stays as it
    /// was (`pending`, no send counted, no record: the update is nil) until the room writes it
    /// (`delayedWriteDue`).
    func markSent(_ e: StoredEntry, device d: Device, connection connectionID: String, clientID: String, now: Int64,
                  delay: Int64?, state s: inout EngineState) -> (ClientWrite, ClientDeliveryUpdate?) {
        let version = MessageID(micros: e.deliveryID, suffix: messageIDSuffix(senderID: d.senderID)).description
        // The client looked up once (its id hashed once) and changed in place.
        let ci = s.realClients.index(forKey: clientID)
        let transport = ci.map { s.realClients.values[$0].kind } ?? .autopush
        var cd = s.clientDeliveries[e.deliveryID]
            ?? ClientDelivery(kind: transport, connectionID: connectionID, version: version, firstSentAt: now, sends: 0, entry: e)
        if delay == nil {
            // A first write after one a fault delayed and a close undid: the first is now.
            if cd.sends == 0 { cd.firstSentAt = now }
            cd.sends += 1
        }
        // An FCM registration's push travels on the registration its subscription is. (A
        // device's client is read once: each read copies it out of the device's box.)
        let link = d.client
        let carrier = link?.kind == .fcm ? link?.via.flatMap { s.devices[$0] } : d
        let registration = link?.kind == .fcm ? carrier?.client : link
        cd.connectionID = connectionID
        cd.channelID = registration?.channelID
        s.clientDeliveries[e.deliveryID] = cd
        s.clientDeliveryDevice[e.deliveryID] = d.id
        if let ci { s.realClients.values[ci].connection?.unacked.append(e.deliveryID) }
        let write = ClientWrite(transport: transport, clientID: clientID, connectionID: connectionID, deliveryID: e.deliveryID,
                                version: version, token: carrier?.token ?? d.token, channelID: registration?.channelID,
                                payload: s.clientPayloads[e.deliveryID], delayMillis: delay, device: link,
                                deviceToken: d.token, registration: registration)
        guard delay == nil else { return (write, nil) }
        return (write, ClientDeliveryUpdate(id: e.deliveryID, status: "sent", deliveredAt: nil, stored: cd.stored()))
    }

    /// The room is about to write `w`, which a fault delayed: true when it is still wanted (its
    /// connection open, the delivery on it and not settled), the delivery then `sent` from now,
    /// its send counted (the first write's time is now) and `message.sent` published. What
    /// changed during the delay is applied as at any write: a delivery whose TTL ran out is
    /// `expired`, one whose device went or was unregistered `dropped`, one whose device is held
    /// offline held again; each leaves the connection's unacknowledged list, and false.
    public func delayedWriteDue(_ w: ClientWrite) -> Bool {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        var device: Device?
        var orders = ClientOrders()
        // Committed before the room writes (this runs on a timer's thread, which may wait): a
        // read of the record after the client has the push finds it `sent`.
        let outcome: (due: Bool, ticket: Store.Ticket?) = state.withLock { s in
            guard var cd = s.clientDeliveries[w.deliveryID], cd.connectionID == w.connectionID, cd.ack == nil, cd.rejection == nil,
                  let ci = s.realClients.index(forKey: w.clientID), let conn = s.realClients.values[ci].connection,
                  conn.info.id == w.connectionID, conn.unacked.contains(w.deliveryID)
            else { return (false, nil) }
            device = s.clientDeliveryDevice[w.deliveryID].flatMap { s.devices[$0] }
            if device?.state != .registered || cd.entry.expiresAt <= now || device?.online != true {
                s.realClients.values[ci].connection?.unacked.removeAll { $0 == w.deliveryID }
                var changes: [(Int64, String)] = []
                var dropped: [ClientDeliveryUpdate] = []
                requeue(w.deliveryID, now: now, changes: &changes, dropped: &dropped, events: &published, state: &s)
                // Its place among the connection's unacknowledged goes to what waits for room.
                let fired = flushHeld(of: w.clientID, now: now, orders: &orders, updates: &dropped, changes: &changes,
                                      events: &published, state: &s)
                let writes = clientDeliveryWrites(changes: changes, updates: dropped, fired: fired, at: now)
                return (false, writes.isEmpty ? nil : submit(writes))
            }
            if cd.sends == 0 { cd.firstSentAt = now }
            cd.sends += 1
            s.clientDeliveries[w.deliveryID] = cd
            if events.hasReaders, let d = device {
                published.append(("message.sent", EventJSON.clientDelivery(messageID: w.version, token: d.token, status: "sent", at: now,
                                                                             clientDelivery: cd.json())))
            }
            let update = ClientDeliveryUpdate(id: w.deliveryID, status: "sent", deliveredAt: nil, stored: cd.stored())
            return (true, submit([Writes.setClientDeliveries([update], settledAt: now)]))
        }
        guard let ticket = outcome.ticket else { return outcome.due }
        // A write that cannot be recorded is not made (the store's recovery takes it from here).
        do throws(EngineError) { try commitControl(ticket) } catch { return false }
        if let device, orders.writes.isEmpty { notifyChanged(devices: [device.id]) } else { notifyChanged() }
        events.publish(published)
        dispatch(orders)
        return outcome.due
    }

    // MARK: Registrations

    /// A client registers a channel: a `web` device of the project `senderID`, app `app`, whose
    /// subscription is the browser's (no keys here: pushes are relayed). `endpoint` makes the
    /// push endpoint from the subscription's id. The same channel again answers its device.
    public func clientRegister(clientID: String, channelID: String, key: String?, senderID: String, app: String,
                               endpoint: (String) -> String) throws(ClientRefusal) -> Device {
        let serverKey: String?
        if let key {
            do throws(EngineError) { serverKey = try checkApplicationServerKey(key) } catch {
                throw .invalidKey("a P-256 public key is 65 bytes, 0x04 first, in base64url")
            }
        } else {
            serverKey = nil
        }
        let now = clock.nowMillis()
        // The device, the write that made it (or changed its key), and whether it is new.
        let result: Result<(Device, Store.Ticket?, Bool), ClientRefusal> = state.withLock { s in
            guard let client = s.realClients[clientID] else { return .failure(.unknownClient) }
            if let holder = s.clientChannels[channelID].flatMap({ s.devices[$0] }) {
                guard holder.client?.id == clientID else { return .failure(.channelInUse) }
                // Registered again with another key (or none): the newest binding is the one its
                // pushes are checked against, as the endpoint answered for it.
                guard var sub = s.webPush[holder.id], sub.applicationServerKey != serverKey else { return .success((holder, nil, false)) }
                sub.applicationServerKey = serverKey
                s.webPush[holder.id] = sub
                return .success((holder, submit([Writes.saveWebPush([sub.row])]), false))
            }
            let spec = DeviceSpec(token: nil, senderID: senderID, app: app, platform: .web, online: client.connection != nil,
                                  applicationServerKey: nil)
            guard case .success((var d, true)) = placeDevice(spec, in: &s, now: now, relayed: true) else {
                return .failure(.failed("no device could be made for project \(senderID)"))
            }
            guard var sub = s.webPush[d.id] else { return .failure(.failed("no subscription could be made")) }
            sub.applicationServerKey = serverKey
            sub.endpointOverride = endpoint(sub.id)
            s.webPush[d.id] = sub
            var link = DeviceClient(kind: client.kind, id: clientID, channelID: channelID)
            link.endpoint = sub.endpointOverride
            d.client = link
            s.devices[d.id] = d
            s.clientChannels[channelID] = d.id
            s.realClients[clientID]?.devices.append(d.id)
            return .success((d, submit(deviceWrites([d], state: s)), true))
        }
        let (device, ticket, created) = try result.get()
        if let ticket {
            do throws(EngineError) { try commitControl(ticket) } catch { throw .failed("the store failed") }
            if events.hasReaders { events.publish([(created ? "device.created" : "device.updated", renderDevice(device))]) }
        }
        return device
    }

    /// A client unregisters a channel (`code`: why, as the client says): its device is
    /// `unregistered` (pushes to it find it gone) and what it held is `dropped`. Nil for a channel the
    /// client does not hold.
    @discardableResult
    public func clientUnregister(clientID: String, channelID: String, code: Int) throws(EngineError) -> Device? {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        let result: (Device, Store.Ticket)? = state.withLock { s in
            guard let id = s.clientChannels[channelID], var d = s.devices[id], var link = d.client, link.id == clientID else { return nil }
            link.unregisterCode = code
            d.client = link
            d.state = .unregistered
            d.lastSeenAt = now
            s.devices[id] = d
            published.append(("device.updated", s.render(d, now: now)))
            var dropped: [ClientDeliveryUpdate] = []
            for e in s.stored.removeValue(forKey: id) ?? [] {
                s.dropForGoneChannel(e.deliveryID, of: d, now: now, updates: &dropped, events: &published)
            }
            var writes = [Writes.unregister(device: id, at: now), Writes.setDeviceClient(device: id, link.stored)]
            // Why they were dropped, shown as the entries' `error_detail`.
            if !dropped.isEmpty { writes.append(Writes.setClientDeliveries(dropped, settledAt: now)) }
            return (d, submit(writes))
        }
        guard let (device, ticket) = result else { return nil }
        try commitControl(ticket)
        events.publish(published)
        unregisterRiders(of: [device.id])
        return device
    }

    // MARK: Acknowledgements

    /// The client acknowledged (or, `nack`, refused) the deliveries it knows as `versions` on
    /// `connectionID` (one frame's: a stream ack covers several): `code` nil or 100 delivered; 101,
    /// 102 and a nack's 301 to 303 rejected. Returns the versions that connection had sent and
    /// that this settled (others are the room's to log and forget), and what waited for room on
    /// the connection, to write.
    /// `by`: how (autopush's `ack`; MCS's `selective_ack`, `stream_ack`, `login`).
    /// `channelID`: the channel an autopush ack names, which must be the one the version was last
    /// written on (an FCM registration's push: the channel it travelled over); nil: none to check.
    public func clientAcknowledged(clientID: String, connectionID: String, versions: [String], code: Int?, nack: Bool, by: String = "ack",
                                   channelID: String? = nil) throws(EngineError) -> (settled: [String], orders: ClientOrders) {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        var reached: [Int64] = []
        var settled: [String] = []
        let result: (ClientOrders, Store.Ticket?)? = state.withLock { s in
            // The client looked up once (its id hashed once) and changed in place below.
            guard let ci = s.realClients.index(forKey: clientID), s.realClients.values[ci].connection?.info.id == connectionID
            else { return nil }
            var updates: [ClientDeliveryUpdate] = []
            var touched: [Int64] = []
            var madeRoom = false
            for version in versions {
                guard let mid = MessageID(version), var cd = s.clientDeliveries[mid.micros], cd.connectionID == connectionID,
                      cd.version == version, let deviceID = s.clientDeliveryDevice[mid.micros], let d = s.devices[deviceID],
                      channelID == nil || cd.channelID == nil || cd.channelID == channelID else { continue }
                let deliveryID = mid.micros
                let wasSent = s.realClients.values[ci].connection?.unacked.contains(deliveryID) ?? false
                guard wasSent || (nack && cd.ack != nil && cd.rejection == nil) else { continue }
                var status: String
                var deliveredAt: Int64?
                if nack {
                    cd.rejection = (code ?? 0, ClientDelivery.meaning(code ?? 0), now)
                    status = "client_rejected"
                } else if code == nil || code == 100 {
                    cd.ack = (by, code ?? (by == "ack" ? 100 : nil), now)
                    status = "delivered"
                    deliveredAt = now
                    reached.append(deliveryID)
                } else {
                    cd.ack = (by, code, now)
                    cd.rejection = (code ?? 0, ClientDelivery.meaning(code ?? 0), now)
                    status = "client_rejected"
                }
                s.clientDeliveries[deliveryID] = cd
                s.clientPayloads[deliveryID] = nil
                s.realClients.values[ci].connection?.unacked.removeAll { $0 == deliveryID }
                s.rememberAcknowledged(deliveryID, clientID: clientID)
                updates.append(ClientDeliveryUpdate(id: deliveryID, status: status, deliveredAt: deliveredAt, stored: cd.stored()))
                if !events.hasReaders {
                    // Nobody listens: no event to build.
                } else if status == "delivered" {
                    published.append(("message.delivered", EventJSON.clientDelivery(messageID: version, token: d.token, status: status, at: now,
                                                                                      clientDelivery: cd.json())))
                } else {
                    published.append(("message.client_rejected", EventJSON.clientRejected(messageID: version, token: d.token, at: now,
                                                                                            code: code ?? 0)))
                }
                touched.append(deviceID)
                settled.append(version)
                madeRoom = madeRoom || wasSent
            }
            guard !settled.isEmpty else { return nil }
            s.realClients.values[ci].connection?.lastFrameAt = now
            var orders = ClientOrders()
            var changes: [(Int64, String)] = []
            var fired: [(delivery: Int64, fault: String)] = []
            if madeRoom {
                fired = flushHeld(of: clientID, now: now, orders: &orders, updates: &updates, changes: &changes, events: &published, state: &s)
            }
            let writes = clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
            // The acknowledged deliveries' inboxes changed, and those of the client's devices when
            // what it held was written (or expired) too.
            if updates.count > settled.count || !changes.isEmpty { touched += s.carried(by: s.realClients.values[ci]) }
            if !orders.writes.isEmpty || !changes.isEmpty, !store.isCommittingHere {
                // What waited for room is written now: committed first, as every write that is
                // not a send's, so a read of its record once the client has it finds it `sent`.
                // (Not from within a commit, a send's write that found its acknowledgement in:
                // no other commit could start while this one waits.)
                return (orders, submit(writes))
            }
            // Nobody waits for an acknowledgement's commit (the client is answered nothing): it
            // rides the next commit, and its events and long polls follow that commit.
            let (events, late, devices) = (published, reached, touched)
            submitRiding(writes) { [self] error in
                if error == nil {
                    self.events.publish(events)
                    reachedLate(late)
                }
                notifyChanged(devices: devices)
            }
            return (orders, nil)
        }
        guard let (orders, ticket) = result else { return ([], ClientOrders()) }
        if let ticket {
            // A write that cannot be recorded is not made (the store's recovery takes it from here).
            do throws(EngineError) { try commitControl(ticket) } catch { return (settled, ClientOrders()) }
            events.publish(published)
            reachedLate(reached)
        }
        return (settled, orders)
    }

    /// Deliveries a real client acknowledged (committed): they reached their device now, as a
    /// held one does when its device comes online (the XMPP room's delivery receipts wait for it).
    func reachedLate(_ ids: [Int64]) {
        guard !ids.isEmpty else { return }
        lateDeliveries.withLock { $0 }?.call(ids)
    }

    /// Writes nobody waits for (a client's acknowledgement): queued for the next commit, a send's
    /// or a control call's, so they cost no transaction of their own while sends flow; when none
    /// comes within `ridingCommitMillis`, they are committed on their own then.
    func submitRiding(_ ops: [WriteOp], completion: @escaping @Sendable (StoreError?) -> Void) {
        submit(ops, wakeWriter: false, completion: completion)
        guard !ridingCommitDue.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(ridingCommitMillis)) { [weak self] in
            guard let self else { return }
            ridingCommitDue.store(false, ordering: .releasing)
            store.commitQueued()
        }
    }

    /// A frame came from the client (`heartbeat`: a ping of its protocol's own).
    public func clientActive(clientID: String, connectionID: String, heartbeat: Bool) {
        let now = clock.nowMillis()
        state.withLock { s in
            guard s.realClients[clientID]?.connection?.info.id == connectionID else { return }
            s.realClients[clientID]?.connection?.lastFrameAt = now
            if heartbeat { s.realClients[clientID]?.connection?.lastHeartbeatAt = now }
        }
    }

    // MARK: The connection's end

    /// Connection `connectionID` of a client closed (`reason`, as the room says): its devices go
    /// offline, what it had unacknowledged is held again (or expired), `client.closed` is
    /// published. When the client has another connection by now (a newer login replaced this
    /// one), only `client.closed` is published: the newer connection carries its devices. One the
    /// control API disconnected was closed here already (`disconnectClient`): nothing more.
    public func clientClosed(clientID: String, connectionID: String, code: Int, reason: String) {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        let ticket: Store.Ticket? = state.withLock { s in
            if s.closedAhead.remove(connectionID) != nil { return nil }
            guard let client = s.realClients[clientID] else { return nil }
            guard let conn = client.connection, conn.info.id == connectionID else {
                published.append(("client.closed", EventJSON.clientClosed(client: s.renderClient(client), connectionID: connectionID,
                                                                          code: code, reason: reason, at: now)))
                return nil
            }
            let writes = connectionEnded(client, conn, code: code, reason: reason, now: now, events: &published, state: &s)
            return writes.isEmpty ? nil : submit(writes)
        }
        if let ticket { try? commitControl(ticket) }
        events.publish(published)
    }

    /// A connection that closed before it named its client (before autopush's `hello`, before an
    /// MCS login was accepted; hostile input among them): `client.closed` all the same, its
    /// `client` with `id` null (`EngineState.unnamedClient`). Nothing else changes.
    public func unnamedClientClosed(kind: ClientKind, connectionID: String, userAgent: String?, code: Int, reason: String) {
        guard events.hasReaders else { return }
        let client = EngineState.unnamedClient(kind: kind, userAgent: userAgent)
        events.publish([("client.closed", EventJSON.clientClosed(client: client, connectionID: connectionID, code: code, reason: reason,
                                                                  at: clock.nowMillis()))])
    }

    /// What a connection's end changes: the client without it, its devices offline, what was
    /// unacknowledged held again (or expired, or dropped), `client.closed`; the store's writes.
    private func connectionEnded(_ client: RealClient, _ conn: ClientConnection, code: Int, reason: String, now: Int64,
                                 events published: inout [(String, String)], state s: inout EngineState) -> [WriteOp] {
        let clientID = client.row.id, connectionID = conn.info.id
        var client = client
        client.connection = nil
        s.realClients[clientID] = client
        var writes: [WriteOp] = []
        var changes: [(Int64, String)] = []
        var dropped: [ClientDeliveryUpdate] = []
        for deliveryID in conn.unacked {
            requeue(deliveryID, now: now, changes: &changes, dropped: &dropped, events: &published, state: &s)
        }
        s.forgetAcknowledged(clientID: clientID)
        for deviceID in s.carried(by: client) {
            guard var d = s.devices[deviceID], d.online else { continue }
            d.online = false
            d.lastSeenAt = now
            s.devices[deviceID] = d
            writes.append(Writes.setOnline(device: deviceID, false, at: now, flushHeld: false))
        }
        writes += clientDeliveryWrites(changes: changes, updates: dropped, at: now)
        published.append(("client.closed", EventJSON.clientClosed(client: s.renderClient(client), connectionID: connectionID,
                                                                  code: code, reason: reason, at: now)))
        return writes
    }

    /// `PATCH {"online"}` on a real client's device: held offline while its client stays
    /// connected (the client is not told), or released, what it held written at once.
    func setClientDeviceOnline(_ token: String, _ online: Bool) throws(EngineError) -> Device {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        var orders = ClientOrders()
        let result: Result<(Device, Store.Ticket), EngineError> = state.withLock { s in
            guard var d = s.device(token: token), var link = d.client else { return .failure(.notFound("device '\(token)' does not exist")) }
            link.held = !online
            d.client = link
            // The client whose connection carries it (an FCM registration's: its subscription's).
            let carrier = s.carrier(of: d)
            d.online = online && carrier?.connection != nil
            d.lastSeenAt = now
            s.devices[d.id] = d
            var writes = [Writes.setOnline(device: d.id, d.online, at: now, flushHeld: false), Writes.setDeviceClient(device: d.id, link.stored)]
            var updates: [ClientDeliveryUpdate] = []
            var changes: [(Int64, String)] = []
            var fired: [(delivery: Int64, fault: String)] = []
            if d.online, let carrier {
                fired = flushHeld(of: carrier.row.id, now: now, orders: &orders, updates: &updates, changes: &changes, events: &published,
                                  state: &s)
            }
            writes += clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
            published.insert(("device.updated", s.render(d, now: now)), at: 0)
            return .success((d, submit(writes)))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        events.publish(published)
        dispatch(orders)
        return device
    }

    // MARK: Reading

    /// The clients (`kind`, `connected` when given), oldest first, as the control API shows them.
    public func clients(kind: ClientKind?, connected: Bool?) -> [String] {
        state.withLock { s in
            s.realClients.values
                .filter { c in (kind == nil || c.kind == kind) && (connected == nil || (c.connection != nil) == connected) }
                .sorted { ($0.row.createdAt, $0.row.id) < ($1.row.createdAt, $1.row.id) }
                .map { s.renderClient($0) }
        }
    }

    /// One client as the control API shows it.
    public func client(_ id: String) throws(EngineError) -> String {
        let found = state.withLock { s in s.realClients[id].map { s.renderClient($0) } }
        guard let found else { throw .notFound("client '\(id)' does not exist") }
        return found
    }

    /// A client's open connection's id, and its kind.
    func clientConnection(_ id: String) throws(EngineError) -> (kind: ClientKind, connectionID: String?) {
        let found = state.withLock { s in s.realClients[id].map { ($0.kind, $0.connection?.info.id) } }
        guard let found else { throw .notFound("client '\(id)' does not exist") }
        return found
    }

    /// Closes a client's connection (`backoff`: tell it to stay away); false when it has none.
    /// The client shows it closed on return (its devices offline, what was unacknowledged held
    /// again, `client.closed` published); the room closes the socket after, and its report of
    /// the close changes nothing more.
    public func disconnectClient(_ id: String, backoff: Bool) throws(EngineError) -> Bool {
        let now = clock.nowMillis()
        let reason = backoff ? "disconnected by the control API, with back-off" : "disconnected by the control API"
        var published: [(String, String)] = []
        let found: (ClientClose, Store.Ticket?)? = try state.withLock { s throws(EngineError) in
            guard let client = s.realClients[id] else { throw .notFound("client '\(id)' does not exist") }
            guard let conn = client.connection else { return nil }
            // The close code the room sends: autopush's (4774 with back-off), none over MCS.
            let code = client.kind == .autopush ? (backoff ? 4774 : 1000) : 0
            let writes = connectionEnded(client, conn, code: code, reason: reason, now: now, events: &published, state: &s)
            s.closedAhead.insert(conn.info.id)
            return (ClientClose(transport: client.kind, clientID: id, connectionID: conn.info.id, backoff: backoff, reason: reason),
                    writes.isEmpty ? nil : submit(writes))
        }
        guard let (close, ticket) = found else { return false }
        // Memory has the connection closed: the socket closes and the event goes out whatever
        // the store says (a failure is still the answer).
        defer {
            events.publish(published)
            dispatch(ClientOrders(close: [close]))
        }
        if let ticket { try commitControl(ticket) }
        return true
    }

    /// Forgets a client with its devices (their subscriptions gone) and closes its connection.
    @discardableResult
    public func deleteClient(_ id: String) throws(EngineError) -> String? {
        let (tokens, connection, kind): ([String], String?, ClientKind) = try state.withLock { s throws(EngineError) in
            guard let c = s.realClients[id] else { throw .notFound("client '\(id)' does not exist") }
            return (c.devices.compactMap { s.devices[$0]?.token }, c.connection?.info.id, c.kind)
        }
        // Its devices go (the FCM registrations made over them are unregistered: their
        // subscription is gone), and their tokens answer NotRegistered from now on.
        for t in tokens { try deleteDevice(t) }
        let now = clock.nowMillis()
        let reason = "the client was deleted"
        let (ticket, closed) = state.withLock { s -> (Store.Ticket, String?) in
            var closed: String?
            if var c = s.realClients.removeValue(forKey: id), let conn = c.connection {
                for d in conn.unacked { s.forgetClientDelivery(d) }
                // As a connection's end shows it (the room's own report of the close finds no client).
                c.connection = nil
                closed = EventJSON.clientClosed(client: s.renderClient(c), connectionID: conn.info.id, code: kind == .autopush ? 1000 : 0,
                                                reason: reason, at: now)
            }
            for (token, r) in s.gcmRegistrations where r.client == id { s.gcmRegistrations[token] = nil }
            s.gcmRegistrationKeys = s.gcmRegistrationKeys.filter { s.gcmRegistrations[$0.value] != nil }
            s.forgetAcknowledged(clientID: id)
            s.retiredTokens.formUnion(tokens)
            return (submit([Writes.deleteClients([id]), Writes.retireTokens(tokens)]), closed)
        }
        try commitControl(ticket)
        if let closed { events.publish([("client.closed", closed)]) }
        if let connection {
            dispatch(ClientOrders(close: [ClientClose(transport: kind, clientID: id, connectionID: connection, reason: reason)]))
        }
        return connection
    }

    /// What a relayed push carries, read back from its record when memory no longer has it (after
    /// a restart).
    public func clientRecordPayload(of deliveryID: Int64) -> ClientPayload {
        let platforms = (try? store.read { (c: StoreReader) throws(StoreError) in try c.inboxRow(deliveryID) })??.platforms
        return ClientPayload(webPushBlock: platforms.flatMap(EffectivePayload.storedPlatforms)?.webpush)
    }

    /// Counts for health: open connections by kind, clients by kind.
    public func clientCounts() -> (connections: [ClientKind: Int], clients: [ClientKind: Int]) {
        state.withLock { s in
            var connections: [ClientKind: Int] = [:], clients: [ClientKind: Int] = [:]
            for c in s.realClients.values {
                clients[c.kind, default: 0] += 1
                if c.connection != nil { connections[c.kind, default: 0] += 1 }
            }
            return (connections, clients)
        }
    }
}

extension EngineState {
    /// The devices whose pushes `client`'s connection carries: its own, and the FCM
    /// registrations made over them.
    func carried(by client: RealClient) -> [Int64] {
        var ids = client.devices
        for d in client.devices { ids += fcmRiders[d] ?? [] }
        return ids
    }

    /// Keeps the last deliveries a client acknowledged, so a nack after an ack 100 finds them.
    mutating func rememberAcknowledged(_ deliveryID: Int64, clientID: String) {
        // Changed in place, so the array is not copied; the oldest leave 32 at a time.
        guard let i = acknowledged.index(forKey: clientID) else {
            acknowledged[clientID] = [deliveryID]
            return
        }
        acknowledged.values[i].append(deliveryID)
        guard acknowledged.values[i].count > 2 * maxUnackedPerConnection + 32 else { return }
        let gone = Array(acknowledged.values[i].prefix(32))  // a copy: the list is changed in place below
        acknowledged.values[i].removeFirst(32)
        for id in gone { forgetClientDelivery(id) }
    }

    mutating func forgetAcknowledged(clientID: String) {
        for d in acknowledged.removeValue(forKey: clientID) ?? [] { forgetClientDelivery(d) }
    }

    /// The delivery a login names as received (`received_persistent_id`), among devices `own`: one
    /// written before (its record says so, after a restart too: `ClientDelivery.restored`) and
    /// still unsettled: held by its device, or on the connection the login replaces (`onWire`).
    /// One never written (held all along, or its write delayed by a fault) is not the client's
    /// to settle; one settled since (expired, collapsed, deleted) stays so.
    func receivedDelivery(_ mid: MessageID, _ version: String, among own: Set<Int64>, onWire: [Int64]) -> (Int64, ClientDelivery)? {
        guard let deviceID = clientDeliveryDevice[mid.micros], own.contains(deviceID), let cd = clientDeliveries[mid.micros],
              cd.version == version, cd.sends > 0,
              onWire.contains(mid.micros) || stored[deviceID]?.contains(where: { $0.deliveryID == mid.micros }) == true else { return nil }
        return (deviceID, cd)
    }

    /// Delivery `deliveryID` of device `d`, whose channel went (`d` nil: the device is gone):
    /// `dropped`, as what the channel held, its record saying why (`updates`), `message.dropped`
    /// published (`events`), and forgotten here.
    mutating func dropForGoneChannel(_ deliveryID: Int64, of d: Device?, now: Int64, updates: inout [ClientDeliveryUpdate],
                                     events: inout [(String, String)]) {
        forgetClientDelivery(deliveryID)
        updates.append(ClientDeliveryUpdate(id: deliveryID, status: "dropped", deliveredAt: nil, stored: ClientDelivery.droppedJSON))
        guard let d else { return }
        events.append(("message.dropped", EventJSON.delivery(
            messageID: MessageID(micros: deliveryID, suffix: messageIDSuffix(senderID: d.senderID)).description,
            token: d.token, status: "dropped", at: now)))
    }

    mutating func forgetClientDelivery(_ deliveryID: Int64) {
        clientDeliveries[deliveryID] = nil
        clientDeliveryDevice[deliveryID] = nil
        clientPayloads[deliveryID] = nil
    }
}

extension EventJSON {
    /// `client.closed`: the client (as the clients API shows it), the connection, the close's code
    /// and reason.
    static func clientClosed(client: String, connectionID: String, code: Int, reason: String, at: Int64) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("client"); w.raw(client)
        w.key("connection_id"); w.value(connectionID)
        w.key("code"); w.value(Int64(code))
        w.key("reason"); w.value(reason)
        w.key("at"); w.value(rfc3339(millis: at))
        w.endObject()
        return w.string
    }

    /// A delivery event of a real client's delivery: with its `client_delivery`.
    static func clientDelivery(messageID: String, token: String?, status: String, at: Int64, clientDelivery: String) -> String {
        delivery(messageID: messageID, token: token, status: status, at: at) { w in
            w.key("client_delivery"); w.raw(clientDelivery)
        }
    }

    /// `message.client_rejected`: the client's code.
    static func clientRejected(messageID: String, token: String?, at: Int64, code: Int) -> String {
        delivery(messageID: messageID, token: token, status: "client_rejected", at: at) { w in
            w.key("client_code"); w.value(Int64(code))
        }
    }
}
