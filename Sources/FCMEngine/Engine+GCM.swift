// Long because: a GCM client's checkin, its registrations (made, found again, deleted) and the
// devices they reach share the clients' state under one lock.
public import FCMModel
import FCMCore
import FCMStore
import Platform

extension Engine {
    // MARK: Checkin

    /// A checkin: `androidID` 0 makes a new client (a random id and security token, nonzero,
    /// below 2^63); a known id with its token is the same pair again (a periodic checkin), its
    /// checkin facts kept. Nil: the id is unknown or the token is not its own.
    public func checkin(androidID: UInt64, securityToken: UInt64, info: CheckinInfo) throws(EngineError) -> (androidID: UInt64, securityToken: UInt64)? {
        let now = clock.nowMillis()
        let result: ((UInt64, UInt64), Store.Ticket)? = state.withLock { s in
            var client: RealClient
            var pair: (UInt64, UInt64)
            if androidID == 0 {
                var id = Self.random63()
                while s.realClients[String(id)] != nil { id = Self.random63() }
                pair = (id, Self.random63())
                client = RealClient(row: RealClientRow(id: String(pair.0), kind: ClientKind.gcm.rawValue, userAgent: nil, clientVersion: nil,
                                                       createdAt: now, lastConnectedAt: nil, secret: String(pair.1)))
            } else {
                guard let known = s.realClients[String(androidID)], known.kind == .gcm, known.row.secret == String(securityToken) else {
                    return nil
                }
                client = known
                pair = (androidID, securityToken)
            }
            client.row.userAgent = info.userAgent ?? client.row.userAgent
            client.row.checkin = Self.checkinJSON(info, at: now)
            s.realClients[client.row.id] = client
            return (pair, submit([Writes.saveClient(client.row)]))
        }
        guard let (pair, ticket) = result else { return nil }
        try commitControl(ticket)
        return pair
    }

    /// Whether `androidID` and `securityToken` (decimal, as `AidLogin` and MCS logins send them)
    /// are a checked-in client's.
    public func gcmAuthenticates(androidID: String, securityToken: String) -> Bool {
        state.withLock { s in
            guard let c = s.realClients[androidID], c.kind == .gcm, let secret = c.row.secret else { return false }
            return secret == securityToken
        }
    }

    /// Firebase installations the mock knows.
    public func installationCount() -> Int { state.withLock { $0.installations.count } }

    static func random63() -> UInt64 {
        var rng = SystemRandomNumberGenerator()
        var v: UInt64 = 0
        while v == 0 { v = rng.next() & 0x7FFF_FFFF_FFFF_FFFF }
        return v
    }

    static func checkinJSON(_ info: CheckinInfo, at: Int64) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("platform"); w.value(info.platform)
        w.key("chrome_version"); w.value(info.chromeVersion)
        w.key("channel"); w.value(info.channel)
        w.key("at"); w.value(rfc3339(millis: at))
        w.endObject()
        return w.string
    }

    // MARK: Registrations

    /// register3's GetToken: the token of this client's registration of `r.app`, subtype, Instance
    /// ID app id and sender (the same again for the same request while its device is registered;
    /// a new registration, token and device once the device was unregistered or deleted). A
    /// `wp:` subtype makes a `web` device (the first project's: a Web Push subscription belongs
    /// to none) whose subscription id is the token and whose endpoint `endpoint` writes from the
    /// token and the checkin's channel; a configured project's sender id an `android` device of
    /// it; any other sender (as Google's own) a token only.
    /// A new registration's token is `newToken()`'s (the room's form), made again while another
    /// registration or device has it.
    public func gcmRegister(_ r: GCMRegistration, newToken: () -> String,
                            endpoint: (_ token: String, _ channel: String?) -> String) throws(EngineError) -> String {
        let key = [r.androidID, r.app, r.subtype ?? "", r.instanceID ?? "", r.sender].joined(separator: "\u{1}")
        let now = clock.nowMillis()
        var created: Device?
        let result: Result<(String, Store.Ticket?), EngineError> = state.withLock { s in
            // A token only, or one whose device still takes sends, is the same again. One whose
            // device the control API ended (unregistered, deleted) is replaced: the client
            // registering again is how it recovers, as from Google dropping a registration.
            let old = s.gcmRegistrationKeys[key].flatMap { s.gcmRegistrations[$0] }
            // (Its device by id and token: after a restart a deleted device's id may be another's.)
            if let old, old.device.map({ id in s.devices[id].map { $0.state == .registered && $0.token == old.token } ?? false }) ?? true {
                return .success((old.token, nil))
            }
            guard let client = s.realClients[r.androidID], client.kind == .gcm else { return .failure(.notFound("no checkin has this android id")) }
            var token = newToken()
            while s.gcmRegistrations[token] != nil || s.tokenIndex[token] != nil { token = newToken() }
            let channel = client.row.checkin.flatMap { try? JSONParser.parse($0).objectValue?["channel"]?.stringValue }
            var link = DeviceClient(kind: .gcm, id: r.androidID, channelID: nil)
            (link.app, link.subtype, link.sender, link.instanceID, link.channel) = (r.app, r.subtype, r.sender, r.instanceID, channel)
            var writes: [WriteOp] = []
            var deviceID: Int64?
            if let origin = r.webOrigin {
                guard let first = s.projectOrder.first else { return .failure(.badRequest("no project is configured")) }
                let spec = DeviceSpec(token: token, senderID: first, app: origin, platform: .web, online: client.connection != nil)
                guard case .success((var d, true)) = placeDevice(spec, in: &s, now: now, relayed: true) else {
                    return .failure(.internal("no device could be made for the registration"))
                }
                let ends = endpoint(token, channel)
                if var sub = s.webPush[d.id] {
                    // The subscription is found by the token itself (an endpoint ends with the token).
                    s.webPushIndex[sub.id] = nil
                    sub.id = token
                    sub.applicationServerKey = r.senderIsKey ? r.sender : nil
                    sub.endpointOverride = ends
                    s.webPush[d.id] = sub
                    s.webPushIndex[token] = d.id
                }
                link.endpoint = ends
                d.client = link
                s.devices[d.id] = d
                deviceID = d.id
                created = d
            } else if let project = s.projects[r.sender] {
                let spec = DeviceSpec(token: token, senderID: project.senderID, app: r.subtype ?? r.app, platform: .android,
                                      online: client.connection != nil)
                guard case .success((var d, true)) = placeDevice(spec, in: &s, now: now) else {
                    return .failure(.internal("no device could be made for the registration"))
                }
                d.client = link
                s.devices[d.id] = d
                deviceID = d.id
                created = d
            }
            if let deviceID, let d = s.devices[deviceID] {
                s.realClients[r.androidID]?.devices.append(deviceID)
                writes += deviceWrites([d], state: s)
            }
            if let old {
                s.gcmRegistrations[old.token] = nil
                writes.append(Writes.deleteGCMRegistrations([old.token]))
            }
            let row = GCMRegistrationRow(token: token, client: r.androidID, app: r.app, subtype: r.subtype, sender: r.sender,
                                         instanceID: r.instanceID, device: deviceID, createdAt: now)
            s.gcmRegistrations[token] = row
            s.gcmRegistrationKeys[key] = token
            writes.append(Writes.saveGCMRegistrations([row]))
            return .success((token, submit(writes)))
        }
        let (token, ticket) = try result.get()
        if let ticket {
            try commitControl(ticket)
            if let created, events.hasReaders { events.publish([("device.created", renderDevice(created))]) }
        }
        return token
    }

    /// register3's `delete=true`: forgets the client's registrations of `app` and `subtype` (and
    /// `sender`, unless nil: `*`); their devices become `unregistered`. The tokens forgotten,
    /// oldest first.
    public func gcmUnregister(androidID: String, app: String, subtype: String?, sender: String?) throws(EngineError) -> [String] {
        let now = clock.nowMillis()
        var published: [(String, String)] = []
        var ended: [Int64] = []
        let (tokens, ticket): ([String], Store.Ticket?) = state.withLock { s in
            let gone = s.gcmRegistrations.values
                .filter { $0.client == androidID && $0.app == app && $0.subtype == subtype && (sender == nil || $0.sender == sender) }
                .sorted { ($0.createdAt, $0.token) < ($1.createdAt, $1.token) }
            guard !gone.isEmpty else { return ([], nil) }
            var writes: [WriteOp] = [Writes.deleteGCMRegistrations(gone.map(\.token))]
            for r in gone {
                s.gcmRegistrations[r.token] = nil
                s.gcmRegistrationKeys = s.gcmRegistrationKeys.filter { $0.value != r.token }
                guard let id = r.device, var d = s.devices[id], d.state == .registered else { continue }
                ended.append(id)
                d.state = .unregistered
                d.lastSeenAt = now
                s.devices[id] = d
                writes.append(Writes.unregister(device: id, at: now))
                published.append(("device.updated", s.render(d, now: now)))
                // What it held can never reach it now.
                var changes: [(Int64, String)] = []
                for e in s.stored.removeValue(forKey: id) ?? [] {
                    changes.append((e.deliveryID, "dropped"))
                    s.clientPayloads[e.deliveryID] = nil
                }
                if !changes.isEmpty { writes.append(Writes.setDeliveryStatuses(changes, at: now)) }
            }
            return (gone.map(\.token), submit(writes))
        }
        if let ticket {
            try commitControl(ticket)
            events.publish(published)
            unregisterRiders(of: ended)
        }
        return tokens
    }
}
