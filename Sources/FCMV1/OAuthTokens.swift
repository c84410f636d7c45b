import FCMCore
import FCMEngine
import FCMModel
import Platform
import RoomKit

/// Why the token endpoint refused an assertion, with Google's answer for it.
enum TokenRefusal: Error, Sendable, Equatable {
    case unsupportedGrantType(String)
    case invalidSignature
    case accountNotFound
    case badAudience
    case badTimes
    case invalidScope

    /// `(error, error_description)`.
    var answer: (String, String) {
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
    /// Every refusal is logged with why (`refusalReason`): Google's answer names only the kind.
    func issue(grantType: String?, assertion: String?, isTokenURI: (String) -> Bool) throws(TokenRefusal) -> AccessToken {
        do throws(TokenRefusal) {
            guard grantType == Self.jwtBearerGrant else { throw TokenRefusal.unsupportedGrantType(grantType ?? "") }
            guard let assertion else { throw TokenRefusal.invalidSignature }
            let now = engine.clock.nowMillis() / 1000
            let granted = try withoutActuallyEscaping(isTokenURI) { (isTokenURI) throws(TokenRefusal) -> Grant in
                try verifyJWT(assertion, by: AssertionRule(engine: engine, now: now, isTokenURI: isTokenURI))
            }
            return engine.mintAccessToken(account: granted.account, senderID: granted.senderID, token: GoogleAccessTokens.newToken(),
                                          scope: granted.scope, lifetimeSeconds: GoogleAccessTokens.lifetimeSeconds, now: now)
        } catch {
            let (code, _) = error.answer
            engine.notice("token request refused", [("error", code), ("reason", refusalReason(error, grantType: grantType, assertion: assertion))])
            throw error
        }
    }

    /// Why the token endpoint refused an assertion, beyond Google's text for the kind (one text
    /// covers an unknown key, a wrong algorithm and a bad signature, for example).
    func refusalReason(_ refusal: TokenRefusal, grantType: String?, assertion: String?) -> String {
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
            return "the assertion is not a JWT this server takes (" + GoogleCredentials.describe(error) + ")"
        }
        let known = engine.serviceAccount(keyID: jwt.keyID)?.0
        let iss = jwt.claims["iss"]?.stringValue ?? ""
        switch refusal {
        case .invalidSignature:
            guard let known else { return "kid \(jwt.keyID) is no service account's key (deleted, or of another server's store?)" }
            return "the signature does not verify with key \(jwt.keyID) (\(known.clientEmail))"
        case .accountNotFound:
            guard let known else { return iss.isEmpty ? "no iss claim" : "no project to take key \(jwt.keyID) for" }
            return "iss '\(iss)' is not \(known.clientEmail), the account of key \(jwt.keyID)"
        default:
            let nowMs = engine.clock.nowMillis()
            let now = nowMs / 1000
            let skew = GoogleCredentials.allowedSkewSeconds
            guard let iat = jwt.seconds("iat"), let exp = jwt.seconds("exp") else { return "no iat or no exp claim" }
            if exp <= iat { return "exp is not after iat" }
            if exp - iat > 3600 { return "exp is \(exp - iat) s after iat (at most 3600)" }
            if iat > now + skew {
                return "iat is \(iat - now) s ahead of the mock's clock (at most \(skew); now \(rfc3339(millis: nowMs)))"
            }
            return "the assertion expired at \(rfc3339(millis: exp * 1000)) on the mock's clock (now \(rfc3339(millis: nowMs)))"
        }
    }
}

/// What an assertion that passed grants.
struct Grant: Sendable {
    let account: ServiceAccount
    let senderID: String
    let scope: String
}

/// Google's rule for a service account's assertion at `now` (seconds on the mock's clock).
struct AssertionRule: JWTRule {
    let engine: Engine
    let now: Int64
    let isTokenURI: (String) -> Bool

    var algorithm: JWT.Algorithm { .rs256 }
    var requiresKeyID: Bool { true }
    func malformed(_ failure: JWT.Failure) -> TokenRefusal { .invalidSignature }

    /// The key's account and its project's sender id; with `--accept-any-key`, an unknown key
    /// stands for the first project (nil: no account to check a signature with).
    func key(for jwt: JWT) throws(TokenRefusal) -> (account: ServiceAccount, senderID: String)? {
        if let (known, project) = engine.serviceAccount(keyID: jwt.keyID) { return (known, project.senderID) }
        guard engine.acceptAnyKey else { throw .invalidSignature }
        return nil
    }

    func verify(_ jwt: JWT, with key: (account: ServiceAccount, senderID: String)?) throws(TokenRefusal) -> Grant {
        let account: ServiceAccount, senderID: String
        if let key {
            guard GoogleCredentials.verifiesRS256(key.account.publicKeyPEM, jwt.signingInput, jwt.signature) else { throw .invalidSignature }
            guard jwt.claims["iss"]?.stringValue == key.account.clientEmail else { throw .accountNotFound }
            (account, senderID) = key
        } else {
            guard let iss = jwt.claims["iss"]?.stringValue, !iss.isEmpty, let first = engine.firstProjectID() else { throw .accountNotFound }
            account = ServiceAccount(privateKeyID: jwt.keyID, clientEmail: iss, clientID: "", publicKeyPEM: "", createdAt: 0)
            senderID = first
        }
        // Google takes only a string here (an array, even of the right URI, is refused).
        guard let aud = jwt.claims["aud"]?.stringValue, isTokenURI(aud) else { throw .badAudience }
        guard let iat = jwt.seconds("iat"), let exp = jwt.seconds("exp"), exp > iat, exp - iat <= 3600,
            iat <= now + GoogleCredentials.allowedSkewSeconds, exp > now
        else { throw .badTimes }
        let scope = jwt.claims["scope"]?.stringValue ?? ""
        guard !OAuthTokens.messagingScopes.isDisjoint(with: scope.split(separator: " ").map(String.init)) else { throw .invalidScope }
        return Grant(account: account, senderID: senderID, scope: scope)
    }

    func recheck(_ grant: Grant) throws(TokenRefusal) {}
}
