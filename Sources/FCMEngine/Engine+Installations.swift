// Long because: Firebase installations (their tokens), the FCM registrations made with them (web
// devices travelling over a Web Push subscription), and the encrypted payload such a device is
// sent share one lock and one set of rules.
import FCMCore
public import FCMModel
public import FCMStore
import Platform


extension Engine {
    /// How FCM registrations' pushes are encrypted (`name`: the encoding, as `client_delivery`
    /// shows it).
    public func setRelayEncryption(name: String, _ encrypt: @escaping RelayEncryption) {
        relayEncryption.withLock { $0 = (name, encrypt) }
    }

    /// What an FCM registration is sent for a message, before it is encrypted.
    public func setRelayPayload(_ make: @escaping RelayPayload) {
        relayPayload.withLock { $0 = make }
    }

    // MARK: Installations

    /// A new installation: keeps `fid` when it is well formed and no other device has it, else
    /// makes one; `tokens` (the room's) either way.
    public func createInstallation(project: String, fid: String?, appID: String, tokens: InstallationTokens) throws(FirebaseRefusal)
        -> InstallationRow {
        let now = clock.nowMillis()
        let result: Result<(InstallationRow, Store.Ticket), FirebaseRefusal> = state.withLock { s in
            guard let p = s.project(named: project) else { return .failure(.unknownProject) }
            var id = fid ?? ""
            let taken = s.fidIndex[id] != nil && s.installations[id] == nil
            if !InstallationID.isWellFormed(id) || taken || (s.installations[id].map { $0.senderID != p.senderID } ?? false) {
                id = s.newInstallationID()
                while s.installations[id] != nil { id = s.newInstallationID() }
            }
            if let old = s.installations[id] { s.keepEarlierAuth(old, now: now) }
            let row = InstallationRow(fid: id, senderID: p.senderID, appID: appID, refreshToken: tokens.refresh,
                                      authToken: tokens.auth, authExpiresAt: now + tokens.authSeconds * 1000,
                                      createdAt: s.installations[id]?.createdAt ?? now)
            s.installations[id] = row
            s.installationAuth[row.authToken] = id
            return .success((row, submit([Writes.saveInstallation(row)])))
        }
        let (row, ticket) = try result.get()
        do throws(EngineError) { try commitControl(ticket) } catch { throw .failed }
        return row
    }

    /// A new auth token for installation `fid` (the auth token of `tokens`, the room's), for the
    /// fid's refresh token.
    public func refreshInstallation(project: String, fid: String, refreshToken: String, tokens: InstallationTokens) throws(FirebaseRefusal)
        -> InstallationRow {
        let now = clock.nowMillis()
        let result: Result<(InstallationRow, Store.Ticket), FirebaseRefusal> = state.withLock { s in
            guard let p = s.project(named: project) else { return .failure(.unknownProject) }
            guard var row = s.installations[fid], row.senderID == p.senderID, row.refreshToken == refreshToken else {
                return .failure(.unauthenticated("the refresh token is not this installation's"))
            }
            s.keepEarlierAuth(row, now: now)
            row.authToken = tokens.auth
            row.authExpiresAt = now + tokens.authSeconds * 1000
            s.installations[fid] = row
            s.installationAuth[row.authToken] = fid
            return .success((row, submit([Writes.saveInstallation(row)])))
        }
        let (row, ticket) = try result.get()
        do throws(EngineError) { try commitControl(ticket) } catch { throw .failed }
        return row
    }

    /// Forgets installation `fid`; its FCM registrations are deleted.
    public func deleteInstallation(project: String, fid: String, refreshToken: String) throws(FirebaseRefusal) {
        let tokens: [String] = try state.withLock { s throws(FirebaseRefusal) in
            guard let p = s.project(named: project) else { throw .unknownProject }
            guard let row = s.installations[fid], row.senderID == p.senderID, row.refreshToken == refreshToken else {
                throw .unauthenticated("the refresh token is not this installation's")
            }
            s.installations[fid] = nil
            s.installationAuth[row.authToken] = nil
            s.earlierAuth = s.earlierAuth.filter { $0.value.fid != fid }
            return s.devices.values.filter { $0.client?.kind == .fcm && $0.client?.id == fid && $0.state == .registered }.map(\.token)
        }
        // Its FCM registrations end as a DELETE of each would end them: unregistered, so sends
        // to them answer NotRegistered (not forgotten, which would register them as new tokens).
        for t in tokens { _ = try? unregister(t) }
        let ticket = state.withLock { _ in submit([Writes.deleteInstallation(fid)]) }
        do throws(EngineError) { try commitControl(ticket) } catch { throw .failed }
    }

    /// The installation an auth token stands for, of project `project`.
    func installation(auth: String, project: Project, now: Int64, state s: EngineState) -> Result<InstallationRow, FirebaseRefusal> {
        let current = s.installationAuth[auth].flatMap { s.installations[$0] }.flatMap { $0.authExpiresAt > now ? $0 : nil }
        let earlier = s.earlierAuth[auth].flatMap { $0.expiresAt > now ? s.installations[$0.fid] : nil }
        guard let row = current ?? earlier else { return .failure(.missingAuthToken) }
        guard row.senderID == project.senderID else {
            return .failure(.permissionDenied("the installation belongs to another project"))
        }
        return .success(row)
    }

    // MARK: FCM registrations

    /// An FCM registration (the FCM registrations room's): a `web` device of the project for the
    /// installation's app, reached by FCM's sends, whose pushes travel encrypted over the
    /// subscription `subscriptionID` (the room read it from the registration's endpoint). The
    /// same installation and endpoint again: the same token, its keys replaced. A new
    /// registration's token is `newToken(fid)`'s (the room's form), made again while another
    /// device has it. `token` (a PATCH of that registration): that registration gets `web`,
    /// whichever subscription it named before, and keeps its token.
    public func fcmRegister(project: String, auth: String, web: FCMWebRegistration, subscriptionID: String, token given: String? = nil,
                            newToken: (_ fid: String) -> String) throws(FirebaseRefusal) -> Device {
        guard let p256dh = webPushOps?.publicKey(web.p256dh) else { throw .invalidField(.p256dh) }
        guard let authSecret = webPushOps?.authSecret(web.auth) else { throw .invalidField(.auth) }
        if let k = web.applicationPubKey, applicationServerKey(k) == nil { throw .invalidField(.applicationPubKey) }
        let now = clock.nowMillis()
        var created = false
        // A PATCH that moves it onto a connected subscription: what it held, to write there.
        var moved = ClientOrders()
        var published: [(String, String)] = []
        var displaced: [Device] = []
        let result: Result<(Device, Store.Ticket), FirebaseRefusal> = state.withLock { s in
            guard let p = s.project(named: project) else { return .failure(.unknownProject) }
            let inst: InstallationRow
            switch installation(auth: auth, project: p, now: now, state: s) {
            case .failure(let e): return .failure(e)
            case .success(let i): inst = i
            }
            guard let viaID = s.webPushIndex[subscriptionID], let via = s.devices[viaID], via.state == .registered else {
                return .failure(.invalidField(.endpoint))
            }
            // One deleted (or whose subscription went) is a record now: registering again makes a new token.
            let isOwn = { (d: Device) in d.client?.kind == .fcm && d.client?.id == inst.fid && d.state == .registered }
            let existing: Device?
            if let given {
                guard let d = s.device(token: given), isOwn(d) else { return .failure(.notFound) }
                existing = d
            } else {
                existing = s.devices.values.first { isOwn($0) && $0.client?.via == viaID }
            }
            let (formerVia, wasOnline) = (existing?.client?.via, existing?.online)
            // A PATCH onto an endpoint this installation has another registration for takes that
            // one's place (one registration per installation and endpoint): it is unregistered
            // here, before anything it held could be written below.
            if given != nil, let existing, formerVia != viaID {
                for var other in (s.fcmRiders[viaID] ?? []).compactMap({ s.devices[$0] }) where isOwn(other) && other.id != existing.id {
                    other.state = .unregistered
                    other.lastSeenAt = now
                    s.devices[other.id] = other
                    s.fidFollowsLiveRegistration(leaving: other)
                    displaced.append(other)
                }
            }
            var d: Device
            if let existing {
                d = existing
            } else {
                var token = newToken(inst.fid)
                while s.tokenIndex[token] != nil { token = newToken(inst.fid) }
                let spec = DeviceSpec(token: token, senderID: p.senderID, app: inst.appID, platform: .web, online: false, fid: nil)
                guard case .success((let made, true)) = placeDevice(spec, in: &s, now: now, relayed: true) else {
                    return .failure(.failed)
                }
                d = made
                // The installation's fid: the device answers for it (v1's `message.fid`).
                if s.fidIndex[d.fid] == d.id { s.fidIndex[d.fid] = nil }
                d.fid = inst.fid
                // `message.fid` names the installation's live registration: this one, unless an
                // older one still takes sends.
                if s.fidIndex[inst.fid].flatMap({ s.devices[$0] })?.state != .registered { s.fidIndex[inst.fid] = d.id }
                created = true
            }
            var link = DeviceClient(kind: .fcm, id: inst.fid, channelID: nil)
            link.appID = inst.appID
            link.endpoint = web.endpoint
            link.via = viaID
            link.web = web.asSent
            // The control API's hold stays: the client is not told of it, and registering again
            // does not lift it.
            link.held = existing?.client?.held ?? false
            d.client = link
            // Online while the client its subscription travels over is connected and nothing holds
            // it, as at that client's login: a hold (`PATCH {"online":false}`) is each device's own.
            d.online = !link.held && s.carrier(of: d)?.connection != nil
            if let wasOnline, wasOnline != d.online { d.lastSeenAt = now }
            s.devices[d.id] = d
            if var sub = s.webPush[d.id] {
                s.webPushIndex[sub.id] = nil
                sub.publicKey = p256dh
                sub.auth = authSecret
                sub.applicationServerKey = web.applicationPubKey.flatMap { applicationServerKey($0) }
                sub.endpointOverride = web.endpoint
                s.webPush[d.id] = sub
            }
            // Over another subscription now (a PATCH naming another endpoint): its pushes travel
            // with that one, and end with it.
            if formerVia != viaID {
                if let formerVia { s.fcmRiders[formerVia]?.removeAll { $0 == d.id } }
                s.fcmRiders[viaID, default: []].append(d.id)
            }
            var writes = created ? deviceWrites([d], state: s)
                : [Writes.setDeviceClient(device: d.id, link.stored)] + (s.webPush[d.id].map { [Writes.saveWebPush([$0.row])] } ?? [])
            writes += displaced.map { Writes.unregister(device: $0.id, at: now) }
            if let wasOnline, wasOnline != d.online { writes.append(Writes.setOnline(device: d.id, d.online, at: now, flushHeld: false)) }
            if (formerVia != nil && formerVia != viaID) || wasOnline == false, d.online, let carrier = s.carrier(of: d) {
                // Moved onto a connected subscription, or online again: what it held goes out on
                // that connection now.
                var updates: [ClientDeliveryUpdate] = []
                var changes: [(Int64, String)] = []
                let fired = flushHeld(of: carrier.row.id, now: now, orders: &moved, updates: &updates, changes: &changes, events: &published,
                                      state: &s)
                writes += clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
            }
            return .success((d, submit(writes + (created ? [Writes.setDeviceClient(device: d.id, link.stored)] : []))))
        }
        let (device, ticket) = try result.get()
        do throws(EngineError) { try commitControl(ticket) } catch { throw .failed }
        if created, events.hasReaders { events.publish([("device.created", renderDevice(device))]) }
        events.publish(published)
        dispatch(moved)
        if events.hasReaders, !displaced.isEmpty {
            events.publish(state.withLock { s in displaced.map { ("device.updated", s.render($0, now: now)) } })
        }
        return device
    }

    /// Whether `auth` is a live auth token of an installation of `project`: who calls is checked
    /// before what the call carries (401 before 400, as Google answers).
    public func fcmAuthenticate(project: String, auth: String) throws(FirebaseRefusal) {
        let now = clock.nowMillis()
        try state.withLock { s throws(FirebaseRefusal) in
            guard let p = s.project(named: project) else { throw .unknownProject }
            if case .failure(let e) = installation(auth: auth, project: p, now: now, state: s) { throw e }
        }
    }

    /// An FCM registration by token, for its installation's auth token.
    public func fcmRegistration(project: String, auth: String, token: String) throws(FirebaseRefusal) -> (Device, WebPushSubscription) {
        let now = clock.nowMillis()
        return try state.withLock { s throws(FirebaseRefusal) in
            guard let p = s.project(named: project) else { throw .unknownProject }
            let inst: InstallationRow
            switch installation(auth: auth, project: p, now: now, state: s) {
            case .failure(let e): throw e
            case .success(let i): inst = i
            }
            guard let d = s.device(token: token), d.client?.kind == .fcm, d.client?.id == inst.fid, d.state == .registered,
                  let sub = s.webPush[d.id] else {
                throw .notFound
            }
            return (d, sub)
        }
    }

    /// The FCM registrations that travel over devices `ids` (their Web Push subscriptions)
    /// become `unregistered` with them: nothing can reach them any more. Called after the change
    /// that ended the subscriptions is committed.
    func unregisterRiders(of ids: [Int64]) {
        let riders = state.withLock { s in
            ids.flatMap { s.fcmRiders[$0] ?? [] }.compactMap { s.devices[$0] }.filter { $0.state == .registered }.map(\.token)
        }
        for t in riders { _ = try? unregister(t) }
    }

    // MARK: What an FCM registration is sent

    /// The encrypted push for FCM registration write `w`: the FCM registrations room's text for
    /// the message (`setRelayPayload`), encrypted by the Web Push room's function
    /// (`setRelayEncryption`) for the registration's keys; the same bytes again for a delivery
    /// written before. The entry's `client_delivery` keeps the plaintext. A write whose
    /// transport is `fcm` is one for a fake web device's subscription (`place`): the Web Push
    /// room takes it there as a push.
    public func fcmRelay(for w: ClientWrite) -> FCMRelay? {
        guard let mid = MessageID(w.version) else { return nil }
        if let kept = state.withLock({ $0.clientDeliveries[mid.micros]?.relay }) { return kept }
        guard let entry = w.entry ?? (try? inboxEntry(w.deviceToken, messageID: w.version)),
              let encryption = relayEncryption.withLock({ $0 }), let make = relayPayload.withLock({ $0 }) else { return nil }
        let r = entry.row
        let effective = Render.effective(r, platform: .web, blocks: rooms.recordBlocks)
        let device = try? device(w.deviceToken)
        let sent = r.platforms.flatMap(EffectivePayload.storedPlatforms)?.webpush
        let plaintext = make(effective.objectValue?["webpush"]?.objectValue, sent, device?.senderID ?? "", r.collapseKey, w.version)
        let keys = state.withLock { s in device.flatMap { s.webPush[$0.id] } }
        guard let keys, let sealed = encryption.encrypt(Array(plaintext.utf8), keys.publicKey, keys.auth) else { return nil }
        let relay = FCMRelay(body: sealed.body, salt: sealed.salt, dh: sealed.dh)
        let now = clock.nowMillis()
        state.withLock { s in
            // Kept for a real client's redelivery only: one handed to a fake device's
            // subscription is written once.
            if var cd = s.clientDeliveries[mid.micros] {
                cd.relay = relay
                cd.plaintext = plaintext
                cd.encryption = encryption.name
                cd.via = w.token
                s.clientDeliveries[mid.micros] = cd
                // The entry shows them while `sent` too: recorded before the write that carries
                // them (an acknowledgement's record comes after it).
                // Only while it is on the connection: one whose connection closed meanwhile is
                // `pending` again, and stays so.
                guard cd.ack == nil, cd.rejection == nil, cd.sends > 0,
                      s.realClients[w.clientID]?.connection?.unacked.contains(mid.micros) == true else { return }
                let update = ClientDeliveryUpdate(id: mid.micros, status: "sent", deliveredAt: nil, stored: cd.stored())
                let device = s.clientDeliveryDevice[mid.micros]
                submitRiding([Writes.setClientDeliveries([update], settledAt: now)]) { [self] _ in
                    if let device { notifyChanged(devices: [device]) } else { notifyChanged() }
                }
            }
        }
        return relay
    }
}

extension EngineState {
    /// Installation `row`'s auth token, being replaced, stays good until it expires (a new one
    /// does not revoke it); those that have expired go.
    mutating func keepEarlierAuth(_ row: InstallationRow, now: Int64) {
        installationAuth[row.authToken] = nil
        earlierAuth = earlierAuth.filter { $0.value.expiresAt > now }
        if row.authExpiresAt > now { earlierAuth[row.authToken] = (row.fid, row.authExpiresAt) }
    }
}
