// Long because: the engine's stored properties and start-up, the credentials it checks without the
// state lock, and the in-memory state with its indexes are one type's parts; its behaviour is in the
// Engine+<concern>.swift files beside it.
import FCMCore
public import FCMModel
public import FCMStore
public import Platform
import Synchronization

/// What authenticating a request needs (see `Engine.credentials`).
///
/// Access-token checks live here too, so checking a request's credential never waits for the send
/// path's state lock: the projects by sender id and by project id (copies, refreshed with the
/// server keys), and the issued access tokens themselves (their only home).
struct Credentials: Sendable {
    var keyOwner: [String: String] = [:]
    var firstProject: String?
    var projectsByName: [String: Project] = [:]
    /// Access tokens the token endpoint issued, by token (in memory only: a restart or a reset
    /// forgets them, as Google's would expire).
    var accessTokens: [String: AccessToken] = [:]
    /// Revoked access tokens, until they would have expired: only to say why one is refused.
    var revokedTokens: [String: AccessToken] = [:]

    /// A project by its sender id or its project id.
    func project(named name: String) -> Project? { projectsByName[name] }
}

/// The mock's behaviour: projects, devices and the send path, shared by every listener.
///
/// In-memory state (projects, devices by token) answers the send path without touching SQLite;
/// every change is also queued to the store inside the same critical section, so the store
/// applies changes in exactly the order they were decided. A caller is answered only after its
/// writes are committed.
public final class Engine: Sendable {
    public let store: Store
    public let clock: MockClock
    let state: Locked<EngineState>
    /// Long polls, re-checked after every commit that may change what they wait for.
    let longPolls = LongPolls()
    /// Server keys and the first project, as of the last change of projects: every send reads
    /// them, and under their own lock they do not wait for the send path's `state` lock.
    let credentials = Locked<Credentials>(Credentials())
    /// APNs teams, signing keys and client certificates, as data (`Engine+APNs.swift`; the APNs room verifies).
    let apnsCredentials: Locked<APNsCredentials>
    /// Who counts the store's sends from before start (`Engine+Stats.swift`).
    let storedSendCount = StoredSendCount()
    /// See `mayHaveFaults`.
    let faultsArmed = Atomic<Bool>(false)
    /// Live events (`GET /api/v1/events`).
    public let events: EventBus
    /// Called with a sender id when upstream messages of that sender wait for a connection.
    public let upstreamDispatch = Locked<Handler<String, Void>?>(nil)
    /// Called with the delivery ids that reached their device later (an offline device came back).
    public let lateDeliveries = Locked<Handler<[Int64], Void>?>(nil)
    /// Expires held messages as real time passes (started with the listeners).
    let expirySweeper = Locked<PeriodicTask?>(nil)
    /// Called during a reset, with the state lock held (so nothing is sent or queued between the
    /// engine forgetting and the listener forgetting): the XMPP listener forgets the receipts and
    /// upstream messages it holds. It returns what to do once the lock is released.
    public let resetListeners = Locked<Handler<Void, @Sendable () -> Void>?>(nil)
    /// The signature checks of service-account JWTs.
    /// Makes web devices' subscription keys (the TLS layer's, handed in: the engine links no crypto).
    /// The Web Push room's keys and forms; nil without it (web devices then get no subscription).
    let webPushOps: (any WebPushOps)?
    /// Where `notice` sends what a tester should read in the log (`onNotice`): nil, nothing.
    let noticeSink = Locked<(@Sendable (EngineNotice) -> Void)?>(nil)
    public let unknownTokens: UnknownTokenPolicy
    public let acceptAnyKey: Bool
    /// `--device-rate` and `--topic-rate` (nil: no limit).
    let deviceRate: RateLimit?
    let topicRate: RateLimit?
    /// Most `&&`/`||` operators a condition may have (the seeds: two).
    let maxConditionOperators: Int
    /// The fixture documents loaded at start, which a reset applies again.
    public let startFixtures = Locked<[FixtureDocument]>([])

    /// Keeps the fixture documents loaded at start, for `reset` to apply again.
    public func keepStartFixtures(_ documents: [FixtureDocument]) {
        startFixtures.withLock { $0 = documents }
    }
    /// How the Web Push room encrypts FCM registrations' pushes, and the encoding's name
    /// (`setRelayEncryption`).
    let relayEncryption = Locked<(name: String, encrypt: RelayEncryption)?>(nil)
    /// What the FCM registrations room makes of a message for them (`setRelayPayload`).
    let relayPayload = Locked<RelayPayload?>(nil)
    /// How each client room reaches its clients (`setClientRoom`).
    let clientRooms = Locked<[ClientKind: @Sendable (ClientOrders) -> Void]>([:])
    /// A commit of acknowledgements' writes is scheduled (`submitRiding`).
    let ridingCommitDue = Atomic<Bool>(false)
    /// What the rooms gave the engine at start: their record blocks' readers, their own fault errors.
    let rooms: RoomHooks
    /// Monotonic start time, for `uptime_s`.
    public let startedAt = monotonicNanos()

    /// Opens the engine over `store`, loading what the store already holds.
    public init(store: Store, webPush: (any WebPushOps)? = nil, clock: MockClock = MockClock(), unknownTokens: UnknownTokenPolicy = .register,
                acceptAnyKey: Bool = false, deviceRate: RateLimit? = nil, topicRate: RateLimit? = nil,
                maxConditionOperators: Int = 2, eventKeepaliveMillis: Int = 15_000, rooms: RoomHooks = RoomHooks()) throws(StoreError) {
        self.store = store
        self.rooms = rooms
        self.webPushOps = webPush
        self.events = EventBus(keepaliveMillis: eventKeepaliveMillis)
        self.clock = clock
        self.unknownTokens = unknownTokens
        self.acceptAnyKey = acceptAnyKey
        self.maxConditionOperators = maxConditionOperators
        self.deviceRate = deviceRate
        self.topicRate = topicRate
        let loaded = try EngineState.load(from: store, rooms: rooms)
        self.apnsCredentials = Locked(try APNsCredentials.load(from: store))
        var state = loaded.state
        state.webPushOps = webPush
        state.stats = SendStats(floor: loaded.maxMid)
        state.ids = MessageIDAllocator(floor: loaded.maxMid)
        let missing = state.giveInstallationIDs()
        self.state = Locked(state)
        if !missing.isEmpty { try store.wait(for: store.submit([Writes.setFIDs(missing)])) }
        // What real clients' connections had unacknowledged when the process stopped is held
        // again (read back above as held): their connections are gone.
        if !loaded.sentAtStop.isEmpty {
            let now = clock.nowMillis()
            try store.wait(for: store.submit([Writes.setDeliveryStatuses(loaded.sentAtStop.map { ($0, "pending") }, at: now)]))
        }
        publishCredentials(loaded.state)
        recoverAfterFailedWrites()
        chunkLoadedInboxes()
    }

    // MARK: Authentication

    /// The sender id a server key belongs to; with `--accept-any-key`, an unknown key counts as a
    /// key of the first configured project.
    public func senderID(forServerKey key: String) -> String? {
        credentials.withLock { c in
            if let owner = c.keyOwner[key] { return owner }
            if acceptAnyKey, !key.isEmpty { return c.firstProject }
            return nil
        }
    }

    /// The first configured project (sends with an access token standing for a server key map to it).
    public func firstProjectID() -> String? {
        credentials.withLock { $0.firstProject }
    }

    /// Copies what authentication needs out of `s`; called with the state lock held wherever
    /// projects change, so the copy never lags behind a change that was answered.
    func publishCredentials(_ s: EngineState) {
        var byName: [String: Project] = [:]
        for p in s.projects.values {
            byName[p.projectID] = p
            byName[p.senderID] = p  // a sender id wins over another project's equal project id, as in `project(named:)`
        }
        credentials.withLock {
            $0.keyOwner = s.keyOwner
            $0.firstProject = s.projectOrder.first
            $0.projectsByName = byName
        }
    }

    // MARK: Change notification

    /// Wakes every long poll; they re-read what they wait for.
    public func notifyChanged() {
        longPolls.poke()
    }

    /// Wakes the long polls of these devices only (and those of devices not known yet): for the
    /// changes that know which inboxes they touched (a send's commit, an acknowledgement).
    func notifyChanged<S: Sequence<Int64>>(devices: S) {
        longPolls.poke(devices: devices)
    }

    /// Answers every long poll with what there is (before the HTTP server stops).
    public func beginShutdown() {
        expirySweeper.withLock { s in defer { s = nil }; return s }?.stop()
        longPolls.stop()
        events.closeAll()
    }

    /// Writes the store's log back into its file.
    public func close() {
        store.close()
    }

    /// Commits the writes sends left queued (`Submission.commitNow` false): a room's HTTP round
    /// is over.
    public func commitQueued() {
        store.commitQueued()
    }

    /// The store's health as `GET /api/v1/health` shows it: why it cannot write (nil: it can),
    /// the messages it keeps and its files' size.
    public var storeHealth: (failure: StoreError?, messages: Int64, bytes: Int64) {
        (storeFailure, store.messageCount, store.sizeBytes)
    }

    /// Why the store cannot write (nil: it can); `GET /readyz` asks only this.
    public var storeFailure: StoreError? { store.failure }

    /// Queues `ops` in decision order; call only while holding `state`.
    @discardableResult
    func submit(_ ops: [WriteOp], wakeWriter: Bool = true, completion: (@Sendable (StoreError?) -> Void)? = nil) -> Store.Ticket {
        store.submit(ops, wakeWriter: wakeWriter, completion: completion)
    }

    /// Waits for a ticket, then wakes long polls.
    func commit(_ ticket: Store.Ticket) throws(StoreError) {
        try store.wait(for: ticket)
        notifyChanged()
    }
}

/// Everything the engine keeps in memory, guarded by one mutex.
struct EngineState: Sendable {
    var projects: [String: Project] = [:]
    var projectOrder: [String] = []
    /// Server key → sender id (`Engine.credentials` holds a copy for authentication).
    var keyOwner: [String: String] = [:]
    var devices: [Int64: Device] = [:]
    var tokenIndex: [String: Int64] = [:]
    /// fid → the installation's first device (a refresh keeps the fid: `current` of it answers).
    var fidIndex: [String: Int64] = [:]
    /// An iOS device's APNs token → the device.
    var apnsIndex: [String: Int64] = [:]
    /// The devices start-up fixtures declare, by id: each one's place in the fixtures' device
    /// list (every document's `devices`, in the order they were applied: what `reset(fixtures:)`
    /// is given), where what it declares is read when a reset puts it back. A place, not a copy
    /// of the spec: 12 bytes a device instead of 72.
    var fixtureDevices: [Int64: Int32] = [:]
    /// How many fixture devices were applied: the next document's first place in that list.
    var fixtureSpecCount = 0
    var nextDeviceID: Int64 = 1
    /// Each device's delivery ids: the newest here, the older in the store's chunks
    /// (`Engine+Inbox.swift`).
    var inbox: [Int64: DeviceInbox] = [:]
    /// What each offline device holds (pending deliveries), for FCM's storage rules.
    var stored: [Int64: [StoredEntry]] = [:]
    /// What each device shows by collapse id, for the protocols that replace on screen (APNs;
    /// `Engine+Screen.swift`; memory only: a restart forgets it).
    var screens: [Int64: Screen] = [:]
    /// Sends counted as decided (`Engine+Stats.swift`).
    var stats = SendStats()
    var faults = FaultTable()
    /// Message-id stamps, taken under the state lock so id order is acceptance order.
    var ids = MessageIDAllocator()
    /// Subscribers by topic key (`Topics.key`), and each device's topics by key.
    var topicSubscribers: [String: Set<Int64>] = [:]
    var deviceTopics: [Int64: [String: Subscription]] = [:]
    /// Device groups by notification key, and keys by "sender/name".
    var groups: [String: DeviceGroup] = [:]
    var groupKeyByName: [String: String] = [:]
    /// What a send answers NotRegistered instead of registering it, until a reset: the
    /// notification keys of deleted groups and the tokens of deleted real clients' devices.
    var retiredTokens: Set<String> = []
    /// Upstream messages by id, in creation order.
    var upstream: [String: UpstreamMessage] = [:]
    var upstreamOrder: [String] = []
    var deviceWindows = RateWindows()
    var topicWindows = RateWindows()
    /// Web devices' push subscriptions by device id, and device ids by subscription id.
    var webPush: [Int64: WebPushSubscription] = [:]
    var webPushIndex: [String: Int64] = [:]
    /// The subscription ids of deleted devices, gone rather than unknown (by id,
    /// since a device id can be given again after a restart).
    var webPushDeleted: Set<String> = []
    /// Where endpoints point (`Engine.setWebPushEndpointBase`).
    var webPushBase = ""
    var webPushPath = ""
    /// How a subscription is shown (the Web Push room's `WebPushOps`).
    var webPushOps: (any WebPushOps)?
    /// Sends taken since start, by transport (`Transport.tag`), and those that said their body
    /// would not decrypt (Web Push's): memory only, for the health call.
    var takenSinceStart = [Int64](repeating: 0, count: Transport.allCases.count)
    var undecryptableSinceStart: Int64 = 0
    /// Real clients by id (`RealClients.swift`); the life of each delivery written on a client's
    /// connection and not settled; what relayed pushes carry until their client acknowledges them.
    var realClients: [String: RealClient] = [:]
    var clientDeliveries: [Int64: ClientDelivery] = [:]
    var clientPayloads: [Int64: ClientPayload] = [:]
    /// The device of each delivery in `clientDeliveries`; real clients' devices by channel; the
    /// deliveries each client acknowledged lately (a nack may follow an ack).
    var clientDeliveryDevice: [Int64: Int64] = [:]
    var clientChannels: [String: Int64] = [:]
    /// Connections the control API disconnected, closed in the engine before their room closes
    /// them: the room's report of the close finds its connection here and changes nothing.
    var closedAhead: Set<String> = []
    /// FCM registrations by the device of the subscription they travel over.
    var fcmRiders: [Int64: [Int64]] = [:]
    /// register3 registrations by token, and tokens by what makes a request the same again.
    var gcmRegistrations: [String: GCMRegistrationRow] = [:]
    var gcmRegistrationKeys: [String: String] = [:]
    /// Firebase installations by fid, and fids by their auth token.
    var installations: [String: InstallationRow] = [:]
    var installationAuth: [String: String] = [:]
    /// Auth tokens installations were given before their current ones, good until they expire
    /// (as Google's are), by token: memory only (a restart keeps each installation's current one).
    var earlierAuth: [String: (fid: String, expiresAt: Int64)] = [:]
    var acknowledged: [String: [Int64]] = [:]

    func device(token: String) -> Device? {
        tokenIndex[token].flatMap { devices[$0] }
    }

    /// The device that answers for an installation now (its latest token).
    func device(fid: String) -> Device? {
        fidIndex[fid].flatMap { devices[$0] }.map(current)
    }

    /// FCM registration `d` no longer takes sends (unregistered or deleted): when an
    /// installation's fid named it (v1's `message.fid`), it names the installation's oldest
    /// registration still registered, as a start's read-back does.
    mutating func fidFollowsLiveRegistration(leaving d: Device) {
        guard fidIndex[d.fid] == d.id,
              let live = devices.values.filter({ $0.fid == d.fid && $0.id != d.id && $0.state == .registered && $0.client?.kind == .fcm })
                .min(by: { $0.id < $1.id })
        else { return }
        fidIndex[d.fid] = live.id
    }

    /// The device that now answers for `d`: through the tokens that replaced it (a refreshed
    /// token's canonical one), at most 64 steps; `d` itself when it was not refreshed.
    func current(_ d: Device) -> Device {
        var device = d
        var hops = 0
        while device.state == .refreshed, let next = device.canonicalID, let n = devices[next], hops < 64 {
            device = n
            hops += 1
        }
        return device
    }

    /// The device object as the control API and events show it: its canonical token, topics,
    /// and `pending`, what it holds that has not expired by `now`, all read from this state.
    func render(_ d: Device, now: Int64, endpointBase: String? = nil) -> String {
        Render.device(d, canonicalToken: d.canonicalID.flatMap { devices[$0]?.token }, topics: topics(of: d.id).map(\.name),
                      pending: DeviceStorage.count(stored[d.id] ?? [], now: now), webPush: webPush[d.id].map { sub in
                          (sub, webPushOps?.json(sub, endpoint: sub.endpoint(prefix: (endpointBase ?? webPushBase) + webPushPath)) ?? "null")
                      }, client: { w in
                          if let link = d.client { writeClient(&w, link) } else { w.null() }
                      })
    }

    /// A topic by its key: its name as first subscribed, and its subscribers' tokens in id order.
    func topic(key: String) -> (name: String, subscribers: [String])? {
        let ids = (topicSubscribers[key] ?? []).sorted()
        guard let first = ids.first, let name = deviceTopics[first]?[key]?.name else { return nil }
        return (name, ids.compactMap { devices[$0]?.token })
    }

    /// Adds a subscription (no change when it exists); false when the device is at 2000 topics.
    @discardableResult
    mutating func subscribe(device: Int64, topic: String, at: Int64) -> Bool {
        let key = Topics.key(topic)
        if deviceTopics[device]?[key] != nil { return true }
        guard (deviceTopics[device]?.count ?? 0) < Subscription.maxTopicsPerDevice else { return false }
        deviceTopics[device, default: [:]][key] = Subscription(name: topic, addedAt: at)
        topicSubscribers[key, default: []].insert(device)
        return true
    }

    /// Removes a subscription; false when there was none.
    @discardableResult
    mutating func unsubscribe(device: Int64, topic: String) -> Bool {
        let key = Topics.key(topic)
        guard deviceTopics[device]?.removeValue(forKey: key) != nil else { return false }
        topicSubscribers[key]?.remove(device)
        if topicSubscribers[key]?.isEmpty == true { topicSubscribers[key] = nil }
        return true
    }

    /// Forgets every subscription of a device.
    mutating func unsubscribeAll(device: Int64) {
        for key in deviceTopics.removeValue(forKey: device)?.keys ?? [:].keys {
            topicSubscribers[key]?.remove(device)
            if topicSubscribers[key]?.isEmpty == true { topicSubscribers[key] = nil }
        }
    }

    /// A device's topics, by name, in subscription order.
    func topics(of device: Int64) -> [Subscription] {
        (deviceTopics[device]?.values).map { $0.sorted { ($0.addedAt, $0.name) < ($1.addedAt, $1.name) } } ?? []
    }

    mutating func insert(_ device: Device) {
        var d = device
        // The app's name as its project keeps it: one string for all of the app's devices, not
        // one each (every store row and fixture entry brings its own).
        if let p = projects[d.senderID], let a = p.apps.first(where: { $0.app == d.app }) { d.app = a.app }
        devices[d.id] = d
        tokenIndex[d.token] = d.id
        // A refreshed token's new device shares the fid: the index keeps the first one, unless
        // that one no longer takes sends and this one does (an installation's FCM registration
        // made again after the first was deleted, read back at start).
        let keepsFirst = fidIndex[d.fid].map { devices[$0]?.state == .registered || d.state != .registered } ?? false
        if !keepsFirst { fidIndex[d.fid] = d.id }
        if let apns = d.apnsToken { apnsIndex[apns] = d.id }
    }

    /// An fid no device has.
    func newInstallationID() -> String {
        var rng = SystemRandomNumberGenerator()
        var fid = InstallationID.make(using: &rng)
        while fidIndex[fid] != nil { fid = InstallationID.make(using: &rng) }
        return fid
    }

    /// Forgets a device and its token; its fid passes to the device that replaced it, if any.
    mutating func remove(_ d: Device) {
        if d.client?.kind == .fcm { fidFollowsLiveRegistration(leaving: d) }
        let successor = current(d)
        devices[d.id] = nil
        tokenIndex[d.token] = nil
        if let apns = d.apnsToken, apnsIndex[apns] == d.id { apnsIndex[apns] = nil }
        if fidIndex[d.fid] == d.id {
            fidIndex[d.fid] = successor.id != d.id && devices[successor.id]?.fid == d.fid ? successor.id : nil
        }
    }

    mutating func insert(_ p: Project) {
        if projects[p.senderID] == nil { projectOrder.append(p.senderID) }
        if let old = projects[p.senderID] {
            for k in old.serverKeys where keyOwner[k] == p.senderID { keyOwner[k] = nil }
        }
        projects[p.senderID] = p
        for k in p.serverKeys { keyOwner[k] = p.senderID }
    }

    /// Devices of a store from before schema 10 have no fid: each gets a new one, which a
    /// refreshed token's successor shares (ids ascend, so the replaced device comes first).
    /// Returns what to write back, so the fids stay the same across restarts.
    mutating func giveInstallationIDs() -> [(id: Int64, fid: String)] {
        var replaced: [Int64: Int64] = [:]  // a refreshed token's new device → the old one
        for d in devices.values { if let c = d.canonicalID { replaced[c] = d.id } }
        var given: [(id: Int64, fid: String)] = []
        var rng = SystemRandomNumberGenerator()
        for id in devices.keys.sorted() where devices[id]?.fid.isEmpty == true {
            var fid = replaced[id].flatMap { devices[$0]?.fid } ?? ""
            while fid.isEmpty || (fidIndex[fid] != nil && replaced[id] == nil) { fid = InstallationID.make(using: &rng) }
            devices[id]?.fid = fid
            if fidIndex[fid] == nil { fidIndex[fid] = id }
            given.append((id, fid))
        }
        return given
    }

    static func load(from store: Store, rooms: RoomHooks) throws(StoreError) -> (state: EngineState, maxMid: Int64, sentAtStop: [Int64]) {
        let blocks = rooms.recordBlocks
        return try store.read { (c: StoreReader) throws(StoreError) -> (EngineState, Int64, [Int64]) in
            var s = EngineState()
            let load = c.loader
            try load.projects { sender, keys, apps, createdAt, projectID in
                if var p = Project.fromRow(sender: sender, keys: keys, apps: apps, createdAt: createdAt) {
                    if let projectID { p.projectID = projectID }
                    s.insert(p)
                }
            }
            try load.serviceAccounts { keyID, sender, email, clientID, publicKey, createdAt in
                s.projects[sender]?.serviceAccounts.append(ServiceAccount(privateKeyID: keyID, clientEmail: email, clientID: clientID,
                                                                          publicKeyPEM: publicKey, createdAt: createdAt))
            }
            try load.devices { r in
                s.insert(Device(id: r.id, token: r.token, fid: r.fid ?? "", senderID: r.senderID, app: r.app,
                                platform: Platform(rawValue: r.platform) ?? .android, state: DeviceState(rawValue: r.state) ?? .registered,
                                canonicalID: r.canonicalID, online: r.online, createdAt: r.createdAt, lastSeenAt: r.lastSeenAt,
                                givenAPNsToken: r.apnsToken,
                                apnsEnvironment: r.apnsEnvironment.flatMap(APNsEnvironment.init(rawValue:)) ?? .sandbox,
                                apnsExpiresAt: r.apnsExpiresAt, client: DeviceClient(stored: r.client)))
            }
            try load.realClients { r in s.realClients[r.id] = RealClient(row: r) }
            try load.gcmRegistrations { r in
                s.gcmRegistrations[r.token] = r
                s.gcmRegistrationKeys[[r.client, r.app, r.subtype ?? "", r.instanceID ?? "", r.sender].joined(separator: "\u{1}")] = r.token
            }
            try load.installations { r in
                s.installations[r.fid] = r
                s.installationAuth[r.authToken] = r.fid
            }
            for id in s.devices.keys.sorted() {
                // No connection survives a restart: a real client's device is offline until it says hello.
                guard let link = s.devices[id]?.client else { continue }
                s.devices[id]?.online = false
                if link.kind == .fcm {
                    if let via = link.via { s.fcmRiders[via, default: []].append(id) }
                } else {
                    s.realClients[link.id]?.devices.append(id)
                }
                if let channel = link.channelID { s.clientChannels[channel] = id }
            }
            s.fidIndex[""] = nil
            try load.webPushSubscriptions { r in
                // A row of a device id reused after a reset belongs to a web device only.
                guard let d = s.devices[r.device], d.platform == .web else { return }
                var sub = WebPushSubscription(r)
                sub.endpointOverride = d.client?.endpoint
                _ = s.attachWebPush(sub)
                // An FCM registration's keys are for the mock's encryption: no push names them.
                if d.client?.kind == .fcm { s.webPushIndex[sub.id] = nil }
            }
            try load.deletedWebPushIDs { s.webPushDeleted.insert($0) }
            var keys = HeldCollapseKeys(blocks: blocks)
            var sentAtStop: [Int64] = []
            try load.heldDeliveries { h in
                if h.wasSent { sentAtStop.append(h.id) }
                let key = keys.key(h, platform: s.devices[h.device]?.platform)
                let transport = h.transport.flatMap(Transport.init(rawValue:))
                let entry = StoredEntry(deliveryID: h.id, collapseKey: key, expiresAt: h.expiresAt, isNotice: h.isNotice,
                                        noticeTotal: Int32(clamping: h.noticeTotal), ownRules: transport.map { rooms.holding[$0] != nil } ?? false, source: transport?.tag ?? 0)
                s.stored[h.device, default: []].append(entry)
                // A real client's delivery written before goes on from its record: its next write
                // counts as another send of it, with the same bytes.
                if let cd = h.clientDelivery.flatMap({ ClientDelivery.restored($0, entry: entry) }) {
                    s.clientDeliveries[h.id] = cd
                    s.clientDeliveryDevice[h.id] = h.device
                }
            }
            try load.subscriptions { device, topic, at in s.subscribe(device: device, topic: topic, at: at) }
            try load.groups({ key, name, sender, createdAt in
                s.insert(DeviceGroup(key: key, name: name, senderID: sender, members: [], createdAt: createdAt))
            }, member: { key, device in s.groups[key]?.members.append(device) })
            try load.retiredTokens { s.retiredTokens.insert($0) }
            // Upstream messages that were on a connection when the process stopped are queued
            // again: their connection is gone.
            try load.upstream { r in
                let u = UpstreamMessage(id: r.id, token: r.token, senderID: r.senderID, category: r.category, data: r.data,
                                        timeToLive: r.timeToLive, createdAt: r.createdAt, status: r.status == "sent" ? "queued" : r.status,
                                        sentAt: r.sentAt, ackedAt: r.ackedAt, connectionID: nil)
                s.upstream[u.id] = u
                s.upstreamOrder.append(u.id)
            }
            try load.inboxChunkSummary { device, last, count in
                s.inbox[device] = DeviceInbox(chunkedThrough: last, chunkedCount: count)
            }
            // The ids after each device's last chunk (all of them, in a store from before chunks).
            try load.deviceDeliveries { id, device in
                if let through = s.inbox[device]?.chunkedThrough, id <= through { return }
                s.inbox[device, default: DeviceInbox()].recent.append(id)
            }
            s.nextDeviceID = try load.maxDeviceID() + 1
            let maxMid = try load.maxMessageStamp()
            return (s, maxMid, sentAtStop)
        }
    }
}

extension Project {
    static func fromRow(sender: String, keys: String, apps: String, createdAt: Int64) -> Project? {
        guard case .array(let k)? = try? JSONParser.parse(keys), case .array(let a)? = try? JSONParser.parse(apps) else { return nil }
        return Project(
            senderID: sender, serverKeys: k.compactMap(\.stringValue),
            apps: a.compactMap { v in
                guard let o = v.objectValue, let app = o["app"]?.stringValue else { return nil }
                return AppConfig(app: app, platform: Platform(rawValue: o["platform"]?.stringValue ?? "") ?? .android,
                                 apnsCredential: o["apns_credential"]?.stringValue ?? "valid")
            }, createdAt: createdAt)
    }

    var keysJSON: String { JSONValue.array(serverKeys.map { .string($0) }).serialized() }

    var appsJSON: String {
        JSONValue.array(apps.map { a in
            .object(JSONObject([("app", .string(a.app)), ("platform", .string(a.platform.rawValue)),
                                ("apns_credential", .string(a.apnsCredential))]))
        }).serialized()
    }
}
