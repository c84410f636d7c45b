public import FCMModel
import FCMCore
import FCMEngine
import Platform
import TLS

/// Subscriptions' keys made and read with the TLS layer's P-256 keys, and shown as the
/// browser shows them: the Web Push room's `WebPushOps`, which the assembly gives the engine.
public struct TLSWebPush: WebPushOps {
    /// Length of a subscription's auth secret (RFC 8291 section 3.2).
    static let authBytes = 16

    public init() {}

    /// A fresh key pair and auth secret.
    public func newKeys() -> (privateKey: [UInt8], publicKey: [UInt8], auth: [UInt8])? {
        guard let key = try? P256PrivateKey() else { return nil }
        var rng = SystemRandomNumberGenerator()
        let auth = (0..<Self.authBytes).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return (key.rawScalar, key.publicKey.rawPoint, auth)
    }

    /// The base64url of 65 bytes, 0x04 first, a point on P-256 (padding forgiven).
    public func publicKey(_ text: String) -> [UInt8]? {
        guard let bytes = base64URLDecode(Array(text.utf8)), bytes.count == 65, bytes[0] == 4,
              (try? P256PublicKey(rawPoint: bytes)) != nil else { return nil }
        return bytes
    }

    /// The base64url of 16 bytes.
    public func authSecret(_ text: String) -> [UInt8]? {
        base64URLDecode(Array(text.utf8)).flatMap { $0.count == Self.authBytes ? $0 : nil }
    }

    /// A public key without its padding.
    public func serverKey(_ text: String) -> String? {
        publicKey(text) == nil ? nil : String(text.prefix { $0 != "=" })
    }

    /// `{"endpoint","expirationTime":null,"keys":{"p256dh","auth"}}`, exactly the browser's
    /// `PushSubscription.toJSON()`; `keys` null for a real browser's (its keys never leave it).
    public func json(_ sub: WebPushSubscription, endpoint: String) -> String {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("endpoint"); w.value(endpoint)
        w.key("expirationTime"); w.null()
        w.key("keys")
        if sub.publicKey.isEmpty {
            w.null()
        } else {
            w.beginObject()
            w.key("p256dh"); w.value(base64URLEncode(sub.publicKey))
            w.key("auth"); w.value(base64URLEncode(sub.auth))
            w.endObject()
        }
        w.endObject()
        return w.string
    }
}
