public import FCMModel
import FCMCore
import FCMStore
import Platform

extension Engine {
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

    /// A new subscription for device `id` under a fresh id: with fresh keys (the Web Push
    /// room's) bound to `applicationServerKey` when given, nil when none can be made; or, for a
    /// real browser's (`relayed`), with none (the browser holds them), its endpoint set by the
    /// room that made it.
    func newWebPushSubscription(device id: Int64, applicationServerKey: String?, relayed: Bool, state s: EngineState) -> WebPushSubscription? {
        guard let keys = relayed ? (privateKey: [], publicKey: [], auth: []) : webPushOps?.newKeys() else { return nil }
        var rng = SystemRandomNumberGenerator()
        var pushID = WebPushSubscriptionID.generate(using: &rng)
        while s.webPushIndex[pushID] != nil || s.webPushDeleted.contains(pushID) { pushID = WebPushSubscriptionID.generate(using: &rng) }
        var sub = WebPushSubscription(id: pushID, device: id, publicKey: keys.publicKey, privateKey: keys.privateKey, auth: keys.auth,
                                      applicationServerKey: relayed ? nil : applicationServerKey, expired: false)
        if relayed { sub.endpointOverride = "" }
        return sub
    }

    /// `key` as a VAPID key, as the Web Push room reads one (its padding dropped); nil when it is none.
    public func applicationServerKey(_ key: String) -> String? {
        webPushOps?.serverKey(key)
    }

    /// `application_server_key` as given at device creation (the control API's refusal when it
    /// is no key). Returns the key as kept.
    func checkApplicationServerKey(_ key: String) throws(EngineError) -> String {
        guard let kept = webPushOps?.serverKey(key) else {
            throw .badRequest("application_server_key must be the base64url of an uncompressed P-256 public key (65 bytes starting with 0x04)")
        }
        return kept
    }

    /// The target of a push to subscription `id`.
    public func webPushTarget(_ id: String) -> WebPushTarget {
        // A register3 token is its registration's subscription id (the endpoint ends with it).
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

    /// Ends the subscription of web device `token`: pushes to it find it gone from now on.
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
            // The FCM registrations over it end with it, as when it is deleted.
            unregisterRiders(of: [device.id])
        }
        return device
    }

    /// The endpoint base, how many subscriptions there are (and ended), and the pushes taken
    /// since start (and how many would not decrypt).
    public func webPushHealth() -> (base: String, subscriptions: Int, expired: Int, counts: WebPushCounts) {
        state.withLock { s in
            var live = 0, expired = 0
            for (id, sub) in s.webPush where s.devices[id] != nil {
                if sub.expired { expired += 1 } else { live += 1 }
            }
            let counts = WebPushCounts(pushes: s.takenSinceStart[Int(Transport.webpush.tag)], undecryptable: s.undecryptableSinceStart)
            return (s.webPushBase, live + expired, expired, counts)
        }
    }
}

extension EngineState {
    /// Gives a new web device its subscription (`Engine.newWebPushSubscription`); false when none could be made.
    mutating func attachWebPush(_ sub: WebPushSubscription?) -> Bool {
        guard let sub else { return false }
        webPush[sub.device] = sub
        webPushIndex[sub.id] = sub.device
        return true
    }

    /// The subscription of device `id`, being deleted: forgotten but for its id, so its
    /// pushes find it gone (also after a restart); the write that keeps that, if it had one.
    mutating func deleteWebPush(device id: Int64) -> [WriteOp] {
        guard let sub = webPush.removeValue(forKey: id) else { return [] }
        webPushIndex[sub.id] = nil
        webPushDeleted.insert(sub.id)
        return [Writes.deleteWebPush(device: id, pushID: sub.id)]
    }

    /// A reset's part, before the `removed` devices go: their subscriptions and the ids of
    /// deleted devices' ones are forgotten (unknown from now on); a kept device whose
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
