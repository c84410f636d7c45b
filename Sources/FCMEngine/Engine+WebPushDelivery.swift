public import FCMCore
import FCMStore
import Platform

/// Who a verified VAPID JWT speaks for.
public struct VAPIDIdentity: Sendable, Equatable {
    /// The JWT's `sub` (`mailto:` or `https:`).
    public let subject: String
    /// The public key, base64url without padding.
    public let key: String
    public let scheme: VAPIDCredential.Scheme
}

/// A VAPID JWT whose signature was checked, remembered by its text and key.
struct VerifiedVAPID: Sendable {
    let expiresAt: Int64
    let subject: String
    let audience: String
    let keyBytes: [UInt8]
}

/// What pushes the Web Push endpoint has taken since start (`GET /api/v1/health`).
public struct WebPushCounts: Sendable, Equatable {
    public var pushes: Int64 = 0
    public var undecryptable: Int64 = 0
}

extension Engine {
    static let maxVerifiedVAPID = 1000

    // MARK: VAPID

    /// Who the VAPID `credential` of a push to `sub` speaks for (nil: an unsigned push, which a
    /// subscription without an `application_server_key` takes), or why it is refused
    /// (docs/spec/webpush.md section 3): 401 for a missing credential where the subscription
    /// has a key, a malformed key or JWT, a bad signature, an `aud` other than `audience`, an
    /// `exp` passed or over 24 h ahead, a missing or odd `sub`; 403 when it all verifies but the
    /// key is not the subscription's. A verified JWT is remembered with its key, so a sender
    /// that signs one per hour pays one ECDSA check; its `exp` is judged again on every push on
    /// the mock's clock.
    public func authorizeVAPID(_ credential: VAPIDCredential?, audience: String, subscription sub: WebPushSubscription)
        -> Result<VAPIDIdentity?, WebPushError> {
        guard let credential else {
            if sub.applicationServerKey != nil {
                return .failure(WebPushError(.unauthorized, "the subscription was made with an applicationServerKey: pushes to it must carry VAPID"))
            }
            return .success(nil)
        }
        guard let keyBytes = base64URLDecode(Array(credential.key.utf8)), keyBytes.count == 65, keyBytes[0] == 4 else {
            return .failure(WebPushError(.unauthorized, "the VAPID key is not the base64url of a 65-byte uncompressed P-256 point"))
        }
        let now = clock.nowMillis() / 1000
        let cacheKey = credential.token + " " + credential.key
        let verified: VerifiedVAPID
        if let known = verifiedVAPID.withLock({ $0[cacheKey] }) {
            // What depends on the push or the clock is judged again, by the same rule.
            do throws(WebPushError) {
                try VAPIDClaims.checkTimely(aud: known.audience, exp: known.expiresAt, audience: audience, now: now)
            } catch {
                return .failure(error)
            }
            verified = known
        } else {
            let jwt: JWT
            do {
                jwt = try JWT.parse(credential.token, algorithm: .es256, requiringKeyID: false)
            } catch {
                return .failure(WebPushError(.unauthorized, "the VAPID token is not an ES256 JWT: \(error)"))
            }
            guard signatures.webPush.verifyES256(keyBytes, jwt.signingInput, jwt.signature) else {
                return .failure(WebPushError(.unauthorized, "the VAPID JWT's signature does not verify with its key k (or the key is not a P-256 point)"))
            }
            let subject: String
            do throws(WebPushError) { subject = try VAPIDClaims.check(jwt, audience: audience, now: now) } catch { return .failure(error) }
            verified = VerifiedVAPID(expiresAt: jwt.seconds("exp") ?? 0, subject: subject,
                                     audience: jwt.claims["aud"]?.stringValue ?? "", keyBytes: keyBytes)
            verifiedVAPID.withLock { v in
                if v.count >= Self.maxVerifiedVAPID { v.removeAll(keepingCapacity: true) }
                v[cacheKey] = verified
            }
        }
        if let bound = sub.applicationServerKey, base64URLDecode(Array(bound.utf8)) != verified.keyBytes {
            return .failure(WebPushError(.forbidden, "the VAPID key is not the applicationServerKey the subscription was made with"))
        }
        return .success(VAPIDIdentity(subject: verified.subject, key: base64URLEncode(verified.keyBytes), scheme: credential.scheme))
    }

    // MARK: Decryption

    /// The plaintext of a push's body for subscription `sub`, or why a browser would drop it.
    public func decryptWebPush(_ body: WebPushBody, for sub: WebPushSubscription) -> Result<[UInt8], WebPushDecryptFailure> {
        signatures.webPush.decrypt(body, sub.privateKey, sub.auth)
    }

    // MARK: Held messages

    /// Removes a message a device holds (RFC 8030 §6.2: `DELETE` of its `Location`): its
    /// delivery becomes `deleted`. False when none is held under that id (delivered, expired,
    /// settled otherwise, or unknown).
    public func deletePending(_ messageID: MessageID) throws(EngineError) -> Bool {
        let id = messageID.micros
        try expireDue()
        var event: (String, String)?
        let ticket: Store.Ticket? = state.withLock { s in
            let now = clock.nowMillis()
            for (device, entries) in s.stored {
                // Only a Web Push message, under its whole id (the sender's suffix too): an FCM or
                // APNs message held for the same device, or an id with another sender's suffix,
                // is not this endpoint's to delete.
                guard let i = entries.firstIndex(where: { $0.deliveryID == id && $0.isWebPush }) else { continue }
                guard let d = s.devices[device], messageIDSuffix(senderID: d.senderID) == messageID.suffix else { return nil }
                var kept = entries
                kept.remove(at: i)
                s.stored[device] = kept.isEmpty ? nil : kept
                if events.hasReaders {
                    event = ("message.deleted", EventJSON.delivery(
                        messageID: messageID.description, token: d.token,
                        status: "deleted", at: now))
                }
                return submit([Writes.setDeliveryStatuses([(id, "deleted")], at: now)])
            }
            return nil
        }
        guard let ticket else { return false }
        try commitControl(ticket)
        if let event { events.publish([event]) }
        return true
    }

    // MARK: Health

    /// The endpoint base, how many subscriptions there are (and ended), and the pushes taken
    /// since start (and how many would not decrypt).
    public func webPushHealth() -> (base: String, subscriptions: Int, expired: Int, counts: WebPushCounts) {
        state.withLock { s in
            var live = 0, expired = 0
            for (id, sub) in s.webPush where s.devices[id] != nil {
                if sub.expired { expired += 1 } else { live += 1 }
            }
            return (s.webPushBase, live + expired, expired, s.webPushCounts)
        }
    }
}
