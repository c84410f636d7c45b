public import FCMModel
import Platform
import FCMCore

extension Credentials {
    /// Whether `token` is an issued access token good at `now` (ms on the mock's clock).
    /// `named` is the project the request names, if known: usually the token's own, which then
    /// needs no second look-up.
    func issuedToken(_ token: String, now: Int64, named: Project? = nil) -> IssuedToken {
        guard let t = accessTokens[token] else { return .unknown }
        let owner = named?.senderID == t.senderID ? named : projectsByName[t.senderID]
        guard t.expiresAt > now, let p = owner, p.senderID == t.senderID,
            p.serviceAccounts.contains(where: { $0.privateKeyID == t.privateKeyID })
        else { return .invalid }
        return .valid(p.senderID)
    }
}

extension Engine {
    /// Most issued tokens kept: SDKs reuse a token for its hour, so only a loop that asks for
    /// tokens over and over reaches this; memory stays bounded (about 400 bytes a token).
    static let maxAccessTokens = 100_000

    /// Drops the expired tokens, then, if still over the bound, the oldest tenth.
    static func prune(_ tokens: inout [String: AccessToken], now: Int64) {
        tokens = tokens.filter { $0.value.expiresAt > now }
        guard tokens.count > maxAccessTokens else { return }
        let oldest = tokens.values.sorted { ($0.issuedAt, $0.id) < ($1.issuedAt, $1.id) }.prefix(maxAccessTokens / 10)
        for t in oldest { tokens[t.token] = nil }
    }

    /// An access token for `account` of the project `senderID`, as the token endpoint issues it
    /// once an assertion passed; the control API's `POST …/access-tokens` (the web page's compose
    /// form) asks for one directly. `now` is in seconds on the mock's clock.
    /// `token`, `scope` and its life in seconds are the room's (Google's: `GoogleAccessTokens`).
    public func mintAccessToken(account: ServiceAccount, senderID: String, token: String, scope: String, lifetimeSeconds: Int64,
                                now: Int64? = nil) -> AccessToken {
        let now = now ?? clock.nowMillis() / 1000
        var rng = SystemRandomNumberGenerator()
        let id = randomString(12, from: RandomAlphabet.hex, using: &rng)
        let issued = AccessToken(id: id, token: token, clientEmail: account.clientEmail, privateKeyID: account.privateKeyID,
                                 senderID: senderID, scope: scope, issuedAt: now * 1000,
                                 expiresAt: (now + lifetimeSeconds) * 1000)
        credentials.withLock { c in
            c.accessTokens[token] = issued
            if c.accessTokens.count > Self.maxAccessTokens { Self.prune(&c.accessTokens, now: now * 1000) }
        }
        return issued
    }

    /// The service account whose key has this id, and its project.
    public func serviceAccount(keyID: String) -> (ServiceAccount, Project)? {
        state.withLock { s in
            for p in s.projects.values {
                if let a = p.serviceAccounts.first(where: { $0.privateKeyID == keyID }) { return (a, p) }
            }
            return nil
        }
    }

    /// The access tokens issued since start or the last reset, oldest first.
    public func accessTokens() -> [AccessToken] {
        credentials.withLock { $0.accessTokens.values.sorted { ($0.issuedAt, $0.id) < ($1.issuedAt, $1.id) } }
    }

    /// Revokes an issued token by its id.
    public func revokeAccessToken(id: String) throws(EngineError) {
        let found = credentials.withLock { c -> Bool in
            guard let t = c.accessTokens.values.first(where: { $0.id == id }) else { return false }
            c.accessTokens[t.token] = nil
            // Remembered (bounded like the issued ones) so a refusal can say "revoked".
            c.revokedTokens[t.token] = t
            if c.revokedTokens.count > Self.maxAccessTokens { Self.prune(&c.revokedTokens, now: clock.nowMillis()) }
            return true
        }
        if !found { throw .notFound("access token '\(id)' does not exist") }
    }
}

extension Engine {
    /// What `token` is worth as an access token the token endpoint issued, and the project
    /// `name` names (by project id or sender id), in one look under the credentials lock: what
    /// every HTTP v1 send asks (`named` is usually the token's own project).
    public func issuedToken(_ token: String, forProject name: String?) -> (IssuedToken, Project?) {
        let now = clock.nowMillis()
        return credentials.withLock { c in
            let project = name.flatMap(c.project(named:))
            return (c.issuedToken(token, now: now, named: project), project)
        }
    }

    /// The issued access token `token` is, or the revoked one it was: to say why it is refused.
    public func accessTokenRecord(_ token: String) -> (issued: AccessToken?, revoked: AccessToken?) {
        credentials.withLock { ($0.accessTokens[token], $0.revokedTokens[token]) }
    }
}
