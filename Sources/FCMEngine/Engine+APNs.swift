public import FCMCore
import FCMStore
import Platform

/// An APNs team: the apps (bundle ids) its keys may send to.
public struct APNsTeam: Sendable, Equatable {
    public let teamID: String
    public var bundleIDs: [String]
    public let createdAt: Int64
}

/// An APNs signing key the mock made: its public half (the private one was shown once).
public struct APNsKey: Sendable, Equatable {
    public let keyID: String
    public let teamID: String
    public let publicKeyPEM: String
    public let createdAt: Int64
}

/// Who a verified provider token speaks for.
public struct APNsTokenAuthorization: Sendable, Equatable {
    public let keyID: String
    public let teamID: String
}

/// The provider token of an `authorization: bearer <JWT>` header as the key of the verified
/// tokens, read in place in the header (no copy of the token cut out of it): the bytes after
/// `bearer ` less the blanks around them. Equal when those bytes are, so `Bearer`, `bearer` and
/// extra blanks share one entry, as the token's text did. Hashed by the token's length and its
/// last 32 bytes only: those end its ES256 signature, which no two tokens share by chance, and
/// hashing the ~200-byte header whole cost a send more than the rest of the cache's work
/// (docs/performance.md, "APNs"). Only tokens whose signature verified are kept, so two with the
/// same length and tail made on purpose would need the signing key.
struct ProviderTokenKey: Hashable, Sendable {
    /// The header, which starts with `bearer ` in any case (checked before a key is made).
    let header: String
    /// The token's UTF-8 bytes in `header`: `start..<end`.
    let start: Int, end: Int

    static let hashedBytes = 32

    init(header: String) {
        self.header = header
        (start, end) = Self.withBytes(of: header) { b in
            var (s, e) = (min(7, b.count), b.count)
            while s < e, b[s] == 0x20 || b[s] == 0x09 { s += 1 }
            while e > s, b[e - 1] == 0x20 || b[e - 1] == 0x09 { e -= 1 }
            return (s, e)
        }
    }

    private static func withBytes<R>(of s: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        s.utf8.withContiguousStorageIfAvailable(body) ?? Array(s.utf8).withUnsafeBufferPointer(body)
    }

    /// The token's text.
    var token: String { withToken { String(decoding: $0, as: UTF8.self) } }

    private func withToken<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        Self.withBytes(of: header) { body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    /// Equal byte for byte (not by `String`'s canonical equivalence, which the hash could not follow).
    static func == (a: ProviderTokenKey, b: ProviderTokenKey) -> Bool {
        a.end - a.start == b.end - b.start && a.withToken { x in b.withToken { y in sameBytes(x, y) } }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(end - start)
        withToken { t in hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: t.suffix(Self.hashedBytes)))) }
    }
}

/// The APNs credentials, under their own lock: every APNs send reads them, and none waits for
/// the send path's state lock to do so.
struct APNsCredentials: Sendable {
    var teams: [String: APNsTeam] = [:]
    var keys: [String: APNsKey] = [:]
    /// Provider tokens whose signature was checked, by their exact text as their header carries
    /// it (`ProviderTokenKey`), with their `iat`: a client signs one token and sends it for up
    /// to an hour, and an ECDSA check per request would cost more than the send.
    var verified: [ProviderTokenKey: (key: String, team: String, issuedAt: Int64)] = [:]
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
    /// A provider token is good for an hour after its `iat` (Apple: "no older than one hour").
    public static let providerTokenSeconds: Int64 = 3600
    /// How far a provider token's `iat` may be ahead of the mock's clock.
    public static let providerTokenSkewSeconds: Int64 = 60
    static let maxVerifiedProviderTokens = 1000

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
        try Self.checkAppleID(teamID, what: "team_id")
        for b in bundleIDs { try Self.checkBundleID(b) }
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

    /// Registers a signing key of `teamID` (the team made, with `bundleIDs` added to it); `keyID`
    /// generated when nil. The caller made the key pair and keeps the private half.
    public func addAPNsKey(teamID: String, bundleIDs: [String], keyID: String?, publicKeyPEM: String) throws(EngineError) -> APNsKey {
        let id = keyID ?? Self.newAppleID()
        try Self.checkAppleID(id, what: "key_id")
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

    /// Revokes a key: its provider tokens are refused from the next request on.
    public func revokeAPNsKey(_ keyID: String) throws(EngineError) {
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            guard s.keys.removeValue(forKey: keyID) != nil else { return nil }
            s.verified = s.verified.filter { $0.value.key != keyID }
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

    /// With `--unknown-tokens register`, the project an unknown well-formed APNs token of
    /// `bundleID` would become a device of: the first that has the app as an iOS app. Nil when
    /// the policy is `reject` or no project has the app (the send is then `BadDeviceToken`).
    /// Asked at the device step of the contract's order; the device is made only once the send
    /// passed its body and size rules (`registerAPNsDevice`).
    public func apnsRegistrationProject(bundleID: String) -> String? {
        guard unknownTokens == .register else { return nil }
        return state.withLock { s in
            s.projectOrder.first { id in s.projects[id]?.apps.contains { $0.app == bundleID && $0.platform == .ios } == true }
        }
    }

    /// The device an unknown APNs token becomes in project `senderID`
    /// (`apnsRegistrationProject`): a new online iOS device of `bundleID` in `environment`.
    /// Nil when the project was removed in between.
    public func registerAPNsDevice(token: String, senderID: String, bundleID: String, environment: APNsEnvironment) -> Device? {
        let spec = DeviceSpec(token: nil, senderID: senderID, app: bundleID, platform: .ios, online: true, apnsToken: token,
                              apnsEnvironment: environment)
        // Two first sends of one token at once: the second finds the device the first made.
        return (try? createDevice(spec)) ?? device(apnsToken: token)
    }

    // MARK: Provider tokens

    /// The key and team an `authorization: bearer <JWT>` header speaks for (docs/spec/apns.md
    /// section 3), or the reason it is refused: `MissingProviderToken` without one;
    /// `InvalidProviderToken` for anything but an ES256 JWT with a known `kid`, the key's team as
    /// `iss`, an `iat` at most 60 s ahead and a good signature; `ExpiredProviderToken` when `iat`
    /// is over an hour old on the mock's clock. A verified token is remembered by its text, so only
    /// its age is checked again (and that its key was not revoked).
    public func authorizeProviderToken(_ header: String?) -> Result<APNsTokenAuthorization, APNsError> {
        guard let header, !header.isEmpty else {
            return .failure(APNsError(.missingProviderToken, "no authorization header: token authentication needs a provider token"))
        }
        guard header.utf8.count > 7, hasPrefixIgnoringCase(header.utf8, "bearer ") else {
            return .failure(APNsError(.invalidProviderToken, "the authorization header is not 'bearer <JWT>'"))
        }
        // A verified token is looked up in its header, with no copy.
        let cacheKey = ProviderTokenKey(header: header)
        let now = clock.nowMillis() / 1000
        if let known = apnsCredentials.withLock({ s -> (key: String, team: String, issuedAt: Int64)? in
            guard let v = s.verified[cacheKey], s.keys[v.key] != nil else { return nil }
            return v
        }) {
            if let expired = Self.expiry(issuedAt: known.issuedAt, now: now) { return .failure(expired) }
            return .success(APNsTokenAuthorization(keyID: known.key, teamID: known.team))
        }
        // The token verified is the one the cache keeps it under: the key's bytes.
        let token = cacheKey.token
        let jwt: JWT
        do {
            jwt = try JWT.parse(token, algorithm: .es256)
        } catch {
            return .failure(APNsError(.invalidProviderToken, "the provider token is not an ES256 JWT with a kid: \(error)"))
        }
        guard let key = apnsCredentials.withLock({ $0.keys[jwt.keyID] }) else {
            return .failure(APNsError(.invalidProviderToken, "no key has the id '\(jwt.keyID)' (never made, or revoked)"))
        }
        guard let iss = jwt.claims["iss"]?.stringValue, iss == key.teamID else {
            return .failure(APNsError(.invalidProviderToken, "iss is not the team of key \(key.keyID) (\(key.teamID))"))
        }
        guard let iat = jwt.seconds("iat") else {
            return .failure(APNsError(.invalidProviderToken, "the provider token has no iat of whole seconds"))
        }
        guard signatures.es256(key.publicKeyPEM, jwt.signingInput, jwt.signature) else {
            return .failure(APNsError(.invalidProviderToken, "the signature does not verify with key \(key.keyID)"))
        }
        if let refused = Self.expiry(issuedAt: iat, now: now) { return .failure(refused) }
        apnsCredentials.withLock { s in
            // Bounded: a client signing a token per request only refills it.
            if s.verified.count >= Self.maxVerifiedProviderTokens { s.verified.removeAll(keepingCapacity: true) }
            s.verified[cacheKey] = (key.keyID, key.teamID, iat)
        }
        return .success(APNsTokenAuthorization(keyID: key.keyID, teamID: key.teamID))
    }

    /// The refusal of a token issued at `issuedAt` at `now` (seconds): from the future, or too old.
    static func expiry(issuedAt: Int64, now: Int64) -> APNsError? {
        if issuedAt > now + providerTokenSkewSeconds {
            return APNsError(.invalidProviderToken, "iat is \(issuedAt - now) s ahead of the mock's clock (at most \(providerTokenSkewSeconds))")
        }
        if now - issuedAt > providerTokenSeconds {
            return APNsError(.expiredProviderToken, "the provider token was issued \(now - issuedAt) s ago: over an hour on the mock's clock")
        }
        return nil
    }

    // MARK: Names

    /// A new key id: 10 characters of uppercase letters and digits, as Apple's.
    static func newAppleID() -> String {
        randomString(10, from: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8))
    }

    /// Team and key ids are 10 uppercase letters or digits.
    static func checkAppleID(_ id: String, what: String) throws(EngineError) {
        guard id.utf8.count == 10, id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }) else {
            throw .badRequest("\(what) must be 10 uppercase letters or digits, as Apple's are")
        }
    }

    static func checkBundleID(_ b: String) throws(EngineError) {
        guard !b.isEmpty, b.utf8.count <= 255,
            b.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\"") })
        else { throw .badRequest("a bundle id is 1 to 255 printable ASCII characters without spaces or '/'") }
    }

    static func unique(_ list: [String]) -> [String] {
        var seen = Set<String>()
        return list.filter { seen.insert($0).inserted }
    }
}
