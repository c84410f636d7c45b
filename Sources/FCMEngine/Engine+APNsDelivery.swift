public import FCMModel
import FCMCore
import FCMStore
import Platform

// Apple's delivery rules on the fake iOS device (docs/spec/apns.md section 5), beside FCM's:
// offline, only the newest notification per app is held (`APNsStorage`, from `place`); online,
// a notification with the `apns-collapse-id` of one the phone shows replaces it there.
extension Engine {
    /// Delivery `mid` reached `device`'s screen: with a collapse id, the notification it showed
    /// under that id becomes `replaced` (status change and event).
    func showAPNs(_ mid: Int64, on device: Device, _ ctx: SendContext, _ p: inout Placement, state s: inout EngineState) {
        guard !ctx.dryRun, let collapseID = ctx.req.options.collapseKey,
            let old = s.apnsShown[device.id, default: APNsShown()].show(mid, collapseID: collapseID)
        else { return }
        p.changes.append(StatusChange(deliveryID: old, status: "replaced"))
        if ctx.wantEvents {
            p.events.append(("message.replaced", EventJSON.delivery(
                messageID: MessageID(micros: old, suffix: ctx.suffix).description, token: device.token, status: "replaced", at: ctx.now)))
        }
    }

    /// The held APNs notifications `device` shows as it comes online (`entries`, delivered now):
    /// those they replace on its screen by collapse id, with their events.
    static func shownOnFlush(_ entries: [StoredEntry], device: Device, now: Int64, state s: inout EngineState)
        -> (changes: [StatusChange], events: [(String, String)]) {
        var changes: [StatusChange] = [], events: [(String, String)] = []
        let suffix = messageIDSuffix(senderID: device.senderID)
        for e in entries where e.isAPNs && e.expiresAt > now {
            guard let c = e.collapseKey, let old = s.apnsShown[device.id, default: APNsShown()].show(e.deliveryID, collapseID: c)
            else { continue }
            changes.append(StatusChange(deliveryID: old, status: "replaced"))
            events.append(("message.replaced", EventJSON.delivery(
                messageID: MessageID(micros: old, suffix: suffix).description, token: device.token, status: "replaced", at: now)))
        }
        return (changes, events)
    }
}

extension Engine {
    /// Sets when an iOS device's APNs token expires (`at`, mock clock ms; nil: never); an APNs
    /// send after it is 410 `ExpiredToken`. 404 for an unknown token, 400 for a device that is
    /// not `ios`.
    public func setAPNsExpiry(_ token: String, at: Int64?) throws(EngineError) -> Device {
        let result: Result<(Device, Store.Ticket), EngineError> = state.withLock { s in
            guard var d = s.device(token: token) else { return .failure(.notFound("device '\(token)' does not exist")) }
            guard d.platform == .ios else { return .failure(.badRequest("expires_at is the APNs token's: for ios devices only")) }
            d.apnsExpiresAt = at
            s.devices[d.id] = d
            return .success((d, submit([Writes.setAPNsExpiry(device: d.id, at: at)])))
        }
        let (device, ticket) = try result.get()
        try commitControl(ticket)
        if events.hasReaders { events.publish([("device.updated", renderDevice(device))]) }
        return device
    }
}
