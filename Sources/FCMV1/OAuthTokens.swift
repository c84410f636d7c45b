import FCMCore
import FCMEngine
import FCMModel
import Platform
import RoomKit

/// Why the token endpoint refused an assertion: its kind, with Google's answer for it, and why
/// in the mock's words (the log's; Google's answer names only the kind: one text covers an
/// unknown key, a wrong algorithm and a bad signature, for example).
struct TokenRefusal: Error, Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case unsupportedGrantType(String)
        case invalidSignature
        case accountNotFound
        case badAudience
        case badTimes
        case invalidScope
    }

    let kind: Kind
    let reason: String

    init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// `(error, error_description)`.
    var answer: (String, String) {
        switch kind {
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

/// The token endpoint's assertions (docs/spec/fcm-v1.md section 3): a service account's signed
/// JWT for an access token, checked through the one JWT path by Google's rule (`AssertionRule`)
/// and then minted by the engine, which keeps the tokens.
struct OAuthTokens: Sendable {
    let engine: Engine

    /// The grant type service accounts use.
    static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Scopes that allow sending with FCM.
    static let messagingScopes: Set<String> = [GoogleAccessTokens.messagingScope, "https://www.googleapis.com/auth/cloud-platform"]

    /// Checks a service account's signed JWT and issues an access token. The `kid` is looked up
    /// first (an unknown one, like any algorithm but RS256 or a signature that does not verify,
    /// is "Invalid JWT Signature."), then `iss`, then `aud` (a string that `isTokenURI` accepts:
    /// the caller knows which URIs name this endpoint), the times on the mock's clock (`exp` at
    /// most an hour after `iat`), and the scope.
    ///
    /// With `--accept-any-key`, a well-formed RS256 assertion whose `kid` no project knows is
    /// taken as the first project's (nothing to verify its signature with); its `iss` must be
    /// there, and `aud`, the times and scope are checked as usual.
    ///
    /// Every refusal is logged with why (`TokenRefusal.reason`): Google's answer names only the kind.
    func issue(grantType: String?, assertion: String?, isTokenURI: (String) -> Bool) throws(TokenRefusal) -> AccessToken {
        do throws(TokenRefusal) {
            guard grantType == Self.jwtBearerGrant else {
                throw TokenRefusal(.unsupportedGrantType(grantType ?? ""),
                                   grantType == nil ? "no grant_type" : "grant_type '\(grantType!)' is not \(Self.jwtBearerGrant)")
            }
            guard let assertion, !assertion.isEmpty else { throw TokenRefusal(.invalidSignature, "no assertion") }
            let nowMillis = engine.clock.nowMillis()
            let granted = try withoutActuallyEscaping(isTokenURI) { (isTokenURI) throws(TokenRefusal) -> Grant in
                try verifyJWT(assertion, by: AssertionRule(engine: engine, nowMillis: nowMillis, isTokenURI: isTokenURI))
            }
            return engine.mintAccessToken(account: granted.account, senderID: granted.senderID, token: GoogleAccessTokens.newToken(),
                                          scope: granted.scope, lifetimeSeconds: GoogleAccessTokens.lifetimeSeconds, now: nowMillis / 1000)
        } catch {
            engine.notice("token request refused", [("error", error.answer.0), ("reason", error.reason)])
            throw error
        }
    }
}

/// What an assertion that passed grants.
struct Grant: Sendable {
    let account: ServiceAccount
    let senderID: String
    let scope: String
}

/// Google's rule for a service account's assertion at `nowMillis` (the mock's clock), each
/// refusal saying which check failed.
struct AssertionRule: JWTRule {
    let engine: Engine
    let nowMillis: Int64
    let isTokenURI: (String) -> Bool
    var now: Int64 { nowMillis / 1000 }

    var algorithm: JWT.Algorithm { .rs256 }
    var requiresKeyID: Bool { true }
    func malformed(_ failure: JWT.Failure) -> TokenRefusal {
        TokenRefusal(.invalidSignature, "the assertion is not a JWT this server takes (" + GoogleCredentials.describe(failure) + ")")
    }

    /// The key's account and its project's sender id; with `--accept-any-key`, an unknown key
    /// stands for the first project (nil: no account to check a signature with).
    func key(for jwt: JWT) throws(TokenRefusal) -> (account: ServiceAccount, senderID: String)? {
        if let (known, project) = engine.serviceAccount(keyID: jwt.keyID) { return (known, project.senderID) }
        guard engine.acceptAnyKey else {
            throw TokenRefusal(.invalidSignature, "kid \(jwt.keyID) is no service account's key (deleted, or of another server's store?)")
        }
        return nil
    }

    func verify(_ jwt: JWT, with key: (account: ServiceAccount, senderID: String)?) throws(TokenRefusal) -> Grant {
        let account: ServiceAccount, senderID: String
        let iss = jwt.claims["iss"]?.stringValue ?? ""
        if let key {
            guard GoogleCredentials.verifiesRS256(key.account.publicKeyPEM, jwt.signingInput, jwt.signature) else {
                throw TokenRefusal(.invalidSignature, "the signature does not verify with key \(jwt.keyID) (\(key.account.clientEmail))")
            }
            guard iss == key.account.clientEmail else {
                throw TokenRefusal(.accountNotFound, "iss '\(iss)' is not \(key.account.clientEmail), the account of key \(jwt.keyID)")
            }
            (account, senderID) = key
        } else {
            guard !iss.isEmpty else { throw TokenRefusal(.accountNotFound, "no iss claim") }
            guard let first = engine.firstProjectID() else { throw TokenRefusal(.accountNotFound, "no project to take key \(jwt.keyID) for") }
            account = ServiceAccount(privateKeyID: jwt.keyID, clientEmail: iss, clientID: "", publicKeyPEM: "", createdAt: 0)
            senderID = first
        }
        try checkAudience(jwt)
        try checkTimes(jwt)
        let scope = jwt.claims["scope"]?.stringValue ?? ""
        guard !OAuthTokens.messagingScopes.isDisjoint(with: scope.split(separator: " ").map(String.init)) else {
            throw TokenRefusal(.invalidScope, "scope '\(scope)' has neither https://www.googleapis.com/auth/firebase.messaging nor …/cloud-platform")
        }
        return Grant(account: account, senderID: senderID, scope: scope)
    }

    /// `aud`: a token URI of this server or Google's, as a string (Google refuses an array, even
    /// of the right URI).
    private func checkAudience(_ jwt: JWT) throws(TokenRefusal) {
        guard let aud = jwt.claims["aud"] else { throw TokenRefusal(.badAudience, "no aud claim") }
        guard let text = aud.stringValue else { throw TokenRefusal(.badAudience, "aud is not a string (\(aud.serialized()))") }
        guard isTokenURI(text) else { throw TokenRefusal(.badAudience, "aud '\(text)' is not a token URI of this server or Google's") }
    }

    /// `iat` and `exp` on the mock's clock: `exp` after `iat`, at most an hour later, `iat` not
    /// further ahead than the skew allowed, `exp` ahead.
    private func checkTimes(_ jwt: JWT) throws(TokenRefusal) {
        let skew = GoogleCredentials.allowedSkewSeconds
        guard let iat = jwt.seconds("iat"), let exp = jwt.seconds("exp") else { throw TokenRefusal(.badTimes, "no iat or no exp claim") }
        guard exp > iat else { throw TokenRefusal(.badTimes, "exp is not after iat") }
        guard exp - iat <= 3600 else { throw TokenRefusal(.badTimes, "exp is \(exp - iat) s after iat (at most 3600)") }
        guard iat <= now + skew else {
            throw TokenRefusal(.badTimes, "iat is \(iat - now) s ahead of the mock's clock (at most \(skew); now \(rfc3339(millis: nowMillis)))")
        }
        guard exp > now else {
            throw TokenRefusal(.badTimes, "the assertion expired at \(rfc3339(millis: exp * 1000)) on the mock's clock (now \(rfc3339(millis: nowMillis)))")
        }
    }

    func recheck(_ grant: Grant) throws(TokenRefusal) {}
}
