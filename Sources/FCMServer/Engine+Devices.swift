import FCMCore
import FCMStore
import Platform

/// What `POST /api/v1/devices` (and a fixture's `devices[]`) asks for.
public struct DeviceSpec: Sendable, Equatable {
    public var token: String?
    public var senderID: String
    public var app: String?
    public var platform: Platform
    public var online: Bool

    public init(token: String?, senderID: String, app: String?, platform: Platform, online: Bool) {
        self.token = token
        self.senderID = senderID
        self.app = app
        self.platform = platform
        self.online = online
    }
}

extension DeviceSpec {
    /// Whether `d` is the device this spec declares (a fixture's device that may have changed
    /// since: online flag, state; never its token, project, app or platform).
    func matches(_ d: Device) -> Bool {
        token == d.token && senderID == d.senderID && platform == d.platform && (app == nil || app == d.app)
    }
}

extension Engine {
    // MARK: Projects

    /// Creates a project; with `upsert` (fixtures), an existing one gains the keys and apps it lacks.
    @discardableResult
    public func createProject(_ p: Project, upsert: Bool = false) throws(ControlError) -> Project {
        let (project, ticket) = try createProjectQueued(p, upsert: upsert)
        if let ticket { try commitControl(ticket) }
        return project
    }

    /// `createProject` without waiting for the commit (fixture loading waits once at the end).
    func createProjectQueued(_ p: Project, upsert: Bool) throws(ControlError) -> (Project, Store.Ticket?) {
        let result: Result<(Project, Store.Ticket?), ControlError> = state.withLock { s in
            for k in p.serverKeys {
                if let owner = s.keyOwner[k], owner != p.senderID {
                    return .failure(.conflict("server key is already a key of project '\(owner)'"))
                }
            }
            var merged = p
            if let old = s.projects[p.senderID] {
                guard upsert else { return .failure(.conflict("project '\(p.senderID)' already exists")) }
                merged = old
                for k in p.serverKeys where !merged.serverKeys.contains(k) { merged.serverKeys.append(k) }
                for a in p.apps where merged.app(named: a.app) == nil { merged.apps.append(a) }
                if merged == old { return .success((old, nil)) }
            }
            s.insert(merged)
            publishCredentials(s)
            let row = merged
            return .success((merged, submit([{ (c: SQLiteConnection) throws in
                try c.run("INSERT OR REPLACE INTO projects(sender_id, server_keys, apps, created_at) VALUES (?,?,?,?)",
                          [.text(row.senderID), .text(row.keysJSON), .text(row.appsJSON), .int(row.createdAt)])
            }])))
        }
        return try result.get()
    }

    /// Every project, in creation order.
    public func projects() -> [Project] {
        state.withLock { s in s.projectOrder.compactMap { s.projects[$0] } }
    }

    /// One project.
    public func project(_ senderID: String) throws(ControlError) -> Project {
        guard let p = state.withLock({ $0.projects[senderID] }) else { throw .notFound("project '\(senderID)' does not exist") }
        return p
    }

    /// Forgets a project (its keys stop working; its devices stay until reset).
    public func deleteProject(_ senderID: String) throws(ControlError) {
        let ticket: Store.Ticket? = state.withLock { s in
            guard let p = s.projects[senderID] else { return nil }
            for k in p.serverKeys where s.keyOwner[k] == senderID { s.keyOwner[k] = nil }
            s.projects[senderID] = nil
            s.projectOrder.removeAll { $0 == senderID }
            publishCredentials(s)
            return submit([{ (c: SQLiteConnection) throws in
                try c.run("DELETE FROM projects WHERE sender_id = ?", [.text(senderID)])
            }])
        }
        guard let ticket else { throw .notFound("project '\(senderID)' does not exist") }
        try commitControl(ticket)
    }

    // MARK: Devices

    /// Creates a device. With `idempotent` (fixtures), an existing token is left as it is.
    @discardableResult
    public func createDevice(_ spec: DeviceSpec, idempotent: Bool = false) throws(ControlError) -> Device {
        let (device, ticket) = try createDeviceQueued(spec, idempotent: idempotent)
        if let ticket {
            try commitControl(ticket)
            if events.hasReaders { events.publish([("device.created", renderDevice(device))]) }
        }
        return device
    }

    /// `createDevice` without waiting for the commit.
    func createDeviceQueued(_ spec: DeviceSpec, idempotent: Bool) throws(ControlError) -> (Device, Store.Ticket?) {
        if let t = spec.token, !isWellFormedToken(t) { throw Self.malformedToken }
        let now = clock.nowMillis()
        let result: Result<(Device, Store.Ticket?), ControlError> = state.withLock { s in
            switch place(spec, in: &s, now: now) {
            case .failure(let e): return .failure(e)
            case .success((let d, true)): return .success((d, submit([{ (c: SQLiteConnection) throws in try c.run(Device.insertSQL, d.insertValues) }])))
            case .success((let d, false)):
                return idempotent ? .success((d, nil)) : .failure(.conflict("device '\(d.token)' already exists"))
            }
        }
        return try result.get()
    }

    /// Fixture devices, under one lock and one write: an existing token is left as it is. The
    /// first device refused, if any, with its index; those before it are queued all the same.
    /// Every device that answers for a fixture device is remembered, so a reset can put it back.
    func createDevicesQueued(_ specs: [DeviceSpec]) -> (failure: (Int, ControlError)?, ticket: Store.Ticket?) {
        if let i = specs.firstIndex(where: { $0.token.map { !isWellFormedToken($0) } ?? false }) {
            return ((i, Self.malformedToken), nil)
        }
        let now = clock.nowMillis()
        return state.withLock { s in
            var created: [Device] = []
            var failure: (Int, ControlError)?
            for (i, spec) in specs.enumerated() {
                switch place(spec, in: &s, now: now) {
                case .failure(let e): failure = (i, e)
                case .success((let d, let new)):
                    if new { created.append(d) }
                    if spec.matches(d) { s.fixtureDevices[d.id] = spec }
                }
                if failure != nil { break }
            }
            return (failure, created.isEmpty ? nil : submit([Self.insertDevices(created)]))
        }
    }

    /// One write of many device rows through one prepared statement.
    static func insertDevices(_ rows: [Device]) -> WriteOp {
        { (c: SQLiteConnection) throws in
            let insert = try c.statement(Device.insertSQL)
            for d in rows {
                try c.reset(insert)
                try insert.bind(d.insertValues)
                while try insert.step() {}
            }
        }
    }

    private static let malformedToken = ControlError.badRequest("token must be 1 to \(maxTokenLength) characters of A-Z a-z 0-9 - _ : .")

    /// Adds the device `spec` asks for to `s` (a generated token when it gives none); the one
    /// that has that token already, with false, when there is one.
    private func place(_ spec: DeviceSpec, in s: inout EngineState, now: Int64, id: Int64? = nil) -> Result<(Device, Bool), ControlError> {
        guard let project = s.projects[spec.senderID] else {
            return .failure(.badRequest("sender_id '\(spec.senderID)' is not a configured project"))
        }
        let token = spec.token ?? newRegistrationToken()
        if let existing = s.device(token: token) { return .success((existing, false)) }
        let app = spec.app
            ?? project.apps.first(where: { $0.platform == spec.platform })?.app
            ?? project.apps.first?.app ?? "unknown.app"
        let d = Device(id: id ?? s.nextDeviceID, token: token, senderID: spec.senderID, app: app, platform: spec.platform,
                       state: .registered, canonicalID: nil, online: spec.online, createdAt: now, lastSeenAt: now)
        if id == nil { s.nextDeviceID += 1 }
        s.insert(d)
        return .success((d, true))
    }

    /// One device by token.
    public func device(_ token: String) throws(ControlError) -> Device {
        guard let d = state.withLock({ s in s.device(token: token) }) else {
            throw .notFound("device '\(token)' does not exist")
        }
        return d
    }

    /// Devices matching the filters, ordered by creation, after `afterID`.
    public func devices(senderID: String?, app: String?, state wanted: DeviceState?, topic: String? = nil, afterID: Int64,
                        limit: Int) -> [Device] {
        state.withLock { s in
            let matching = s.devices.values
                .filter { d in
                    d.id > afterID && (senderID == nil || d.senderID == senderID) && (app == nil || d.app == app)
                        && (wanted == nil || d.state == wanted)
                        && (topic == nil || s.topicSubscribers[Topics.key(topic!)]?.contains(d.id) == true)
                }
                .sorted { $0.id < $1.id }
            return Array(matching.prefix(limit))
        }
    }

    /// Token of a device id (for rendering deliveries).
    func tokens(for ids: [Int64]) -> [Int64: String] {
        state.withLock { s in
            var out: [Int64: String] = [:]
            for id in ids { if let d = s.devices[id] { out[id] = d.token } }
            return out
        }
    }

    /// Takes a device offline or brings it back; back online, everything it stored that has not
    /// expired is delivered in acceptance order.
    public func setOnline(_ token: String, _ online: Bool) throws(ControlError) -> Device {
        let now = clock.nowMillis()
        var pendingEvents: [(String, String)] = []
        var deliveredIDs: [Int64] = []
        let result: Result<(Device, Store.Ticket?), ControlError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard d.online != online else { return .success((d, nil)) }
            d.online = online
            d.lastSeenAt = now
            let flush = online && s.stored[d.id] != nil
            var flushed: [(String, String)] = []
            if online {
                let suffix = messageIDSuffix(senderID: d.senderID)
                for e in s.stored[d.id] ?? [] {
                    let status = e.expiresAt <= now ? "expired" : "delivered"
                    if status == "delivered" { deliveredIDs.append(e.deliveryID) }
                    flushed.append((status == "expired" ? "message.expired" : "message.delivered", EventJSON.delivery(
                        messageID: MessageID(micros: e.deliveryID, suffix: suffix).description, token: d.token, status: status, at: now)))
                }
                s.stored[d.id] = nil
            }
            s.devices[d.id] = d
            let id = d.id
            pendingEvents = [("device.updated", s.render(d, now: now))] + flushed
            return .success((d, submit([{ (c: SQLiteConnection) throws in
                try c.run("UPDATE devices SET online = ?, last_seen_at = ? WHERE id = ?", [.int(online ? 1 : 0), .int(now), .int(id)])
                if flush {
                    try c.run("UPDATE deliveries SET status = 'expired' WHERE device = ? AND status = 'pending' AND expires_at <= ?",
                              [.int(id), .int(now)])
                    try c.run("UPDATE deliveries SET status = 'delivered', delivered_at = ? WHERE device = ? AND status = 'pending'",
                              [.int(now), .int(id)])
                }
            }])))
        }
        let (device, ticket) = try result.get()
        if let ticket {
            try commitControl(ticket)
            events.publish(pendingEvents)
            if !deliveredIDs.isEmpty { lateDeliveries.withLock { $0 }?(deliveredIDs) }
        }
        return device
    }

    /// The app was uninstalled: later sends get `NotRegistered`.
    public func unregister(_ token: String) throws(ControlError) -> Device {
        let result: Result<(Device, Store.Ticket), ControlError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            d.state = .unregistered
            s.devices[d.id] = d
            let id = d.id
            return .success((d, submit([{ (c: SQLiteConnection) throws in
                try c.run("UPDATE devices SET state = 'unregistered' WHERE id = ?", [.int(id)])
            }])))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders { events.publish([("device.updated", renderDevice(device))]) }
        return device
    }

    /// Rotates the token: returns the new device; sends to the old token reach it and report it as
    /// canonical.
    public func refresh(_ token: String) throws(ControlError) -> Device {
        let now = clock.nowMillis()
        let result: Result<(Device, Store.Ticket), ControlError> = state.withLock { s in
            guard var old = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard old.state == .registered else {
                return .failure(.conflict("device '\(token)' is \(old.state.rawValue); only a registered token can be refreshed"))
            }
            var newToken = newRegistrationToken()
            while s.tokenIndex[newToken] != nil { newToken = newRegistrationToken() }
            let fresh = Device(id: s.nextDeviceID, token: newToken, senderID: old.senderID, app: old.app, platform: old.platform,
                               state: .registered, canonicalID: nil, online: old.online, createdAt: now, lastSeenAt: now)
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
            return .success((fresh, submit([{ (c: SQLiteConnection) throws in
                try c.run(Device.insertSQL, fresh.insertValues)
                try c.run("UPDATE devices SET state = 'refreshed', canonical_id = ? WHERE id = ?", [.int(fresh.id), .int(oldID)])
                try c.run("UPDATE subscriptions SET device = ? WHERE device = ?", [.int(fresh.id), .int(oldID)])
                try c.run("UPDATE group_members SET device = ? WHERE device = ?", [.int(fresh.id), .int(oldID)])
            }])))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders, let old = try? self.device(token) {
            events.publish([("device.updated", renderDevice(old)), ("device.created", renderDevice(device))])
        }
        return device
    }

    /// Forgets a device entirely: its token is unknown again. Its past deliveries keep the token
    /// as text so message records still say whom they addressed.
    public func deleteDevice(_ token: String) throws(ControlError) {
        let result: Result<Store.Ticket, ControlError> = state.withLock { s in
            guard let d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            s.devices[d.id] = nil
            s.tokenIndex[token] = nil
            let id = d.id
            let deliveries = JSONValue.array((s.inbox.removeValue(forKey: id) ?? []).map { .number(JSONNumber($0)) }).serialized()
            s.stored[id] = nil
            s.unsubscribeAll(device: id)
            // Out of its groups too; a group left empty goes, as FCM deletes empty groups.
            var changedGroups: [DeviceGroup] = [], emptied: [String] = []
            for (key, var g) in s.groups where g.members.contains(id) {
                g.members.removeAll { $0 == id }
                if g.members.isEmpty { s.remove(group: key); emptied.append(key) } else { s.insert(g); changedGroups.append(g) }
            }
            let (regroup, drop) = (changedGroups, emptied)
            return .success(submit([{ (c: SQLiteConnection) throws in
                try c.run("DELETE FROM subscriptions WHERE device = ?", [.int(id)])
                for g in regroup { try Engine.saveGroup(g, c) }
                for k in drop { try Engine.deleteGroup(k, c) }
                try c.run("UPDATE deliveries SET token = ?, device = NULL WHERE id IN (SELECT value FROM json_each(?))",
                          [.text(token), .text(deliveries)])
                try c.run("DELETE FROM devices WHERE id = ?", [.int(id)])
            }]))
        }
        try commitControl(try result.get())
    }

    /// Moves every held message whose TTL has run out to `expired` (after the clock moved, before
    /// queries that filter by stored status, and as real time passes: `ExpirySweeper`); true
    /// when something expired.
    @discardableResult
    public func expireDue() throws(ControlError) -> Bool {
        var now: Int64 = 0
        var expiredEvents: [(String, String)] = []
        let ticket: Store.Ticket? = state.withLock { s in
            now = clock.nowMillis()  // under the lock: a clock reset cannot come in between
            var changes: [StatusChange] = []
            for (id, entries) in s.stored where entries.contains(where: { $0.expiresAt <= now }) {
                var kept = entries
                let expired = DeviceStorage.expire(&kept, now: now)
                changes += expired
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
            return submit([{ c in try Engine.apply(expired, c) }])
        }
        guard let ticket else { return false }
        try commitControl(ticket)
        events.publish(expiredEvents)
        return true
    }

    /// Starts expiring held messages as real time passes them (every quarter second), so long
    /// polls and the event stream hear of an expiry without a read or a clock move to trigger it.
    public func startExpirySweeper() {
        let sweeper = PeriodicTask(everyMillis: 250) { [weak self] in
            guard let self, state.withLock({ !$0.stored.isEmpty }) else { return }
            _ = try? expireDue()  // its commit wakes the long polls
        }
        expirySweeper.withLock { $0 = sweeper }
    }

    // MARK: Faults

    /// Adds a fault from the body of `POST /api/v1/faults`.
    func addFault(_ body: Body) throws(ControlError) -> Fault {
        let now = clock.nowMillis()
        return try state.withLock { (s: inout EngineState) throws(ControlError) -> Fault in
            let f = try Fault.parse(body, id: "f\(s.faults.nextID)", now: now)
            s.faults.nextID += 1
            s.faults.faults.append(f)
            faultsArmed.store(true, ordering: .relaxed)
            return f
        }
    }

    /// False only when no fault is in force: the send path then skips the fault table (and its
    /// lock). Set under the state lock whenever the table gains or loses faults; a fault used up
    /// by firing may leave it true, which only costs a look at the empty table.
    var mayHaveFaults: Bool { faultsArmed.load(ordering: .relaxed) }

    /// The faults in force, oldest first.
    func faults() -> [Fault] { state.withLock { $0.faults.faults } }

    /// Removes one fault, or all of them (`id` nil).
    func deleteFault(_ id: String?) throws(ControlError) {
        let found = state.withLock { s -> Bool in
            defer { faultsArmed.store(!s.faults.faults.isEmpty, ordering: .relaxed) }
            guard let id else {
                s.faults.faults.removeAll()
                return true
            }
            let before = s.faults.faults.count
            s.faults.faults.removeAll { $0.id == id }
            return s.faults.faults.count < before
        }
        if !found { throw .notFound("fault '\(id ?? "")' does not exist") }
    }

    /// The first request-level fault (status, delay, close) that matches, counted as fired.
    public func fireRequestFault(transport: Transport, path: String, senderID: String?, tokens: [String], topic: String?) -> Fault? {
        guard mayHaveFaults else { return nil }
        return state.withLock { $0.faults.fireRequestFault(transport: transport, path: path, senderID: senderID, tokens: tokens, topic: topic) }
    }

    /// Forgets devices, messages and deliveries; keeps projects; returns the clock to real time.
    /// With `fixtures` (the start-up fixtures' devices), the devices they declare are kept with
    /// their ids and creation times, put back to what the fixture says (registered, its online
    /// flag), and made again where they are gone, all under one lock: a reset writes only what
    /// changed, not a whole fixture's rows, and no send sees the store without them.
    public func reset(fixtures: [DeviceSpec]?) throws(ControlError) {
        let hook = resetListeners.withLock { $0 }
        var afterwards: (@Sendable () -> Void)?
        let now = clock.nowMillis()
        let ticket = state.withLock { s in
            var removed: [Device] = []
            var changed: [Device] = []
            for d in s.devices.values {
                guard fixtures != nil, let f = s.fixtureDevices[d.id], f.matches(d) else {
                    removed.append(d)
                    continue
                }
                var back = d
                back.state = .registered
                back.canonicalID = nil
                back.online = f.online
                if back != d { changed.append(back) }
            }
            for d in removed {
                s.devices[d.id] = nil
                s.tokenIndex[d.token] = nil
                s.fixtureDevices[d.id] = nil
            }
            for d in changed { s.devices[d.id] = d }
            var created: [Device] = []
            if let fixtures, s.devices.count < fixtures.count {
                // A fixture device deleted since comes back under its old id, so lists keep the
                // order they had at start; one never made (its project was gone) gets a new one.
                for (id, f) in s.fixtureDevices.sorted(by: { $0.key < $1.key }) where s.devices[id] == nil {
                    if case .success((let d, true)) = place(f, in: &s, now: now, id: id) { created.append(d) }
                }
                for f in fixtures where f.token.flatMap({ s.tokenIndex[$0] }) == nil {
                    if case .success((let d, true)) = place(f, in: &s, now: now) {
                        created.append(d)
                        s.fixtureDevices[d.id] = f
                    }
                }
            }
            s.inbox.removeAll()
            s.stored.removeAll()
            s.faults = FaultTable()
            faultsArmed.store(false, ordering: .relaxed)
            s.topicSubscribers.removeAll()
            s.deviceTopics.removeAll()
            s.groups.removeAll()
            s.groupKeyByName.removeAll()
            s.retiredGroupKeys.removeAll()
            s.upstream.removeAll()
            s.upstreamOrder.removeAll()
            restartClock(&s)
            afterwards = hook?()
            let keepsAny = s.devices.count > created.count
            let gone = removed.map(\.id)
            let updates = changed
            return submit([{ (c: SQLiteConnection) throws in
                // Unconditional DELETEs take SQLite's truncate path: fast whatever the row count.
                try c.execute("DELETE FROM deliveries; DELETE FROM messages; DELETE FROM subscriptions; DELETE FROM groups; DELETE FROM group_members; DELETE FROM retired_groups; DELETE FROM upstream;")
                if keepsAny {
                    let delete = try c.statement("DELETE FROM devices WHERE id = ?")
                    for id in gone {
                        try c.reset(delete)
                        try delete.bind([.int(id)])
                        while try delete.step() {}
                    }
                    let update = try c.statement("UPDATE devices SET state = ?, canonical_id = NULL, online = ? WHERE id = ?")
                    for d in updates {
                        try c.reset(update)
                        try update.bind([.text(d.state.rawValue), .int(d.online ? 1 : 0), .int(d.id)])
                        while try update.step() {}
                    }
                } else {
                    try c.execute("DELETE FROM devices")
                }
            }, Self.insertDevices(created)])
        }
        try commitControl(ticket)
        afterwards?()
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
    func commitControl(_ ticket: Store.Ticket) throws(ControlError) {
        do {
            try commit(ticket)
        } catch {
            throw .internal("the store failed: \(error.description)")
        }
    }
}
