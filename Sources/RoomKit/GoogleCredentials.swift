public import FCMCore
public import FCMEngine
public import FCMModel
public import HTTPServer
import Platform
import TLS

/// Why a credential does not reach the project a path names; each carries the reason in words
/// (for the record and the log: the wire says less).
public enum ProjectAccessRefusal: Error, Sendable, Equatable {
    /// No credential, or one that is not (or no longer) good.
    case unauthenticated(String)
    /// No such project.
    case unknownProject(String)
    /// A good credential of another project (the path's name first).
    case otherProject(String, String)
}

/// Google's credentials on the wire, which both FCM HTTP rooms take (the legacy protocol's
/// `key=` and, with `access_token_auth`, a Bearer token; HTTP v1's Bearer token): server keys
/// and access tokens the engine keeps, and google-auth's self-signed "JWT access" tokens,
/// verified here through the one JWT path (`SelfSignedJWTRule`).
public final class GoogleCredentials: Sendable {
    let engine: Engine
    /// Self-signed JWTs already verified, by their text: an SDK signs one an hour and sends it
    /// with every request, and an RSA check per request would cost more than the send.
    let verifier = JWTVerifier<String, VerifiedJWT>(capacity: 1000)

    /// The audiences a self-signed JWT may name (google-auth's "JWT access" uses the API's root).
    static let jwtAudiences: Set<String> = ["https://fcm.googleapis.com/", "https://fcm.googleapis.com"]
    /// How far a JWT's `iat` may be ahead of the mock's clock (clocks of app servers drift).
    public static let allowedSkewSeconds: Int64 = 300

    public init(engine: Engine) {
        self.engine = engine
    }

    /// The sender id an `Authorization` header names: `key=<server key>`, or, where the request
    /// allows it (`access_token_auth`), a Bearer credential (an issued access token or a
    /// self-signed JWT: `senderID(bearer:)`), which maps to its project; with `--accept-any-key`,
    /// any other non-empty Bearer token maps to the first project, and so it does where the
    /// protocol takes any Bearer token (`anyBearer`: fcm-legacy.md's `/fcm/send`, "Bearer
    /// <anything>"). `bearerAllowed` is only asked for a Bearer header (a key, the common case,
    /// costs no look at other headers or the body).
    public func senderID(authorization header: String?, bearerAllowed: @autoclosure () -> Bool,
                         anyBearer: Bool = false) -> String? {
        guard let header else { return nil }
        let value = header.drop { $0 == " " }
        if hasPrefixIgnoringCase(value.utf8, "key=") {
            return engine.senderID(forServerKey: String(value.dropFirst(4)).trimmingSpaces())
        }
        if let token = Self.bearerToken(header), bearerAllowed() {
            return senderID(bearer: token) ?? (engine.acceptAnyKey || anyBearer ? engine.firstProjectID() : nil)
        }
        return nil
    }

    /// The credential of `Authorization: Bearer <token>` (the scheme in any case), or nil.
    public static func bearerToken(_ header: String?) -> String? {
        // On the UTF-8 bytes: every request with a Bearer token comes here.
        guard let header else { return nil }
        let u = header.utf8
        var start = u.startIndex
        while start != u.endIndex && u[start] == UInt8(ascii: " ") { start = u.index(after: start) }
        guard hasPrefixIgnoringCase(u[start...], "bearer ") else { return nil }
        start = u.index(start, offsetBy: 7)
        var end = u.endIndex
        while start != end && (u[start] == UInt8(ascii: " ") || u[start] == UInt8(ascii: "\t")) { start = u.index(after: start) }
        while start != end {
            let last = u.index(before: end)
            guard u[last] == UInt8(ascii: " ") || u[last] == UInt8(ascii: "\t") else { break }
            end = last
        }
        return start == end ? nil : String(header[start..<end])
    }

    /// The sender id of the project a Bearer credential stands for, or nil: an access token the
    /// token endpoint issued (not expired on the mock's clock, not revoked, its key not deleted,
    /// its project still there), or a self-signed JWT (RS256 with the `kid` of a known key, `iss`
    /// its account, `aud` FCM's root URL, `exp` ahead of the mock's clock, `iat` not further ahead
    /// than the skew allowed). Issued tokens are looked up under the engine's credentials lock,
    /// never waiting for a send.
    public func senderID(bearer token: String) -> String? {
        switch engine.issuedToken(token, forProject: nil).0 {
        case .valid(let sender): return sender
        case .invalid: return nil
        case .unknown: return try? senderID(selfSignedJWT: token).get()
        }
    }

    /// See `senderID(bearer:)`, or why the token is refused, in words a tester can act on. A JWT
    /// verified once is remembered until it expires (its key is looked up again every time: a
    /// deleted key's JWTs stop working at once).
    private func senderID(selfSignedJWT token: String) -> Result<String, SelfSignedJWTRule.Refused> {
        let rule = SelfSignedJWTRule(engine: engine, nowMillis: engine.clock.nowMillis())
        do throws(SelfSignedJWTRule.Refused) {
            return .success(try verifier.verify(token, cachedAs: token, by: rule).senderID)
        } catch {
            return .failure(error)
        }
    }

    /// The project an HTTP v1 path names (`{project}`: its id or number), if the request's
    /// Bearer credential stands for it (docs/spec/fcm-v1.md section 2): none or an invalid one
    /// is 401, an unknown project 404, another project's credential 403. With
    /// `--accept-any-key`, any non-empty Bearer token stands for the path's project.
    public func v1Project(authorization: String?, project name: String) -> Result<Project, ProjectAccessRefusal> {
        guard let token = Self.bearerToken(authorization) else {
            return .failure(.unauthenticated(bearerRefusalReason(authorization)))
        }
        // An issued token and the project in one look under the lock: the common case.
        let (issued, project) = engine.issuedToken(token, forProject: name)
        var sender: String?
        if !engine.acceptAnyKey {
            switch issued {
            case .valid(let s): sender = s
            case .invalid: return .failure(.unauthenticated(bearerRefusalReason(authorization)))
            case .unknown:
                switch senderID(selfSignedJWT: token) {
                case .success(let s): sender = s
                case .failure(let refused):
                    // A revoked access token is no JWT: it says why it is no longer good.
                    let (issued, revoked) = engine.accessTokenRecord(token)
                    return .failure(.unauthenticated(issued ?? revoked != nil ? bearerRefusalReason(authorization) : refused.reason))
                }
            }
        }
        guard let project else { return .failure(.unknownProject("no project '\(name)' (by project id or sender id)")) }
        if let sender, sender != project.senderID {
            let own = engine.project(named: sender)?.projectID ?? sender
            return .failure(.otherProject(name,
                "the credential is for project \(own) (sender id \(sender)); the path names \(project.projectID) (sender id \(project.senderID))"))
        }
        return .success(project)
    }

    /// Why `authorization` is no valid Bearer credential of any project, in words a tester can
    /// act on, when it is none or an access token no longer valid (a self-signed JWT's refusal
    /// words itself: `SelfSignedJWTRule`).
    func bearerRefusalReason(_ authorization: String?) -> String {
        guard let header = authorization, !header.allSatisfy({ $0 == " " }) else { return "no Authorization header" }
        guard let token = Self.bearerToken(header) else {
            if hasPrefixIgnoringCase(header.drop { $0 == " " }.utf8, "key=") {
                return "a legacy server key (key=…): HTTP v1 takes an OAuth 2.0 access token or a self-signed JWT (Authorization: Bearer …)"
            }
            return "the Authorization header is not 'Bearer TOKEN'"
        }
        let nowMs = engine.clock.nowMillis()
        let (issued, revoked) = engine.accessTokenRecord(token)
        guard let t = issued ?? revoked else { return "the Bearer token is not an access token this server issued" }
        if revoked != nil { return "access token \(t.id) was revoked (DELETE /api/v1/access-tokens/\(t.id))" }
        if t.expiresAt <= nowMs {
            return "access token \(t.id) expired at \(rfc3339(millis: t.expiresAt)) on the mock's clock (now \(rfc3339(millis: nowMs)))"
        }
        guard let project = engine.project(named: t.senderID) else {
            return "access token \(t.id): its project (sender id \(t.senderID)) no longer exists"
        }
        if !project.serviceAccounts.contains(where: { $0.privateKeyID == t.privateKeyID }) {
            return "access token \(t.id): its service account key \(t.privateKeyID) (\(t.clientEmail)) was deleted"
        }
        return "access token \(t.id) is no longer valid"
    }

    /// A JWT parse failure in words.
    public static func describe(_ failure: JWT.Failure) -> String {
        switch failure {
        case .tooLong: "longer than \(JWT.maxBytes) bytes"
        case .malformed(let why): why
        case .unsupportedAlgorithm(let alg): "alg \(alg), not RS256"
        case .missingKeyID: "no kid in its header"
        case .signatureLength(let expected, let got): "a signature of \(got) bytes, not \(expected)"
        }
    }

    /// Whether `signature` is an RS256 signature of `input` by the key in `publicKeyPEM`.
    public static func verifiesRS256(_ publicKeyPEM: String, _ input: [UInt8], _ signature: [UInt8]) -> Bool {
        guard let key = try? RSAPublicKey(pem: publicKeyPEM) else { return false }
        return key.verifiesRS256(input, signature: signature)
    }
}

/// A self-signed JWT whose signature was checked: its key, its project and when it expires.
struct VerifiedJWT: Sendable {
    let keyID: String
    let senderID: String
    let expiresAt: Int64
}

/// google-auth's "JWT access" rule at `nowMillis` (the mock's clock): RS256, the `kid` of a
/// service account's key, `iss` its account, `aud` FCM's root URL, `exp` ahead, `iat` not
/// further ahead than the skew allowed. Each refusal says which check failed, for the 401's
/// message and the log.
struct SelfSignedJWTRule: JWTRule {
    struct Refused: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    let engine: Engine
    let nowMillis: Int64
    var now: Int64 { nowMillis / 1000 }

    var algorithm: JWT.Algorithm { .rs256 }
    var requiresKeyID: Bool { true }

    func malformed(_ failure: JWT.Failure) -> Refused {
        Refused("the Bearer token is neither an access token this server issued (since its start or last reset) nor a JWT ("
                + GoogleCredentials.describe(failure) + ")")
    }

    func key(for jwt: JWT) throws(Refused) -> (ServiceAccount, Project) {
        guard let found = engine.serviceAccount(keyID: jwt.keyID) else { throw Refused("self-signed JWT: kid \(jwt.keyID) is no service account's key") }
        return found
    }

    func verify(_ jwt: JWT, with key: (ServiceAccount, Project)) throws(Refused) -> VerifiedJWT {
        let (account, project) = key
        let iss = jwt.claims["iss"]?.stringValue ?? ""
        guard iss == account.clientEmail else {
            throw Refused("self-signed JWT: iss '\(iss)' is not \(account.clientEmail), the account of key \(jwt.keyID)")
        }
        let aud = jwt.claims["aud"]?.stringValue ?? ""
        guard GoogleCredentials.jwtAudiences.contains(aud) else { throw Refused("self-signed JWT: aud '\(aud)' is not https://fcm.googleapis.com/") }
        guard let exp = jwt.seconds("exp") else { throw Refused("self-signed JWT: no exp claim") }
        guard exp > now else { throw expired(exp) }
        if let iat = jwt.seconds("iat"), iat > now + GoogleCredentials.allowedSkewSeconds {
            throw Refused("self-signed JWT: iat is \(iat - now) s ahead of the mock's clock (at most \(GoogleCredentials.allowedSkewSeconds))")
        }
        guard GoogleCredentials.verifiesRS256(account.publicKeyPEM, jwt.signingInput, jwt.signature) else {
            throw Refused("self-signed JWT: the signature does not verify with key \(jwt.keyID) (\(account.clientEmail))")
        }
        return VerifiedJWT(keyID: jwt.keyID, senderID: project.senderID, expiresAt: exp)
    }

    /// Not expired on the mock's clock, and its key (and so its account and project) still there.
    func recheck(_ v: VerifiedJWT) throws(Refused) {
        // In the order `key(for:)` and `verify` judge a new token: its key, then its time.
        guard engine.serviceAccount(keyID: v.keyID) != nil else { throw Refused("self-signed JWT: kid \(v.keyID) is no service account's key") }
        guard v.expiresAt > now else { throw expired(v.expiresAt) }
    }

    private func expired(_ exp: Int64) -> Refused {
        Refused("self-signed JWT expired at \(rfc3339(millis: exp * 1000)) on the mock's clock (now \(rfc3339(millis: nowMillis)))")
    }
}

/// Google's OAuth 2.0 access tokens as the mock issues them (the token endpoint's, and the
/// control API's `POST …/access-tokens`): `ya29.` and base64url, as Google's look, marked `mock`.
public enum GoogleAccessTokens {
    /// The scope FCM's HTTP v1 API asks for.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Seconds a token lives (Google answers `expires_in: 3599`).
    public static let lifetimeSeconds: Int64 = 3599

    /// A new token's text.
    public static func newToken() -> String {
        var rng = SystemRandomNumberGenerator()
        return "ya29.mock" + randomString(150, from: RandomAlphabet.base64URL, using: &rng)
    }
}

extension HTTPRequest {
    /// The header `access_token_auth: true`, with which a Bearer token stands for a server key
    /// (firebase-admin's form).
    public var accessTokenAuth: Bool { header("access_token_auth")?.lowercased() == "true" }
}
