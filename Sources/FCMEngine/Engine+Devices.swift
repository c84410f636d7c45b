public import FCMModel
import FCMCore
import FCMStore
import Platform

extension DeviceSpec {
    /// Whether `d` is the device this spec declares (a fixture's device that may have changed
    /// since: online flag, state; never its token, project, app or platform).
    func matches(_ d: Device) -> Bool {
        token == d.token && senderID == d.senderID && platform == d.platform && (app == nil || app == d.app)
    }
}

extension Engine {
    // MARK: Devices

    /// Creates a device. With `idempotent` (fixtures), an existing token is left as it is.
    @discardableResult
    public func createDevice(_ spec: DeviceSpec, idempotent: Bool = false) throws(EngineError) -> Device {
        let (device, ticket) = try createDeviceQueued(spec, idempotent: idempotent)
        if let ticket {
            try commitControl(ticket)
            if events.hasReaders { events.publish([("device.created", renderDevice(device))]) }
        }
        return device
    }

    /// `createDevice` without waiting for the commit.
    func createDeviceQueued(_ spec: DeviceSpec, idempotent: Bool) throws(EngineError) -> (Device, Store.Ticket?) {
        if let t = spec.token, !isWellFormedToken(t) { throw Self.malformedToken }
        if let f = spec.fid, !InstallationID.isWellFormed(f) { throw .badRequest(InstallationID.malformedMessage) }
        let now = clock.nowMillis()
        let result: Result<(Device, Store.Ticket?), EngineError> = state.withLock { s in
            switch placeDevice(spec, in: &s, now: now) {
            case .failure(let e): return .failure(e)
            case .success((let d, true)): return .success((d, submit(deviceWrites([d], state: s))))
            case .success((let d, false)):
                return idempotent ? .success((d, nil)) : .failure(.conflict("device '\(d.token)' already exists"))
            }
        }
        return try result.get()
    }

    /// Fixture devices, under one lock and one write: an existing token is left as it is. The
    /// first device refused, if any, with its index; those before it are queued all the same.
    /// Every device that answers for a fixture device is remembered with the spec's place in the
    /// fixtures' device list (`EngineState.fixtureDevices`: the documents' devices in the order
    /// they are applied, one call per document), so a reset can put it back.
    func createDevicesQueued(_ specs: [DeviceSpec]) -> (failure: (Int, EngineError)?, ticket: Store.Ticket?) {
        if let i = specs.firstIndex(where: { $0.token.map { !isWellFormedToken($0) } ?? false }) {
            return ((i, Self.malformedToken), nil)
        }
        if let i = specs.firstIndex(where: { $0.fid.map { !InstallationID.isWellFormed($0) } ?? false }) {
            return ((i, .badRequest(InstallationID.malformedMessage)), nil)
        }
        let now = clock.nowMillis()
        return state.withLock { s in
            var created: [Device] = []
            var failure: (Int, EngineError)?
            let first = s.fixtureSpecCount
            s.fixtureSpecCount += specs.count
            for (i, spec) in specs.enumerated() {
                switch placeDevice(spec, in: &s, now: now) {
                case .failure(let e): failure = (i, e)
                case .success((let d, let new)):
                    if new { created.append(d) }
                    if spec.matches(d) { s.fixtureDevices[d.id] = Int32(first + i) }
                }
                if failure != nil { break }
            }
            return (failure, created.isEmpty ? nil : submit(deviceWrites(created, state: s)))
        }
    }

    private static let malformedToken = EngineError.badRequest("token must be 1 to \(maxTokenLength) characters of A-Z a-z 0-9 - _ : .")

    /// Adds the device `spec` asks for to `s` (a generated token when it gives none); the one
    /// that has that token already, with false, when there is one.
    /// `relayed`: a real browser's device, whose subscription's keys are the browser's (none made here).
    func placeDevice(_ spec: DeviceSpec, in s: inout EngineState, now: Int64, id: Int64? = nil,
                     relayed: Bool = false) -> Result<(Device, Bool), EngineError> {
        guard let project = s.projects[spec.senderID] else {
            return .failure(.badRequest("sender_id '\(spec.senderID)' is not a configured project"))
        }
        var rng = SystemRandomNumberGenerator()
        let token = spec.token ?? newRegistrationToken(using: &rng)
        if let existing = s.device(token: token) { return .success((existing, false)) }
        if let fid = spec.fid, let holder = s.device(fid: fid) {
            return .failure(.conflict("fid '\(fid)' already belongs to device '\(holder.token)'"))
        }
        if spec.apnsToken != nil || spec.apnsEnvironment != nil {
            guard spec.platform == .ios else { return .failure(.badRequest("apns_token and apns_environment are for ios devices only")) }
        }
        var serverKey: String?
        if let key = spec.applicationServerKey {
            guard spec.platform == .web else { return .failure(.badRequest("application_server_key is for web devices only")) }
            do throws(EngineError) { serverKey = try checkApplicationServerKey(key) } catch { return .failure(error) }
        }
        let apnsToken = spec.apnsToken?.lowercased()
        if let apnsToken {
            guard APNsDeviceToken.isWellFormed(apnsToken) else {
                return .failure(.badRequest("apns_token must be 64 to 200 hexadecimal characters, an even number"))
            }
            if let holder = s.apnsIndex[apnsToken].flatMap({ s.devices[$0] }) {
                return .failure(.conflict("apns_token already belongs to device '\(holder.token)'"))
            }
        }
        let app = spec.app
            ?? project.apps.first(where: { $0.platform == spec.platform })?.app
            ?? project.apps.first?.app ?? "unknown.app"
        let d = Device(id: id ?? s.nextDeviceID, token: token, fid: spec.fid ?? s.newInstallationID(), senderID: spec.senderID,
                       app: app, platform: spec.platform, state: spec.state, canonicalID: nil, online: spec.online,
                       createdAt: now, lastSeenAt: now, givenAPNsToken: apnsToken, apnsEnvironment: spec.apnsEnvironment ?? .sandbox)
        if d.platform == .web,
           !s.attachWebPush(newWebPushSubscription(device: d.id, applicationServerKey: serverKey, relayed: relayed, state: s)) {
            return .failure(.internal("no key pair could be made for the web device's push subscription"))
        }
        if id == nil { s.nextDeviceID += 1 }
        s.insert(d)
        return .success((d, true))
    }

    /// One device by token.
    public func device(_ token: String) throws(EngineError) -> Device {
        guard let d = state.withLock({ s in s.device(token: token) }) else {
            throw .notFound("device '\(token)' does not exist")
        }
        return d
    }

    /// One device by token or, failing that, by fid (the device that answers for the
    /// installation now).
    public func device(tokenOrFID key: String) throws(EngineError) -> Device {
        guard let d = state.withLock({ s in s.device(token: key) ?? s.device(fid: key) }) else {
            throw .notFound("device '\(key)' does not exist")
        }
        return d
    }

    /// Devices matching the filters, ordered by creation, after `afterID`.
    func devices(senderID: String?, app: String?, state wanted: DeviceState?, topic: String? = nil, afterID: Int64,
                        limit: Int) -> [Device] {
        devices(senderID: senderID, app: app, state: wanted, topic: topic, containing: nil, afterID: afterID, limit: limit).items
    }

    /// Devices matching the filters, ordered by creation, after `afterID`; `containing`: whose token,
    /// fid, app or sender id holds that text, ignoring case; `total`: how many match in all.
    /// `client`: real clients' devices only, of that kind, client and connection state.
    public func devices(senderID: String?, app: String?, state wanted: DeviceState?, topic: String?, containing: String?,
                        afterID: Int64, limit: Int, client: ClientFilter? = nil) -> (items: [Device], total: Int) {
        let needle = containing?.lowercased()
        return state.withLock { s in
            let matching = s.devices.values
                .filter { d in
                    (client == nil || client!.matches(d, state: s))
                        && (senderID == nil || d.senderID == senderID) && (app == nil || d.app == app)
                        && (wanted == nil || d.state == wanted)
                        && (topic == nil || s.topicSubscribers[Topics.key(topic!)]?.contains(d.id) == true)
                        && (needle == nil || [d.token, d.fid, d.app, d.senderID].contains { $0.lowercased().contains(needle!) })
                }
            let after = matching.filter { $0.id > afterID }.sorted { $0.id < $1.id }
            return (Array(after.prefix(limit)), matching.count)
        }
    }

    /// Token of a device id (for rendering deliveries).
    /// Those of devices `ids` that are real clients' (`client` set).
    func clientDevices<S: Sequence<Int64>>(among ids: S) -> Set<Int64> {
        state.withLock { s in Set(ids.filter { s.devices[$0]?.client != nil }) }
    }

    func tokens(for ids: [Int64]) -> [Int64: String] {
        state.withLock { s in
            var out: [Int64: String] = [:]
            for id in ids { if let d = s.devices[id] { out[id] = d.token } }
            return out
        }
    }

    /// Takes a device offline or brings it back; back online, everything it stored that has not
    /// expired is delivered in acceptance order (`undeliverable` when its app was uninstalled:
    /// unregistered meanwhile).
    public func setOnline(_ token: String, _ online: Bool) throws(EngineError) -> Device {
        if state.withLock({ $0.device(token: token)?.client != nil }) { return try setClientDeviceOnline(token, online) }
        let now = clock.nowMillis()
        var pendingEvents: [(String, String)] = []
        var deliveredIDs: [Int64] = []
        let result: Result<(Device, Store.Ticket?), EngineError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard d.online != online else { return .success((d, nil)) }
            d.online = online
            d.lastSeenAt = now
            let flush = online && s.stored[d.id] != nil
            var flushed: [(String, String)] = []
            var replaced: [StatusChange] = []
            // An uninstalled app (unregistered) gets nothing it was held: `undeliverable`.
            let uninstalled = d.state == .unregistered
            if online {
                let suffix = messageIDSuffix(senderID: d.senderID)
                for e in s.stored[d.id] ?? [] {
                    let status = e.expiresAt <= now ? "expired" : uninstalled ? "undeliverable" : "delivered"
                    if status == "delivered" { deliveredIDs.append(e.deliveryID) }
                    if uninstalled { replaced.append(StatusChange(deliveryID: e.deliveryID, status: status)) }
                    flushed.append(("message." + status, EventJSON.delivery(
                        messageID: MessageID(micros: e.deliveryID, suffix: suffix).description, token: d.token, status: status, at: now)))
                }
                if !uninstalled {
                    let shown = shownOnFlush(s.stored[d.id] ?? [], device: d, now: now, state: &s)
                    (replaced, flushed) = (shown.changes, flushed + shown.events)
                }
                s.stored[d.id] = nil
            }
            s.devices[d.id] = d
            let id = d.id
            pendingEvents = [("device.updated", s.render(d, now: now))] + flushed
            var writes = [Writes.setOnline(device: id, online, at: now, flushHeld: flush && !uninstalled)]
            if !replaced.isEmpty { writes.append(Writes.setDeliveryStatuses(replaced.map { ($0.deliveryID, $0.status) }, at: now)) }
            return .success((d, submit(writes)))
        }
        let (device, ticket) = try result.get()
        if let ticket {
            try commitControl(ticket)
            events.publish(pendingEvents)
            if !deliveredIDs.isEmpty { lateDeliveries.withLock { $0 }?.call(deliveredIDs) }
        }
        return device
    }

    /// The app was uninstalled: later sends get `NotRegistered` (APNs: `Unregistered` with this
    /// moment, the device's `last_seen_at`).
    public func unregister(_ token: String) throws(EngineError) -> Device {
        let now = clock.nowMillis()
        let result: Result<(Device, Store.Ticket), EngineError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            if d.state != .unregistered { d.lastSeenAt = now }
            d.state = .unregistered
            s.devices[d.id] = d
            if d.client?.kind == .fcm { s.fidFollowsLiveRegistration(leaving: d) }
            let (id, at) = (d.id, d.lastSeenAt)
            return .success((d, submit([Writes.unregister(device: id, at: at)])))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders { events.publish([("device.updated", renderDevice(device))]) }
        unregisterRiders(of: [device.id])
        return device
    }

    /// Rotates the token: returns the new device; sends to the old token reach it and report it as
    /// canonical.
    public func refresh(_ token: String) throws(EngineError) -> Device {
        let now = clock.nowMillis()
        let result: Result<(Device, Store.Ticket), EngineError> = state.withLock { s in
            guard var old = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard old.client == nil else {
                return .failure(.conflict("device '\(token)' is a real client's: only the client registers again"))
            }
            guard old.state == .registered else {
                return .failure(.conflict("device '\(token)' is \(old.state.rawValue); only a registered token can be refreshed"))
            }
            var rng = SystemRandomNumberGenerator()
            var newToken = newRegistrationToken(using: &rng)
            while s.tokenIndex[newToken] != nil { newToken = newRegistrationToken(using: &rng) }
            // The installation is the same: the new token's device keeps the fid.
            var fresh = Device(id: s.nextDeviceID, token: newToken, fid: old.fid, senderID: old.senderID, app: old.app, platform: old.platform,
                               state: .registered, canonicalID: nil, online: old.online, createdAt: now, lastSeenAt: now)
            // The app's APNs token does not change with its FCM token.
            fresh.givenAPNsToken = old.apnsToken
            fresh.apnsEnvironment = old.apnsEnvironment
            fresh.apnsExpiresAt = old.apnsExpiresAt
            s.nextDeviceID += 1
            old.state = .refreshed
            old.canonicalID = fresh.id
            s.devices[old.id] = old
            s.insert(fresh)
            // The app's topics follow it to the new token (the client library subscribes the new
            // token again): topic sends keep reaching it, and the old token lists none.
            for t in s.topics(of: old.id) {
                s.subscribe(device: fresh.id, topic: t.name, at: t.addedAt)
            }
            s.unsubscribeAll(device: old.id)
            // And its device groups: the new token takes the old one's place.
            for (key, var g) in s.groups where g.members.contains(old.id) {
                g.members = g.members.map { $0 == old.id ? fresh.id : $0 }
                s.groups[key] = g
            }
            let oldID = old.id
            // A web app's push subscription is the browser's, not the token's: it follows.
            var moved: [WriteOp] = []
            if var sub = s.webPush.removeValue(forKey: oldID) {
                sub.device = fresh.id
                _ = s.attachWebPush(sub)
                moved = [Writes.saveWebPush([sub.row])]
            }
            return .success((fresh, submit([Writes.refresh(device: oldID, to: fresh.row)] + moved)))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders, let old = try? self.device(token) {
            events.publish([("device.updated", renderDevice(old)), ("device.created", renderDevice(device))])
        }
        return device
    }

    /// Moves every held message whose TTL has run out to `expired` (after the clock moved, before
    /// queries that filter by stored status, and as real time passes: `ExpirySweeper`); true
    /// when something expired.
    @discardableResult
    public func expireDue() throws(EngineError) -> Bool {
        var now: Int64 = 0
        var expiredEvents: [(String, String)] = []
        let ticket: Store.Ticket? = state.withLock { s in
            now = clock.nowMillis()  // under the lock: a clock reset cannot come in between
            var changes: [StatusChange] = []
            for (id, entries) in s.stored where entries.contains(where: { $0.expiresAt <= now }) {
                var kept = entries
                let expired = DeviceStorage.expire(&kept, now: now)
                changes += expired
                // A real client's delivery written before is settled: nothing of it to keep.
                if !s.clientDeliveries.isEmpty { for ch in expired { s.forgetClientDelivery(ch.deliveryID) } }
                if let d = s.devices[id] {
                    let suffix = messageIDSuffix(senderID: d.senderID)
                    for ch in expired {
                        expiredEvents.append(("message.expired", EventJSON.delivery(
                            messageID: MessageID(micros: ch.deliveryID, suffix: suffix).description, token: d.token,
                            status: "expired", at: now)))
                    }
                }
                s.stored[id] = kept.isEmpty ? nil : kept
            }
            guard !changes.isEmpty else { return nil }
            let expired = changes
            return submit([Writes.setDeliveryStatuses(expired.map { ($0.deliveryID, $0.status) }, at: now)])
        }
        guard let ticket else { return false }
        try commitControl(ticket)
        events.publish(expiredEvents)
        return true
    }

    /// Starts expiring held messages as real time passes them (every quarter second), so long
    /// polls and the event stream hear of an expiry without a read or a clock move to trigger it.
    /// While the store cannot write it tries every 5 s instead: each failed write makes the
    /// engine read its state back (Engine+Recovery.swift), and reads show an expired message as
    /// expired before the sweep writes it so.
    public func startExpirySweeper() {
        let ticks = Locked(0)
        let sweeper = PeriodicTask(everyMillis: 250) { [weak self] in
            let tick = ticks.withLock { t in t += 1; return t }
            guard let self, store.failure == nil || tick % 20 == 0, state.withLock({ !$0.stored.isEmpty }) else { return }
            _ = try? expireDue()  // its commit wakes the long polls
        }
        expirySweeper.withLock { $0 = sweeper }
    }

    /// With `--unknown-tokens register`, the project an unknown well-formed token sent to would
    /// become a device of, as an app `app` on `platform`: the first project that has the app. Nil
    /// when the policy is `reject` or no project has the app (the room's refusal then). A room
    /// asks at its device step and makes the device (`createDevice`) once the send passed its
    /// other rules (APNs).
    public func unknownTokenProject(app: String, platform: Platform) -> String? {
        guard unknownTokens == .register else { return nil }
        return state.withLock { s in
            s.projectOrder.first { id in s.projects[id]?.apps.contains { $0.app == app && $0.platform == platform } == true }
        }
    }

    /// The writes of new devices: their rows, and the subscriptions of the web ones.
    func deviceWrites(_ devices: [Device], state s: EngineState) -> [WriteOp] {
        let subscriptions = devices.compactMap { $0.platform == .web ? s.webPush[$0.id]?.row : nil }
        return subscriptions.isEmpty ? [Writes.insertDevices(devices.map(\.row))]
            : [Writes.insertDevices(devices.map(\.row)), Writes.saveWebPush(subscriptions)]
    }

    // MARK: Rendering

    /// The device object with its topics.
    public func renderDevice(_ d: Device) -> String {
        let now = clock.nowMillis()
        return state.withLock { s in s.render(d, now: now) }
    }

    /// A device as the control API shows it, its endpoint on `endpointBase` instead of the
    /// server's own (`?endpoint_base=`).
    public func renderDevice(_ d: Device, endpointBase: String) -> String {
        let now = clock.nowMillis()
        return state.withLock { s in s.render(d, now: now, endpointBase: endpointBase) }
    }
}
