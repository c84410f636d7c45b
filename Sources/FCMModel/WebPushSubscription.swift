import FCMCore
package import FCMStore

/// A web device's push subscription: what `PushSubscription.toJSON()` shows, and the private
/// half that only decryption reads.
public struct WebPushSubscription: Sendable, Equatable {
    /// The opaque id that ends the endpoint.
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
    /// Ended through the control API: pushes find it gone.
    package var expired: Bool
    /// The endpoint a real client was given (on the origin it came in on), or an FCM
    /// registration's (the subscription it travels over); nil: the server's endpoint base and the id.
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

    /// The endpoint a sender pushes to: the one a real client was given, else `prefix` and the id.
    package func endpoint(prefix: String) -> String { endpointOverride ?? prefix + id }
}

/// What the Web Push room gives the engine at start (`TLSWebPush`, on the layer that links the
/// cryptography), so the engine links no crypto library and knows no key's or subscription's
/// form. Verifying VAPID and decrypting pushes are the room's too.
public protocol WebPushOps: Sendable {
    /// A new subscription's keys: the private scalar, the public point (`p256dh`), the auth secret.
    func newKeys() -> (privateKey: [UInt8], publicKey: [UInt8], auth: [UInt8])?
    /// The bytes of `text` when it is a public key in the protocol's form (a VAPID key, a
    /// browser's `p256dh`).
    func publicKey(_ text: String) -> [UInt8]?
    /// The bytes of `text` when it is an auth secret in the protocol's form.
    func authSecret(_ text: String) -> [UInt8]?
    /// `text`, a public key, as a subscription keeps it; nil when it is none.
    func serverKey(_ text: String) -> String?
    /// A subscription as the browser shows it, pushed to at `endpoint`.
    func json(_ sub: WebPushSubscription, endpoint: String) -> String
}
