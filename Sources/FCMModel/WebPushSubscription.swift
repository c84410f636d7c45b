public import FCMCore
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

/// The keys a web device's subscription is made with, made by the layer that links the
/// cryptography (TLS) and handed in, so the engine itself links no crypto library. Verifying
/// VAPID and decrypting pushes are the Web Push room's.
public struct WebPushKeyOps: Sendable {
    /// A new P-256 key pair: the private scalar (32 bytes) and the uncompressed public point (65).
    package var newKeyPair: @Sendable () -> (privateKey: [UInt8], publicKey: [UInt8])?
    /// Whether `bytes` are an uncompressed point of P-256 (65 bytes, 0x04 first, on the curve).
    package var isPublicKey: @Sendable (_ bytes: [UInt8]) -> Bool

    public init(newKeyPair: @escaping @Sendable () -> (privateKey: [UInt8], publicKey: [UInt8])?,
                isPublicKey: @escaping @Sendable (_ bytes: [UInt8]) -> Bool) {
        self.newKeyPair = newKeyPair
        self.isPublicKey = isPublicKey
    }

    /// No cryptography: web devices get no subscription.
    public static let unavailable = WebPushKeyOps(newKeyPair: { nil }, isPublicKey: { _ in false })
}

/// The text an FCM registration is sent for a message, made by the room that owns FCM's web
/// messages: from the send's effective `webpush` block, its sender, collapse key and message id.
public typealias RelayPayload = @Sendable (_ webpush: JSONObject?, _ senderID: String, _ collapseKey: String?,
                                           _ messageID: String) -> String

/// How the Web Push room encrypts an FCM payload for a subscription (`aesgcm`, a fresh key and
/// salt): set at start, so the engine links no crypto.
public typealias RelayEncryption = @Sendable (_ plaintext: [UInt8], _ p256dh: [UInt8], _ auth: [UInt8])
    -> (body: [UInt8], salt: [UInt8], dh: [UInt8])?

/// An FCM registration's push, ready for the connection it travels on: its body and the salt
/// and key to say in the coding's headers, each room padding them its own way.
public struct FCMRelay: Sendable {
    public var body: [UInt8]
    public var salt: [UInt8]
    public var dh: [UInt8]

    package init(body: [UInt8], salt: [UInt8], dh: [UInt8]) {
        self.body = body
        self.salt = salt
        self.dh = dh
    }
}
