import FCMModel
import FCMCore
import FCMEngine
import Platform
import RoomKit
import TLS

/// Who a verified VAPID JWT speaks for.
struct VAPIDIdentity: Sendable, Equatable {
    /// The JWT's `sub` (`mailto:` or `https:`).
    let subject: String
    /// The public key, base64url without padding.
    let key: String
    let scheme: VAPIDCredential.Scheme
}

/// A VAPID JWT whose signature was checked, remembered by its text and key.
struct VerifiedVAPID: Sendable {
    let expiresAt: Int64
    let subject: String
    let audience: String
    let keyBytes: [UInt8]
}

/// VAPID (RFC 8292; docs/spec/webpush.md section 3): ES256 JWTs signed by the application
/// server's key, which travels beside them, checked through the one JWT path (`JWTVerifier`)
/// by the push service's rule (`VAPIDRule`).
final class VAPID: Sendable {
    let clock: MockClock
    /// Verified JWTs, by their text and key: a sender signs one per hour and an ECDSA check per
    /// push would cost more than the push.
    let verifier = JWTVerifier<String, VerifiedVAPID>(capacity: 1000)

    init(clock: MockClock) {
        self.clock = clock
    }

    /// Who the VAPID `credential` of a push to `sub` speaks for (nil: an unsigned push, which a
    /// subscription without an `application_server_key` takes), or why it is refused: 401 for a
    /// missing credential where the subscription has a key, a malformed key or JWT, a bad
    /// signature, an `aud` other than `audience`, an `exp` passed or over 24 h ahead, a missing
    /// or odd `sub`; 403 when it all verifies but the key is not the subscription's. A
    /// remembered JWT has its `aud` and `exp` judged again on every push, on the mock's clock.
    func authorize(_ credential: VAPIDCredential?, audience: String, subscription sub: WebPushSubscription)
        throws(WebPushError) -> VAPIDIdentity? {
        guard let credential else {
            if sub.applicationServerKey != nil {
                throw WebPushError(.unauthorized, "the subscription was made with an applicationServerKey: pushes to it must carry VAPID")
            }
            return nil
        }
        guard let keyBytes = base64URLDecode(Array(credential.key.utf8)), keyBytes.count == 65, keyBytes[0] == 4 else {
            throw WebPushError(.unauthorized, "the VAPID key is not the base64url of a 65-byte uncompressed P-256 point")
        }
        let rule = VAPIDRule(keyBytes: keyBytes, audience: audience, now: clock.nowMillis() / 1000)
        let verified = try verifier.verify(credential.token, cachedAs: credential.token + " " + credential.key, by: rule)
        if let bound = sub.applicationServerKey, base64URLDecode(Array(bound.utf8)) != verified.keyBytes {
            throw WebPushError(.forbidden, "the VAPID key is not the applicationServerKey the subscription was made with")
        }
        return VAPIDIdentity(subject: verified.subject, key: base64URLEncode(verified.keyBytes), scheme: credential.scheme)
    }
}

/// The push service's rule for a VAPID JWT signed by `keyBytes`, on a push that came in on
/// `audience` at `now` (seconds on the mock's clock): the signature first, then the claims
/// (`VAPIDClaims`).
struct VAPIDRule: JWTRule {
    let keyBytes: [UInt8]
    let audience: String
    let now: Int64

    var algorithm: JWT.Algorithm { .es256 }
    var requiresKeyID: Bool { false }

    func malformed(_ failure: JWT.Failure) -> WebPushError {
        WebPushError(.unauthorized, "the VAPID token is not an ES256 JWT: \(failure)")
    }

    /// The key is the one beside the token (`k=`), not named in it.
    func key(for jwt: JWT) throws(WebPushError) -> [UInt8] { keyBytes }

    func verify(_ jwt: JWT, with key: [UInt8]) throws(WebPushError) -> VerifiedVAPID {
        guard (try? P256PublicKey(rawPoint: key))?.verifiesES256(jwt.signingInput, signature: jwt.signature) == true else {
            throw WebPushError(.unauthorized, "the VAPID JWT's signature does not verify with its key k (or the key is not a P-256 point)")
        }
        let subject = try VAPIDClaims.check(jwt, audience: audience, now: now)
        return VerifiedVAPID(expiresAt: jwt.seconds("exp") ?? 0, subject: subject, audience: jwt.claims["aud"]?.stringValue ?? "",
                             keyBytes: key)
    }

    /// A remembered JWT: what depends on the push or the clock, by the rule `VAPIDClaims.check`
    /// applied to it when it was new.
    func recheck(_ v: VerifiedVAPID) throws(WebPushError) {
        try VAPIDClaims.checkTimely(aud: v.audience, exp: v.expiresAt, audience: audience, now: now)
    }
}
