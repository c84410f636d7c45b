import Platform
import FCMCore

/// An access token the token endpoint issued.
public struct AccessToken: Sendable, Equatable {
    /// 12 hex characters: how the control API names it without showing the token.
    public let id: String
    public let token: String
    public let clientEmail: String
    public let privateKeyID: String
    public let senderID: String
    public let scope: String
    public let issuedAt: Int64
    public let expiresAt: Int64
}

/// What an issued access token is worth now.
enum IssuedToken {
    /// Not a token the endpoint issued (maybe a self-signed JWT).
    case unknown
    /// Expired, or its key, account or project is gone.
    case invalid
    /// Good for this sender id.
    case valid(String)
}

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

/// A self-signed JWT whose signature was checked: its key and when it expires (seconds).
struct VerifiedJWT: Sendable {
    let keyID: String
    let expiresAt: Int64
}

/// Why the token endpoint refused an assertion, with Google's answer for it.
public enum TokenRefusal: Error, Sendable, Equatable {
    case unsupportedGrantType(String)
    case invalidSignature
    case accountNotFound
    case badAudience
    case badTimes
    case invalidScope

    /// `(error, error_description)`.
    public var answer: (String, String) {
        switch self {
        case .unsupportedGrantType(let t): ("unsupported_grant_type", "Invalid grant_type: \(t)")
        case .invalidSignature: ("invalid_grant", "Invalid JWT Signature.")
        case .accountNotFound: ("invalid_grant", "Invalid grant: account not found")
        case .badAudience: ("invalid_grant", "Invalid JWT: Failed audience check.")
        case .badTimes:
            ("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
        case .invalidScope: ("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }
    }
}

extension Engine {
    /// The grant type service accounts use.
    static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Scopes that allow sending with FCM.
    static let messagingScopes: Set<String> = ["https://www.googleapis.com/auth/firebase.messaging",
                                               "https://www.googleapis.com/auth/cloud-platform"]
    /// Seconds an access token lives (Google answers `expires_in: 3599`).
    public static let accessTokenSeconds: Int64 = 3599
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

    /// How far a JWT's `iat` may be ahead of the mock's clock (clocks of app servers drift).
    static let allowedSkewSeconds: Int64 = 300

    /// The token endpoint (`POST /token`): checks a service account's signed JWT and issues an
    /// access token. The `kid` is looked up first (an unknown one, like any algorithm but RS256
    /// or a signature that does not verify, is "Invalid JWT Signature."), then `iss`, then `aud`
    /// (a string that `isTokenURI` accepts: the caller knows which URIs name this endpoint), the
    /// times on the mock's clock (`exp` at most an hour after `iat`), and the scope.
    ///
    /// With `--accept-any-key`, a well-formed RS256 assertion whose `kid` no project knows is
    /// taken as the first project's (nothing to verify its signature with); its `iss` must be
    /// there, and `aud`, the times and scope are checked as usual.
    ///
    /// Every refusal is logged with why (`tokenRefusalReason`): Google's answer names only the kind.
    public func issueAccessToken(grantType: String?, assertion: String?,
                                 isTokenURI: (String) -> Bool) throws(TokenRefusal) -> AccessToken {
        do {
            return try checkedAccessToken(grantType: grantType, assertion: assertion, isTokenURI: isTokenURI)
        } catch {
            let (code, _) = error.answer
            notice("token request refused", [("error", code), ("reason", tokenRefusalReason(error, grantType: grantType, assertion: assertion))])
            throw error
        }
    }

    private func checkedAccessToken(grantType: String?, assertion: String?,
                                    isTokenURI: (String) -> Bool) throws(TokenRefusal) -> AccessToken {
        guard grantType == Self.jwtBearerGrant else { throw .unsupportedGrantType(grantType ?? "") }
        guard let assertion, let jwt = try? JWT.parse(assertion) else { throw .invalidSignature }
        let account: ServiceAccount, senderID: String
        if let (known, project) = serviceAccount(keyID: jwt.keyID) {
            guard signatures.rs256(known.publicKeyPEM, jwt.signingInput, jwt.signature)
            else { throw .invalidSignature }
            guard jwt.claims["iss"]?.stringValue == known.clientEmail else { throw .accountNotFound }
            (account, senderID) = (known, project.senderID)
        } else if acceptAnyKey {
            guard let iss = jwt.claims["iss"]?.stringValue, !iss.isEmpty, let first = firstProjectID() else { throw .accountNotFound }
            account = ServiceAccount(privateKeyID: jwt.keyID, clientEmail: iss, clientID: "", publicKeyPEM: "", createdAt: 0)
            senderID = first
        } else {
            throw .invalidSignature
        }
        // Google takes only a string here (an array, even of the right URI, is refused).
        guard let aud = jwt.claims["aud"]?.stringValue, isTokenURI(aud) else { throw .badAudience }
        let now = clock.nowMillis() / 1000
        guard let iat = jwt.seconds("iat"), let exp = jwt.seconds("exp"), exp > iat, exp - iat <= 3600,
            iat <= now + Self.allowedSkewSeconds, exp > now
        else { throw .badTimes }
        let scope = jwt.claims["scope"]?.stringValue ?? ""
        guard !Self.messagingScopes.isDisjoint(with: scope.split(separator: " ").map(String.init)) else { throw .invalidScope }
        return mintAccessToken(account: account, senderID: senderID, scope: scope, now: now)
    }

    /// An access token for `account` of the project `senderID`, as the token endpoint issues it
    /// once an assertion passed; the control API's `POST …/access-tokens` (the web page's compose
    /// form) asks for one directly. `now` is in seconds on the mock's clock.
    public func mintAccessToken(account: ServiceAccount, senderID: String,
                         scope: String = "https://www.googleapis.com/auth/firebase.messaging",
                         now: Int64? = nil) -> AccessToken {
        let now = now ?? clock.nowMillis() / 1000
        let token = "ya29.mock" + randomString(150, from: RandomAlphabet.base64URL)
        let id = randomString(12, from: RandomAlphabet.hex)
        let issued = AccessToken(id: id, token: token, clientEmail: account.clientEmail, privateKeyID: account.privateKeyID,
                                 senderID: senderID, scope: scope, issuedAt: now * 1000,
                                 expiresAt: (now + Self.accessTokenSeconds) * 1000)
        credentials.withLock { c in
            c.accessTokens[token] = issued
            if c.accessTokens.count > Self.maxAccessTokens { Self.prune(&c.accessTokens, now: now * 1000) }
        }
        return issued
    }

    /// The audiences a self-signed JWT may name (google-auth's "JWT access" uses the API's root).
    static let jwtAudiences: Set<String> = ["https://fcm.googleapis.com/", "https://fcm.googleapis.com"]

    /// The sender id of the project a Bearer credential stands for, or nil: an access token the
    /// token endpoint issued (not expired on the mock's clock, not revoked, its key not deleted,
    /// its project still there), or a self-signed JWT (google-auth's "JWT access": RS256 with
    /// the `kid` of a known key, `iss` its account, `aud` FCM's root URL, `exp` ahead of the
    /// mock's clock, `iat` not further ahead than the skew allowed).
    ///
    /// Issued tokens are looked up under the credentials lock (they live there, with a copy of
    /// the projects and accounts that decide whether they still count), never waiting for a
    /// send: one dictionary lookup.
    public func senderID(bearer token: String) -> String? {
        let now = clock.nowMillis()
        switch credentials.withLock({ $0.issuedToken(token, now: now) }) {
        case .valid(let sender): return sender
        case .invalid: return nil
        case .unknown: return senderID(selfSignedJWT: token, now: now / 1000)
        }
    }

    /// See `senderID(bearer:)`. A JWT verified once is remembered until it expires (its key is
    /// looked up again every time: a deleted key's JWTs stop working at once).
    private func senderID(selfSignedJWT token: String, now: Int64) -> String? {
        if let known = verifiedJWTs.withLock({ $0[token] }) {
            guard known.expiresAt > now, let (_, project) = serviceAccount(keyID: known.keyID) else { return nil }
            return project.senderID
        }
        guard let jwt = try? JWT.parse(token), let (account, project) = serviceAccount(keyID: jwt.keyID),
            jwt.claims["iss"]?.stringValue == account.clientEmail,
            let aud = jwt.claims["aud"]?.stringValue, Self.jwtAudiences.contains(aud),
            let exp = jwt.seconds("exp"), exp > now, (jwt.seconds("iat") ?? now) <= now + Self.allowedSkewSeconds,
            signatures.rs256(account.publicKeyPEM, jwt.signingInput, jwt.signature)
        else { return nil }
        verifiedJWTs.withLock { known in
            // Bounded: a client minting a JWT per request only refills it.
            if known.count >= Self.maxVerifiedJWTs { known.removeAll(keepingCapacity: true) }
            known[token] = VerifiedJWT(keyID: jwt.keyID, expiresAt: exp)
        }
        return project.senderID
    }

    static let maxVerifiedJWTs = 1000

    /// Why a credential does not reach the project a path names; each carries the reason in
    /// words (for the record and the log: the wire says less).
    public enum ProjectAccessRefusal: Error, Sendable, Equatable {
        /// No credential, or one that is not (or no longer) good.
        case unauthenticated(String)
        /// No such project.
        case unknownProject(String)
        /// A good credential of another project (the path's name first).
        case otherProject(String, String)
    }

    /// The project an HTTP v1 path names (`{project}`: its id or number), if the request's
    /// Bearer credential stands for it (docs/spec/fcm-v1.md section 2): none or an invalid one
    /// is 401, an unknown project 404, another project's credential 403. With
    /// `--accept-any-key`, any non-empty Bearer token stands for the path's project.
    public func v1Project(authorization: String?, project name: String) -> Result<Project, ProjectAccessRefusal> {
        guard let token = Self.bearerToken(authorization) else {
            return .failure(.unauthenticated(bearerRefusalReason(authorization)))
        }
        let now = clock.nowMillis()
        // An issued token and the project in one look under the lock: the common case.
        let (issued, project): (IssuedToken, Project?) = credentials.withLock { c in
            let project = c.project(named: name)
            return (acceptAnyKey ? .unknown : c.issuedToken(token, now: now, named: project), project)
        }
        var sender: String?
        if !acceptAnyKey {
            switch issued {
            case .valid(let s): sender = s
            case .invalid: return .failure(.unauthenticated(bearerRefusalReason(authorization)))
            case .unknown:
                guard let s = senderID(selfSignedJWT: token, now: now / 1000) else {
                    return .failure(.unauthenticated(bearerRefusalReason(authorization)))
                }
                sender = s
            }
        }
        guard let project else { return .failure(.unknownProject("no project '\(name)' (by project id or sender id)")) }
        if let sender, sender != project.senderID {
            let own = credentials.withLock { $0.projectsByName[sender]?.projectID } ?? sender
            return .failure(.otherProject(name,
                "the credential is for project \(own) (sender id \(sender)); the path names \(project.projectID) (sender id \(project.senderID))"))
        }
        return .success(project)
    }

    /// The service account whose key has this id, and its project.
    func serviceAccount(keyID: String) -> (ServiceAccount, Project)? {
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
    /// Why `authorization` is no valid Bearer credential of any project, in words a tester can
    /// act on: the failure path only, so it repeats the checks of `v1Project` and
    /// `senderID(selfSignedJWT:)` to name the one that failed, and leaves them untouched.
    func bearerRefusalReason(_ authorization: String?) -> String {
        guard let header = authorization, !header.allSatisfy({ $0 == " " }) else { return "no Authorization header" }
        guard let token = Self.bearerToken(header) else {
            if hasPrefixIgnoringCase(header.drop { $0 == " " }.utf8, "key=") {
                return "a legacy server key (key=…): HTTP v1 takes an OAuth 2.0 access token or a self-signed JWT (Authorization: Bearer …)"
            }
            return "the Authorization header is not 'Bearer TOKEN'"
        }
        let nowMs = clock.nowMillis()
        let (issued, revoked) = credentials.withLock { ($0.accessTokens[token], $0.revokedTokens[token]) }
        if let t = issued ?? revoked {
            if revoked != nil { return "access token \(t.id) was revoked (DELETE /api/v1/access-tokens/\(t.id))" }
            if t.expiresAt <= nowMs {
                return "access token \(t.id) expired at \(rfc3339(millis: t.expiresAt)) on the mock's clock (now \(rfc3339(millis: nowMs)))"
            }
            guard let project = credentials.withLock({ $0.projectsByName[t.senderID] }) else {
                return "access token \(t.id): its project (sender id \(t.senderID)) no longer exists"
            }
            if !project.serviceAccounts.contains(where: { $0.privateKeyID == t.privateKeyID }) {
                return "access token \(t.id): its service account key \(t.privateKeyID) (\(t.clientEmail)) was deleted"
            }
            return "access token \(t.id) is no longer valid"
        }
        let jwt: JWT
        do {
            jwt = try JWT.parse(token)
        } catch {
            return "the Bearer token is neither an access token this server issued (since its start or last reset) nor a JWT ("
                + Self.describe(error) + ")"
        }
        let now = nowMs / 1000
        guard let (account, _) = serviceAccount(keyID: jwt.keyID) else {
            return "self-signed JWT: kid \(jwt.keyID) is no service account's key"
        }
        let iss = jwt.claims["iss"]?.stringValue ?? ""
        if iss != account.clientEmail { return "self-signed JWT: iss '\(iss)' is not \(account.clientEmail), the account of key \(jwt.keyID)" }
        let aud = jwt.claims["aud"]?.stringValue ?? ""
        if !Self.jwtAudiences.contains(aud) { return "self-signed JWT: aud '\(aud)' is not https://fcm.googleapis.com/" }
        guard let exp = jwt.seconds("exp") else { return "self-signed JWT: no exp claim" }
        if exp <= now {
            return "self-signed JWT expired at \(rfc3339(millis: exp * 1000)) on the mock's clock (now \(rfc3339(millis: nowMs)))"
        }
        if let iat = jwt.seconds("iat"), iat > now + Self.allowedSkewSeconds {
            return "self-signed JWT: iat is \(iat - now) s ahead of the mock's clock (at most \(Self.allowedSkewSeconds))"
        }
        return "self-signed JWT: the signature does not verify with key \(jwt.keyID) (\(account.clientEmail))"
    }

    /// Why the token endpoint refused an assertion, beyond Google's text for the kind (one text
    /// covers an unknown key, a wrong algorithm and a bad signature, for example).
    func tokenRefusalReason(_ refusal: TokenRefusal, grantType: String?, assertion: String?) -> String {
        switch refusal {
        case .unsupportedGrantType:
            return grantType == nil ? "no grant_type" : "grant_type '\(grantType!)' is not \(Self.jwtBearerGrant)"
        case .invalidScope:
            let scope = assertion.flatMap { try? JWT.parse($0) }?.claims["scope"]?.stringValue ?? ""
            return "scope '\(scope)' has neither https://www.googleapis.com/auth/firebase.messaging nor …/cloud-platform"
        case .badAudience:
            let aud = assertion.flatMap { try? JWT.parse($0) }?.claims["aud"]
            guard let aud else { return "no aud claim" }
            guard let text = aud.stringValue else { return "aud is not a string (\(aud.serialized()))" }
            return "aud '\(text)' is not a token URI of this server or Google's"
        case .invalidSignature, .accountNotFound, .badTimes:
            break
        }
        guard let assertion, !assertion.isEmpty else { return "no assertion" }
        let jwt: JWT
        do {
            jwt = try JWT.parse(assertion)
        } catch {
            return "the assertion is not a JWT this server takes (" + Self.describe(error) + ")"
        }
        let known = serviceAccount(keyID: jwt.keyID)?.0
        let iss = jwt.claims["iss"]?.stringValue ?? ""
        switch refusal {
        case .invalidSignature:
            guard let known else { return "kid \(jwt.keyID) is no service account's key (deleted, or of another server's store?)" }
            return "the signature does not verify with key \(jwt.keyID) (\(known.clientEmail))"
        case .accountNotFound:
            guard let known else { return iss.isEmpty ? "no iss claim" : "no project to take key \(jwt.keyID) for" }
            return "iss '\(iss)' is not \(known.clientEmail), the account of key \(jwt.keyID)"
        default:
            let nowMs = clock.nowMillis()
            let now = nowMs / 1000
            guard let iat = jwt.seconds("iat"), let exp = jwt.seconds("exp") else { return "no iat or no exp claim" }
            if exp <= iat { return "exp is not after iat" }
            if exp - iat > 3600 { return "exp is \(exp - iat) s after iat (at most 3600)" }
            if iat > now + Self.allowedSkewSeconds {
                return "iat is \(iat - now) s ahead of the mock's clock (at most \(Self.allowedSkewSeconds); now \(rfc3339(millis: nowMs)))"
            }
            return "the assertion expired at \(rfc3339(millis: exp * 1000)) on the mock's clock (now \(rfc3339(millis: nowMs)))"
        }
    }

    /// A JWT parse failure in words.
    static func describe(_ failure: JWT.Failure) -> String {
        switch failure {
        case .tooLong: "longer than \(JWT.maxBytes) bytes"
        case .malformed(let why): why
        case .unsupportedAlgorithm(let alg): "alg \(alg), not RS256"
        case .missingKeyID: "no kid in its header"
        case .signatureLength(let expected, let got): "a signature of \(got) bytes, not \(expected)"
        }
    }
}
