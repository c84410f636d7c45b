import FCMCore
import FCMEngine
import FCMModel
import Platform
import RoomKit
public import TLS

/// Provider tokens as Apple's servers take them and this room checks them (`ProviderTokenRule`):
/// an ES256 JWT, header `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":SECONDS}`.
/// `fcm-mock apns-token` prints them for scripts.
public enum ProviderTokenMaker {
    /// A token for key `keyID` of team `teamID`, issued at `issuedAt` (UNIX seconds), signed with
    /// `key`.
    public static func token(signingWith key: P256PrivateKey, keyID: String, teamID: String, issuedAt: Int64) throws(TLSError) -> String {
        let header = JSONValue.object(JSONObject([("alg", .string("ES256")), ("kid", .string(keyID))])).serialized()
        let claims = JSONValue.object(JSONObject([("iss", .string(teamID)), ("iat", .number(JSONNumber(issuedAt)))])).serialized()
        let input = base64URLEncode(Array(header.utf8)) + "." + base64URLEncode(Array(claims.utf8))
        return input + "." + base64URLEncode(try key.signES256(Array(input.utf8)))
    }
}

/// Who a verified provider token speaks for.
struct APNsTokenAuthorization: Sendable, Equatable {
    let keyID: String
    let teamID: String
}

/// APNs provider tokens (docs/spec/apns.md section 3): ES256 JWTs signed with a key the engine
/// keeps (made by the mock or imported), checked through the one JWT path (`JWTVerifier`) by
/// Apple's rule (`ProviderTokenRule`).
final class ProviderTokens: Sendable {
    let engine: Engine
    /// Verified tokens, by their bytes in the header (`ProviderTokenKey`), with their key, team
    /// and `iat`: a client signs one token and sends it for up to an hour, and an ECDSA check
    /// per request would cost more than the send.
    let verifier = JWTVerifier<ProviderTokenKey, VerifiedProviderToken>(capacity: 1000)

    /// A provider token is good for an hour after its `iat` (Apple: "no older than one hour").
    static let lifetimeSeconds: Int64 = 3600
    /// How far a provider token's `iat` may be ahead of the mock's clock.
    static let skewSeconds: Int64 = 60

    init(engine: Engine) {
        self.engine = engine
    }

    /// The key and team an `authorization: bearer <JWT>` header speaks for, or the reason it is
    /// refused: `MissingProviderToken` without one; `InvalidProviderToken` for anything but an
    /// ES256 JWT with a known `kid`, the key's team as `iss`, an `iat` at most 60 s ahead and a
    /// good signature; `ExpiredProviderToken` when `iat` is over an hour old on the mock's
    /// clock. A remembered token has its age and its key's existence checked again.
    func authorize(_ header: String?) throws(APNsError) -> APNsTokenAuthorization {
        guard let header, !header.isEmpty else {
            throw APNsError(.missingProviderToken, "no authorization header: token authentication needs a provider token")
        }
        guard header.utf8.count > 7, hasPrefixIgnoringCase(header.utf8, "bearer ") else {
            throw APNsError(.invalidProviderToken, "the authorization header is not 'bearer <JWT>'")
        }
        // A verified token is looked up in its header, with no copy; the token verified is the
        // one the cache keeps it under: the key's bytes.
        let cacheKey = ProviderTokenKey(header: header)
        let v = try verifier.verify(cacheKey.token, cachedAs: cacheKey, by: ProviderTokenRule(engine: engine, now: engine.clock.nowMillis() / 1000))
        return APNsTokenAuthorization(keyID: v.keyID, teamID: v.teamID)
    }
}

/// A provider token whose signature verified.
struct VerifiedProviderToken: Sendable {
    let keyID: String
    let teamID: String
    let issuedAt: Int64
    /// The public key it verified with: a key registered again under the same id (revoked and
    /// imported, a fixture's put back) must be the same key for the token to stand. Compared
    /// as the key's own string, which is found equal without reading its bytes while unchanged.
    let publicKeyPEM: String
}

/// Apple's rule for a provider token, at `now` (seconds on the mock's clock).
struct ProviderTokenRule: JWTRule {
    let engine: Engine
    let now: Int64

    var algorithm: JWT.Algorithm { .es256 }
    var requiresKeyID: Bool { true }

    func malformed(_ failure: JWT.Failure) -> APNsError {
        APNsError(.invalidProviderToken, "the provider token is not an ES256 JWT with a kid: \(failure)")
    }

    func key(for jwt: JWT) throws(APNsError) -> APNsKey {
        guard let key = engine.apnsKey(jwt.keyID) else { throw unknownKey(jwt.keyID) }
        return key
    }

    func verify(_ jwt: JWT, with key: APNsKey) throws(APNsError) -> VerifiedProviderToken {
        guard let iss = jwt.claims["iss"]?.stringValue, iss == key.teamID else { throw otherTeam(key) }
        guard let iat = jwt.seconds("iat") else {
            throw APNsError(.invalidProviderToken, "the provider token has no iat of whole seconds")
        }
        guard (try? P256PublicKey(pem: key.publicKeyPEM))?.verifiesES256(jwt.signingInput, signature: jwt.signature) == true else {
            throw badSignature(key.keyID)
        }
        try checkAge(issuedAt: iat)
        return VerifiedProviderToken(keyID: key.keyID, teamID: key.teamID, issuedAt: iat, publicKeyPEM: key.publicKeyPEM)
    }

    /// A remembered token: its key still there and the same (a revoked key's tokens are refused
    /// at once; one imported again under its id with another team or public key refuses the
    /// token as a fresh check would, by `iss` or by the signature), and its age.
    func recheck(_ v: VerifiedProviderToken) throws(APNsError) {
        guard let key = engine.apnsKey(v.keyID) else { throw unknownKey(v.keyID) }
        guard key.teamID == v.teamID else { throw otherTeam(key) }
        guard key.publicKeyPEM == v.publicKeyPEM else { throw badSignature(v.keyID) }
        try checkAge(issuedAt: v.issuedAt)
    }

    /// Not from the future, not over an hour, on the mock's clock.
    private func checkAge(issuedAt iat: Int64) throws(APNsError) {
        if iat > now + ProviderTokens.skewSeconds {
            throw APNsError(.invalidProviderToken, "iat is \(iat - now) s ahead of the mock's clock (at most \(ProviderTokens.skewSeconds))")
        }
        if now - iat > ProviderTokens.lifetimeSeconds {
            throw APNsError(.expiredProviderToken, "the provider token was issued \(now - iat) s ago: over an hour on the mock's clock")
        }
    }

    private func badSignature(_ id: String) -> APNsError {
        APNsError(.invalidProviderToken, "the signature does not verify with key \(id)")
    }

    private func otherTeam(_ key: APNsKey) -> APNsError {
        APNsError(.invalidProviderToken, "iss is not the team of key \(key.keyID) (\(key.teamID))")
    }

    private func unknownKey(_ id: String) -> APNsError {
        APNsError(.invalidProviderToken, "no key has the id '\(id)' (never made, or revoked)")
    }
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

