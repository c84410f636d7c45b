import FCMCore
import FCMStore

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
