public import FCMCore
public import Platform

/// What one protocol's JWTs must be (HTTP v1's service-account assertions, APNs provider
/// tokens, VAPID): the parameter of the one verification path, `JWTVerifier`. A rule is made
/// per request, with what that request's checks need (the mock clock's time, the origin a
/// push came in on).
public protocol JWTRule {
    /// What a verified token speaks for, as the verifier remembers it.
    associatedtype Verified: Sendable
    /// The key a token must be signed with.
    associatedtype Key
    /// The protocol's refusal, in the form its room answers.
    associatedtype Failure: Error

    /// The one algorithm the protocol signs with: RS256 (Google) or ES256 (Apple, VAPID). Any
    /// other, `none` and HMAC included, is refused before a key is looked at.
    var algorithm: JWT.Algorithm { get }
    /// Whether the header must name its key (`kid`); a VAPID token's key travels beside it.
    var requiresKeyID: Bool { get }
    /// A token that does not parse as a JWT of `algorithm`.
    func malformed(_ failure: JWT.Failure) -> Failure
    /// The key that must have signed `jwt`, or why there is none.
    func key(for jwt: JWT) throws(Failure) -> Key
    /// The signature and every claim of a new token (its times on the mock's clock included),
    /// in the order its contract checks them.
    func verify(_ jwt: JWT, with key: Key) throws(Failure) -> Verified
    /// What is judged again each time a remembered token is used, by the same rule `verify`
    /// applied: its times on the mock's clock, that its key still exists, what the request it
    /// came with demands.
    func recheck(_ verified: Verified) throws(Failure)
}

/// The one path every JWT a room accepts goes through: parsed for the rule's algorithm, its key
/// found, its signature and claims checked by the rule, remembered (a `BoundedCache` keyed as
/// the room chooses: by the token's text, or its bytes read in place) so that a client sending
/// one token for an hour pays for one signature check; what can change is judged again each time
/// a remembered token is used (`JWTRule.recheck`). Only tokens that passed are remembered.
public final class JWTVerifier<CacheKey: Hashable & Sendable, Verified: Sendable>: Sendable {
    /// The tokens verified, by the room's key.
    public let remembered: BoundedCache<CacheKey, Verified>

    public init(capacity: Int = 1000) {
        remembered = BoundedCache(capacity: capacity)
    }

    /// What `token` speaks for, by `rule`, or the rule's refusal. `cacheKey` must be equal for
    /// two requests only when their tokens are the same bytes.
    public func verify<Rule: JWTRule>(_ token: @autoclosure () -> String, cachedAs cacheKey: CacheKey,
                                      by rule: Rule) throws(Rule.Failure) -> Verified where Rule.Verified == Verified {
        if let known = remembered[cacheKey] {
            try rule.recheck(known)
            return known
        }
        let verified = try verifyJWT(token(), by: rule)
        remembered.insert(verified, for: cacheKey)
        return verified
    }
}

/// The path itself, for a new token (and for a token used once, an OAuth assertion, so nothing
/// is remembered): parsed for the rule's algorithm, its key found, its signature and claims
/// checked by the rule.
public func verifyJWT<Rule: JWTRule>(_ token: String, by rule: Rule) throws(Rule.Failure) -> Rule.Verified {
    let jwt: JWT
    do {
        jwt = try JWT.parse(token, algorithm: rule.algorithm, requiringKeyID: rule.requiresKeyID)
    } catch {
        throw rule.malformed(error)
    }
    return try rule.verify(jwt, with: try rule.key(for: jwt))
}
