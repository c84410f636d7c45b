public import FCMModel
import FCMCore
import FCMStore
import Platform

/// What a push's target is, as the push endpoint looks it up.
public enum WebPushTarget: Sendable {
    /// Deliverable: the device and its subscription.
    case active(Device, WebPushSubscription)
    /// 404: no subscription has this id.
    case unknown
    /// 410: the subscription was ended, or its device uninstalled, replaced or deleted.
    case gone(WebPushGone, senderID: String?)
}

extension Engine {
    /// Length of a subscription's auth secret.
    static let webPushAuthBytes = 16

    // MARK: Subscriptions

    /// Where endpoints point: `base`, the server's own origin or `--web-push-origin`'s (the
    /// server decides), then the Web Push room's `path` and the subscription's id. Set once the
    /// listeners are up (their ports known).
    public func setWebPushEndpoints(base: String, path: String) {
        state.withLock { s in
            s.webPushBase = base
            s.webPushPath = path
        }
    }

    /// A new subscription for device `id` (a fresh key pair and auth secret), bound to
    /// `applicationServerKey` when given; nil when no key pair can be made.
    func newWebPushSubscription(device id: Int64, applicationServerKey: String?, state s: EngineState) -> WebPushSubscription? {
        guard let pair = webPushKeys.newKeyPair() else { return nil }
        var pushID = WebPushSubscriptionID.generate()
        while s.webPushIndex[pushID] != nil || s.webPushDeleted.contains(pushID) { pushID = WebPushSubscriptionID.generate() }
        var rng = SystemRandomNumberGenerator()
        let auth = (0..<Self.webPushAuthBytes).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return WebPushSubscription(id: pushID, device: id, publicKey: pair.publicKey, privateKey: pair.privateKey, auth: auth,
                                   applicationServerKey: applicationServerKey, expired: false)
    }

    /// A real browser's subscription for device `id`: a new id, no keys (the browser holds them);
    /// its endpoint is set by the room that made it.
    func relayedWebPushSubscription(device id: Int64, state s: EngineState) -> WebPushSubscription {
        var pushID = WebPushSubscriptionID.generate()
        while s.webPushIndex[pushID] != nil || s.webPushDeleted.contains(pushID) { pushID = WebPushSubscriptionID.generate() }
        var sub = WebPushSubscription(id: pushID, device: id, publicKey: [], privateKey: [], auth: [], applicationServerKey: nil, expired: false)
        sub.endpointOverride = ""
        return sub
    }

    /// `key` as a VAPID key (base64url of an uncompressed P-256 point, padding forgiven), without
    /// its padding; nil when it is none.
    public func applicationServerKey(_ key: String) -> String? {
        try? checkApplicationServerKey(key)
    }

    /// `application_server_key` as given at device creation: base64url of a 65-byte uncompressed
    /// P-256 point (padding forgiven). Returns the key without padding.
    func checkApplicationServerKey(_ key: String) throws(EngineError) -> String {
        let trimmed = String(key.prefix { $0 != "=" })
        guard let bytes = base64URLDecode(Array(key.utf8)), bytes.count == 65, bytes[0] == 4, webPushKeys.isPublicKey(bytes) else {
            throw .badRequest("application_server_key must be the base64url of an uncompressed P-256 public key (65 bytes starting with 0x04)")
        }
        return trimmed
    }

    /// The writes of new devices: their rows, and the subscriptions of the web ones.
    func deviceWrites(_ devices: [Device], state s: EngineState) -> [WriteOp] {
        let subscriptions = devices.compactMap { $0.platform == .web ? s.webPush[$0.id]?.row : nil }
        return subscriptions.isEmpty ? [Writes.insertDevices(devices.map(\.row))]
            : [Writes.insertDevices(devices.map(\.row)), Writes.saveWebPush(subscriptions)]
    }

    /// The target of a push to subscription `id`.
    public func webPushTarget(_ id: String) -> WebPushTarget {
        // A register3 token is its `wp:` registration's subscription id (`/fcm/send/{token}`).
        guard WebPushSubscriptionID.isWellFormed(id) || isWellFormedToken(id) else { return .unknown }
        return state.withLock { s in
            guard let deviceID = s.webPushIndex[id], let sub = s.webPush[deviceID], let d = s.devices[deviceID] else {
                guard s.webPushDeleted.contains(id) else { return .unknown }
                return .gone(.deviceDeleted, senderID: nil)
            }
            if sub.expired {
                return .gone(.ended, senderID: d.senderID)
            }
            guard d.state == .registered else {
                return .gone(.device(d.state), senderID: d.senderID)
            }
            return .active(d, sub)
        }
    }

    /// The device whose subscription has id `id` (also after its subscription was ended).
    public func device(webPushID id: String) -> Device? {
        state.withLock { s in s.webPushIndex[id].flatMap { s.devices[$0] } }
    }

    /// Ends the subscription of web device `token`: pushes to it answer 410 from now on.
    public func expireWebPush(_ token: String) throws(EngineError) -> Device {
        let result: Result<(Device, Store.Ticket?), EngineError> = state.withLock { s in
            guard let d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard d.platform == .web, var sub = s.webPush[d.id] else {
                return .failure(.badRequest("device '\(token)' is not a web device with a push subscription"))
            }
            if sub.expired { return .success((d, nil)) }
            sub.expired = true
            s.webPush[d.id] = sub
            return .success((d, submit([Writes.expireWebPush(device: d.id)])))
        }
        let (device, ticket) = try result.get()
        if let ticket {
            try commitControl(ticket)
            if events.hasReaders { events.publish([("device.updated", renderDevice(device))]) }
        }
        return device
    }

    /// A device as the control API shows it, its endpoint on `endpointBase` instead of the
    /// server's own (`?endpoint_base=`).
    public func renderDevice(_ d: Device, endpointBase: String) -> String {
        let now = clock.nowMillis()
        return state.withLock { s in s.render(d, now: now, endpointBase: endpointBase) }
    }
}

extension EngineState {
    /// Gives a new web device its subscription (made by `make`); false when none could be made.
    mutating func attachWebPush(_ sub: WebPushSubscription?) -> Bool {
        guard let sub else { return false }
        webPush[sub.device] = sub
        webPushIndex[sub.id] = sub.device
        return true
    }

    /// The subscription of device `id`, being deleted: forgotten but for its id, so its
    /// endpoint answers 410 (also after a restart); the write that keeps that, if it had one.
    mutating func deleteWebPush(device id: Int64) -> [WriteOp] {
        guard let sub = webPush.removeValue(forKey: id) else { return [] }
        webPushIndex[sub.id] = nil
        webPushDeleted.insert(sub.id)
        return [Writes.deleteWebPush(device: id, pushID: sub.id)]
    }

    /// A reset's part, before the `removed` devices go: their subscriptions and the ids of
    /// deleted devices' ones are forgotten (their endpoints answer 404); a kept device whose
    /// token was refreshed takes back the subscription that followed the new token; the kept
    /// ones that were ended are live again (as a fixture's device is at start). Returns the
    /// writes that do the same in the store.
    mutating func resetWebPush(removed: [Int64]) -> [WriteOp] {
        let gone = Set(removed)
        var returned: [WebPushRow] = []
        for d in devices.values where d.platform == .web && !gone.contains(d.id) && webPush[d.id] == nil {
            let successor = current(d)
            guard successor.id != d.id, gone.contains(successor.id), var sub = webPush.removeValue(forKey: successor.id) else { continue }
            sub.device = d.id
            sub.expired = false
            _ = attachWebPush(sub)
            returned.append(sub.row)
        }
        webPushDeleted.removeAll()
        var forgotten: [Int64] = []
        for id in removed {
            guard let sub = webPush.removeValue(forKey: id) else { continue }
            webPushIndex[sub.id] = nil
            forgotten.append(id)
        }
        for (id, sub) in webPush where sub.expired { webPush[id]?.expired = false }
        let reset = Writes.resetWebPush(removing: forgotten)
        return returned.isEmpty ? [reset] : [reset, Writes.saveWebPush(returned)]
    }
}
