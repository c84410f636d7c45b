public import FCMModel
import FCMCore
import FCMStore
import Platform

/// The APNs credentials, under their own lock: every APNs send reads them, and none waits for
/// the send path's state lock to do so.
struct APNsCredentials: Sendable {
    var teams: [String: APNsTeam] = [:]
    var keys: [String: APNsKey] = [:]
    /// The client certificates the mock issued, by serial (Engine+APNsCertificates.swift).
    var certificates: [String: APNsCertificate] = [:]

    static func load(from store: Store) throws(StoreError) -> APNsCredentials {
        try store.read { (c: StoreReader) throws(StoreError) -> APNsCredentials in
            var s = APNsCredentials()
            let load = c.loader
            try load.apnsTeams { id, bundles, createdAt in
                let list = (try? JSONParser.parse(Array(bundles.utf8)).arrayValue)?.compactMap(\.stringValue) ?? []
                s.teams[id] = APNsTeam(teamID: id, bundleIDs: list, createdAt: createdAt)
            }
            try load.apnsKeys { id, team, pem, createdAt in
                s.keys[id] = APNsKey(keyID: id, teamID: team, publicKeyPEM: pem, createdAt: createdAt)
            }
            try loadCertificates(load, into: &s)
            return s
        }
    }
}

extension Engine {

    // MARK: Teams and keys

    /// Teams in creation order.
    public func apnsTeams() -> [APNsTeam] {
        apnsCredentials.withLock { Array($0.teams.values) }.sorted { ($0.createdAt, $0.teamID) < ($1.createdAt, $1.teamID) }
    }

    /// Keys in creation order.
    public func apnsKeys() -> [APNsKey] {
        apnsCredentials.withLock { Array($0.keys.values) }.sorted { ($0.createdAt, $0.keyID) < ($1.createdAt, $1.keyID) }
    }

    /// Creates team `teamID` or replaces its bundle ids (`adding`: adds them to those it has).
    @discardableResult
    public func putAPNsTeam(_ teamID: String, bundleIDs: [String], adding: Bool = false) throws(EngineError) -> APNsTeam {
        try APNsTeam.checkAppleID(teamID, what: "team_id")
        for b in bundleIDs { try APNsTeam.checkBundleID(b) }
        let now = clock.nowMillis()
        let (team, ticket) = apnsCredentials.withLock { s in
            var team = s.teams[teamID] ?? APNsTeam(teamID: teamID, bundleIDs: [], createdAt: now)
            if adding {
                for b in bundleIDs where !team.bundleIDs.contains(b) { team.bundleIDs.append(b) }
            } else {
                team.bundleIDs = Self.unique(bundleIDs)
            }
            s.teams[teamID] = team
            var w = JSONWriter(capacity: 64)
            w.beginArray()
            for b in team.bundleIDs { w.value(b) }
            w.endArray()
            return (team, submit([Writes.saveAPNsTeam(teamID: teamID, bundleIDsJSON: w.string, createdAt: team.createdAt)]))
        }
        try commitControl(ticket)
        return team
    }

    /// Registers signing key `id` of `teamID` (the team made, with `bundleIDs` added to it). The
    /// caller made the key pair and keeps the private half.
    public func addAPNsKey(teamID: String, bundleIDs: [String], keyID id: String, publicKeyPEM: String) throws(EngineError) -> APNsKey {
        try APNsTeam.checkAppleID(id, what: "key_id")
        if apnsCredentials.withLock({ $0.keys[id] != nil }) { throw .conflict("APNs key '\(id)' exists") }
        try putAPNsTeam(teamID, bundleIDs: bundleIDs, adding: true)
        let key = APNsKey(keyID: id, teamID: teamID, publicKeyPEM: publicKeyPEM, createdAt: clock.nowMillis())
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            guard s.keys[id] == nil else { return nil }
            s.keys[id] = key
            return submit([Writes.saveAPNsKey(keyID: id, teamID: teamID, publicKey: publicKeyPEM, createdAt: key.createdAt)])
        }
        guard let ticket else { throw .conflict("APNs key '\(id)' exists") }
        try commitControl(ticket)
        return key
    }

    /// A fixture's key (`apns.teams[].keys[]`): registered under `teamID` (which must exist), or
    /// put back as the fixture says when a key of that id is another one or was revoked (a
    /// restart and a reset apply the fixtures again); nothing is written when it is as declared.
    func putFixtureAPNsKey(teamID: String, keyID: String, publicKeyPEM: String) throws(EngineError) {
        try APNsTeam.checkAppleID(keyID, what: "key_id")
        try APNsTeam.checkAppleID(teamID, what: "team_id")
        let now = clock.nowMillis()
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            if let k = s.keys[keyID], k.teamID == teamID, k.publicKeyPEM == publicKeyPEM { return nil }
            s.keys[keyID] = APNsKey(keyID: keyID, teamID: teamID, publicKeyPEM: publicKeyPEM, createdAt: now)
            return submit([Writes.saveAPNsKey(keyID: keyID, teamID: teamID, publicKey: publicKeyPEM, createdAt: now)])
        }
        if let ticket { try commitControl(ticket) }
    }

    /// Revokes a key: its provider tokens are refused from the next request on.
    public func revokeAPNsKey(_ keyID: String) throws(EngineError) {
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            guard s.keys.removeValue(forKey: keyID) != nil else { return nil }
            return submit([Writes.deleteAPNsKey(keyID)])
        }
        guard let ticket else { throw .notFound("APNs key '\(keyID)' does not exist") }
        try commitControl(ticket)
    }

    /// Whether team `teamID` has the app `bundleID`.
    public func apnsTeam(_ teamID: String, has bundleID: String) -> Bool {
        apnsCredentials.withLock { $0.teams[teamID]?.bundleIDs.contains(bundleID) ?? false }
    }

    // MARK: Devices

    /// The iOS device whose APNs token is `apnsToken` (hex digits of either case).
    public func device(apnsToken: String) -> Device? {
        let key = APNsDeviceToken.lowercased(apnsToken)
        return state.withLock { s in s.apnsIndex[key].flatMap { s.devices[$0] } }
    }

    // MARK: Keys

    /// The signing key with this id (nil: never made, or revoked).
    public func apnsKey(_ keyID: String) -> APNsKey? {
        apnsCredentials.withLock { $0.keys[keyID] }
    }

    static func unique(_ list: [String]) -> [String] {
        var seen = Set<String>()
        return list.filter { seen.insert($0).inserted }
    }
}

extension Engine {
    /// Sets when an iOS device's APNs token expires (`at`, mock clock ms; nil: never); a send
    /// through APNs after it is refused (the room's `ExpiredToken`). Refused when no device has
    /// the token, or it is not an iOS device.
    public func setAPNsExpiry(_ token: String, at: Int64?) throws(EngineError) -> Device {
        let result: Result<(Device, Store.Ticket), EngineError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard d.platform == .ios else { return .failure(.badRequest("expires_at is the APNs token's: for ios devices only")) }
            d.apnsExpiresAt = at
            s.devices[d.id] = d
            return .success((d, submit([Writes.setAPNsExpiry(device: d.id, at: at)])))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders { events.publish([("device.updated", renderDevice(device))]) }
        return device
    }
}
