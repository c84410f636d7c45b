import FCMModel
import FCMCore
import FCMStore

// The effective payload rules (FCMCore/EffectivePayload.swift) where the server meets them: each
// platform's collapse key and TTL while a send places its deliveries and when held deliveries are
// read back at start, and the `effective` member of inbox entries.

extension Platform {
    /// The platform as FCMCore's delivery rules name it.
    var push: PushPlatform {
        switch self {
        case .android: return .android
        case .ios: return .ios
        case .web: return .web
        }
    }
}

/// Each platform's collapse key and TTL for one send, worked out once before its recipients are
/// placed. A legacy send (no platform blocks) has the same options on every platform and does no
/// JSON work for them.
struct PlatformDelivery {
    let android: DeliveryOptions
    let ios: DeliveryOptions
    let web: DeliveryOptions
    /// False for a legacy send: every platform's expiry is the send's own.
    let differs: Bool

    init(_ req: SendRequest, acceptedAtMillis: Int64) {
        // A v1 message without android, apns or webpush blocks keeps the defaults everywhere,
        // as a legacy one keeps its own options: no per-platform work.
        guard let p = req.platforms, p.android != nil || p.apns != nil || p.webpush != nil else {
            let o = DeliveryOptions(collapseKey: req.options.collapseKey, ttlSeconds: req.options.timeToLive)
            (android, ios, web, differs) = (o, o, o, false)
            return
        }
        android = EffectivePayload.deliveryOptions(req, for: .android, acceptedAtMillis: acceptedAtMillis)
        ios = EffectivePayload.deliveryOptions(req, for: .ios, acceptedAtMillis: acceptedAtMillis)
        web = EffectivePayload.deliveryOptions(req, for: .web, acceptedAtMillis: acceptedAtMillis)
        differs = true
    }

    subscript(_ p: Platform) -> DeliveryOptions {
        switch p {
        case .android: return android
        case .ios: return ios
        case .web: return web
        }
    }
}

extension SendRequest {
    /// The request-side fields of a stored message, as the effective payload rules read them:
    /// data, notification, collapse key, TTL, option flags (`Engine.flags`), the priority as
    /// recorded (already defaulted) and a v1 message's platform blocks.
    /// `acceptedAtMillis`: when the message was accepted (an APNs send's stored block has its
    /// headers put back from it by its room's reader: `RecordBlocks`).
    static func stored(data: String?, notification: String?, collapseKey: String?, timeToLive: Int64, flags: Int64,
                       priority: String?, platforms: String?, acceptedAtMillis: Int64, blocks: RecordBlocks) -> SendRequest {
        var r = SendRequest(format: .json)
        if let data, case .object(let o)? = try? JSONParser.parse(data) { r.data = o }
        if let notification, case .object(let o)? = try? JSONParser.parse(notification) { r.notification = o }
        r.options.collapseKey = collapseKey
        r.options.timeToLive = timeToLive
        r.options.contentAvailable = flags & 1 != 0
        r.options.mutableContent = flags & 2 != 0
        r.options.priority = priority.flatMap(Priority.init(rawValue:))
        r.platforms = platforms.flatMap { blocks.platforms($0, acceptedAtMillis: acceptedAtMillis) }
        return r
    }
}

/// Works out held deliveries' collapse keys at start: a v1 message's key depends on the device's
/// platform. The platform blocks of the last message seen are kept, since the deliveries of a
/// fan-out come one after another.
struct HeldCollapseKeys {
    /// How the rooms' blocks read back (an APNs send's collapse id is one of its headers).
    let blocks: RecordBlocks
    private var message: Int64 = -1

    init(blocks: RecordBlocks) { self.blocks = blocks }

    private var request = SendRequest(format: .json)

    /// The collapse key `h` is held under on a device of `platform`.
    mutating func key(_ h: HeldDelivery, platform: Platform?) -> String? {
        guard let platforms = h.platforms, !h.isNotice, let platform else { return h.collapseKey }
        if h.message != message {
            message = h.message
            request = SendRequest(format: .json)
            request.options.collapseKey = h.collapseKey
            // Only the collapse key is read here, which needs no accept time.
            request.platforms = blocks.platforms(platforms, acceptedAtMillis: 0)
        }
        // The expiry is the delivery's own; only the key is wanted here.
        return EffectivePayload.deliveryOptions(request, for: platform.push, acceptedAtMillis: 0).collapseKey
    }
}

extension Render {
    /// What the device received (`effective` of an inbox entry): the send's payload in its
    /// platform's form, as the room whose block it has says it arrived; null for a
    /// `deleted_messages` notice, which carries none.
    static func effective(_ r: InboxRow, platform: Platform, blocks: RecordBlocks) -> JSONValue {
        guard r.targetKind != "deleted_messages" else { return .null }
        let req = SendRequest.stored(data: r.data, notification: r.notification, collapseKey: r.collapseKey, timeToLive: r.timeToLive,
                                     flags: r.flags, priority: r.priority, platforms: r.platforms, acceptedAtMillis: r.acceptedAt,
                                     blocks: blocks)
        var payload = EffectivePayload.payload(req, for: platform.push, acceptedAtMillis: r.acceptedAt)
        blocks.received(req.platforms, in: &payload)
        return .object(payload)
    }
}
