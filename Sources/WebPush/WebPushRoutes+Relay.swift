import Dispatch
import FCMCore
import FCMEngine
import FCMModel
import FCMStore
import RoomKit

/// FCM registrations over a fake web device's subscription (docs/real-clients.md): FCM's send
/// is encrypted as Google encrypts it (`aesgcm`, for the registration's keys) and handed to that
/// subscription, where this room takes it as any push: decrypted with the device's own keys,
/// held while it is offline, under its TTL.
final class FakeSubscriptionRelay: Sendable {
    let engine: Engine
    let decryption: WebPushDecryption
    let log: Log
    /// One at a time, in the order the sends were committed: the pushes to one subscription
    /// keep their order, and none is submitted on the thread that committed the send.
    private let queue = DispatchQueue(label: "fcm-mock.webpush.relay")

    init(engine: Engine, decryption: WebPushDecryption, log: Log) {
        self.engine = engine
        self.decryption = decryption
        self.log = log
        engine.setClientRoom(.fcm) { [self] orders in
            let writes = orders.writes
            queue.async { for w in writes { self.push(w) } }
        }
    }

    /// Write `w` (an FCM registration's delivery, `w.channelID` the subscription it travels
    /// over) as a push to that subscription. One that cannot go (the subscription expired or went
    /// between the send's commit and now, or the push was not stored) is logged at `warning`.
    private func push(_ w: ClientWrite) {
        let about = [("token", w.deviceToken), ("message_id", w.version), ("subscription", w.channelID ?? "")]
        guard let id = w.channelID, case .active(let device, let sub) = engine.webPushTarget(id) else {
            return log.warning("webpush could not relay an FCM registration's push: its subscription is gone", about)
        }
        guard let entry = w.entry ?? (try? engine.inboxEntry(w.deviceToken, messageID: w.version)),
              let relay = engine.fcmRelay(for: w) else {
            return log.warning("webpush could not relay an FCM registration's push: it could not be encrypted", about)
        }
        // `aesgcm`'s parameters, unpadded, as a push service receives them from an app server.
        let encryption = "salt=" + base64URLEncode(relay.salt), cryptoKey = "dh=" + base64URLEncode(relay.dh)
        let ttl = min(max(0, (entry.expiresAtMillis - entry.acceptedAtMillis) / 1000), WebPushHeaders.maxTTL)
        let urgency: WebPushUrgency = entry.row.priority == "high" ? .high : .normal
        let headers = WebPushHeaders(ttl: ttl, sentTTL: ttl, urgency: urgency, urgencyGiven: true, topic: nil, encoding: .aesgcm,
                                     encryption: encryption, cryptoKey: cryptoKey, authorization: nil)
        let decrypted = decryption.decrypt(WebPushBody(encoding: .aesgcm, bytes: relay.body, encryption: encryption, cryptoKey: cryptoKey),
                                           for: sub)
        let req = WebPushRoutes.request(to: device, headers: headers, identity: nil, body: relay.body, decrypted: decrypted)
        var submission = Submission(req, sender: device.senderID, transport: .webpush, faultKey: "/wp/" + id)
        if case .failure = decrypted { submission.undecryptable = true }
        engine.submit(submission) { [log] result in
            guard case .failure(let error) = result else { return }
            log.warning("webpush could not relay an FCM registration's push: it was not stored", about + [("error", "\(error)")])
        }
    }
}
