package import FCMCore
package import FCMStore

/// A web device's push subscription: what `PushSubscription.toJSON()` shows, and the private
/// half that only decryption reads.
public struct WebPushSubscription: Sendable, Equatable {
    /// The opaque id of the endpoint (`{base}/wp/{id}`).
    package var id: String
    package var device: Int64
    /// The uncompressed P-256 public point (`p256dh`).
    public package(set) var publicKey: [UInt8]
    /// The private scalar: only the Web Push room, decrypting, reads it (never rendered, never logged).
    public let privateKey: [UInt8]
    public var auth: [UInt8]
    /// The VAPID key (base64url) every push must be signed with, when the subscription was
    /// made with one.
    public var applicationServerKey: String?
    /// Ended through the control API: pushes answer 410.
    package var expired: Bool
    /// The endpoint a real client was given (on the origin it came in on), or an FCM
    /// registration's (the subscription it travels over); nil: `{base}/wp/{id}`.
    public var endpointOverride: String?
    /// A real browser's subscription: its keys never leave the browser (none here), pushes are
    /// relayed unread.
    public var isRelayed: Bool { endpointOverride != nil && publicKey.isEmpty }

    package var row: WebPushRow {
        WebPushRow(device: device, pushID: id, privateKey: privateKey, publicKey: publicKey, auth: auth,
                   applicationServerKey: applicationServerKey, expired: expired)
    }

    package init(_ r: WebPushRow) {
        self.init(id: r.pushID, device: r.device, publicKey: r.publicKey, privateKey: r.privateKey, auth: r.auth,
                  applicationServerKey: r.applicationServerKey, expired: r.expired)
    }

    package init(id: String, device: Int64, publicKey: [UInt8], privateKey: [UInt8], auth: [UInt8],
                 applicationServerKey: String?, expired: Bool) {
        self.id = id
        self.device = device
        self.publicKey = publicKey
        self.privateKey = privateKey
        self.auth = auth
        self.applicationServerKey = applicationServerKey
        self.expired = expired
    }

    /// `{"endpoint","expirationTime":null,"keys":{"p256dh","auth"}}`, exactly the browser's
    /// `PushSubscription.toJSON()`, the endpoint being `prefix` and the id.
    package func write(_ w: inout JSONWriter, prefix: String) {
        w.beginObject()
        w.key("endpoint"); w.value(endpointOverride ?? prefix + id)
        w.key("expirationTime"); w.null()
        if publicKey.isEmpty {
            w.key("keys"); w.null()
            w.endObject()
            return
        }
        w.key("keys"); w.beginObject()
        w.key("p256dh"); w.value(base64URLEncode(publicKey))
        w.key("auth"); w.value(base64URLEncode(auth))
        w.endObject()
        w.endObject()
    }
}

/// How a web device's subscription gets its keys, and how a key in base64url is read: the Web
/// Push room's (`WebPushKeyOps.tls`), on the layer that links the cryptography, handed in at
/// start, so the engine links no crypto library and knows no key's form. Verifying VAPID and
/// decrypting pushes are the room's too.
public struct WebPushKeyOps: Sendable {
    /// A new subscription's keys: the private scalar, the public point (`p256dh`), the auth secret.
    package var newKeys: @Sendable () -> (privateKey: [UInt8], publicKey: [UInt8], auth: [UInt8])?
    /// The bytes of `text` when it is the base64url (padding forgiven) of an uncompressed P-256
    /// point: a VAPID key, a browser's `p256dh`.
    package var publicKey: @Sendable (_ text: String) -> [UInt8]?

    public init(newKeys: @escaping @Sendable () -> (privateKey: [UInt8], publicKey: [UInt8], auth: [UInt8])?,
                publicKey: @escaping @Sendable (_ text: String) -> [UInt8]?) {
        self.newKeys = newKeys
        self.publicKey = publicKey
    }

    /// No cryptography: web devices get no subscription.
    public static let unavailable = WebPushKeyOps(newKeys: { nil }, publicKey: { _ in nil })
}
