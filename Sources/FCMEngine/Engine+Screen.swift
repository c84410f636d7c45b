import FCMModel
import FCMCore
import FCMStore
import Platform

// The screen of a device whose messages came through a protocol that replaces on it
// (`HoldingRules.replacesOnScreen`, APNs): a notification with the collapse id of one the phone
// shows replaces it there, online at once and when the device comes online with what it held.
extension Engine {
    /// Delivery `mid` reached `device`'s screen: with a collapse id, the notification it showed
    /// under that id becomes `replaced` (status change and event).
    func show(_ mid: Int64, on device: Device, collapseID: String, _ ctx: SendContext, _ p: inout Placement, state s: inout EngineState) {
        guard let old = s.screens[device.id, default: Screen()].show(mid, collapseID: collapseID) else { return }
        p.changes.append(StatusChange(deliveryID: old, status: "replaced"))
        if ctx.wantEvents {
            p.events.append(("message.replaced", EventJSON.delivery(
                messageID: MessageID(micros: old, suffix: ctx.suffix).description, token: device.token, status: "replaced", at: ctx.now)))
        }
    }

    /// The held notifications `device` shows as it comes online (`entries`, delivered now), those
    /// held by a protocol's own rules that replace on screen: what they replace there by
    /// collapse id, with their events.
    func shownOnFlush(_ entries: [StoredEntry], device: Device, now: Int64, state s: inout EngineState)
        -> (changes: [StatusChange], events: [(String, String)]) {
        var changes: [StatusChange] = [], events: [(String, String)] = []
        let suffix = messageIDSuffix(senderID: device.senderID)
        for e in entries where e.ownRules && e.expiresAt > now {
            guard let c = e.collapseKey, let transport = Transport(tag: e.source), rooms.holding[transport]?.replacesOnScreen == true,
                  let old = s.screens[device.id, default: Screen()].show(e.deliveryID, collapseID: c)
            else { continue }
            changes.append(StatusChange(deliveryID: old, status: "replaced"))
            events.append(("message.replaced", EventJSON.delivery(
                messageID: MessageID(micros: old, suffix: suffix).description, token: device.token, status: "replaced", at: now)))
        }
        return (changes, events)
    }
}
