public import FCMCore

// What an FCM registration is sent (an FCM send to a registration whose client is a Chromium
// over MCS or a Firefox over autopush): its text made by the FCM registrations room, encrypted
// by the Web Push room, written by the client's room; the engine keeps it for a delivery
// written again (`Engine.fcmRelay(for:)`). Set at start (`Engine.setRelayPayload`,
// `Engine.setRelayEncryption`), so the engine links no crypto and speaks no wire.

/// The text an FCM registration is sent for a message, made by the room that owns FCM's web
/// messages: from the send's effective `webpush` block (and the block as sent, for what the
/// effective payload leaves out), its sender, collapse key and message id.
public typealias RelayPayload = @Sendable (_ webpush: JSONObject?, _ sent: JSONObject?, _ senderID: String, _ collapseKey: String?,
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
