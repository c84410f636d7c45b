import FCMModel
import FCMCore
import FCMStore

// Real receiving clients (docs/real-clients.md) as the engine keeps them: a client (a Firefox
// uaid), its connection while one is open, and each delivery's life on that connection; its
// devices' link to it (`DeviceClient`) and what the engine and a client room tell each other
// (`ClientOrders`) are FCMModel's values. The wire (WebSocket, autopush's JSON, MCS) is the
// room's; the engine keeps the data and the delivery rules.

extension Device {
    /// A real browser's Web Push subscription (an autopush channel, a `wp:` registration): FCM's
    /// sends cannot name it.
    var isWebPushSubscription: Bool {
        guard let link = client else { return false }
        return link.kind == .autopush || (link.kind == .gcm && platform == .web)
    }
}

/// A client's open connection (memory only: a restart closes it).
struct ClientConnection: Sendable {
    var info: ClientConnectionInfo
    var connectedAt: Int64
    var lastHeartbeatAt: Int64?
    var lastFrameAt: Int64?
    /// Deliveries written on it and not acknowledged, in the order written.
    var unacked: [Int64] = []
}

/// A client the mock knows.
struct RealClient: Sendable {
    var row: RealClientRow
    var connection: ClientConnection?
    /// Its devices, oldest first.
    var devices: [Int64] = []

    var kind: ClientKind { ClientKind(rawValue: row.kind) ?? .autopush }
}

/// Most deliveries a connection has unacknowledged at once; more wait `pending` for room.
let maxUnackedPerConnection = 100

/// A delivery's life on a real client's connection (`client_delivery`).
struct ClientDelivery: Sendable {
    var kind: ClientKind
    var connectionID: String
    /// What the client acknowledges it by (autopush's `version`: the entry's message id).
    var version: String
    var firstSentAt: Int64
    var sends = 1
    var ack: (by: String, code: Int?, at: Int64)?
    var rejection: (code: Int, reason: String, at: Int64)?
    /// How its device held it, to hold it so again when its connection goes unacknowledged.
    var entry: StoredEntry
    /// An FCM registration's: the token it travelled over, the coding the mock encrypted with,
    /// and what it encrypted (JSON).
    var via: String? = nil
    var encryption: String? = nil
    var plaintext: String? = nil
    /// The encrypted push the mock made for it (an FCM registration's), kept until acknowledged:
    /// every write, after a restart too, carries the same bytes.
    var relay: FCMRelay? = nil
    /// The autopush channel it was last written on (memory only: unknown after a restart until
    /// it is written again), which an ack must name.
    var channelID: String? = nil

    /// The object as events and reads show it (docs/real-clients.md, `client_delivery`).
    func json() -> String {
        Self.object(kind: kind.transport, connectionID: connectionID, version: version, firstSentAt: firstSentAt, sends: Int64(sends),
                    ack: ack.map { ($0.by, $0.code.map(Int64.init), $0.at) },
                    rejection: rejection.map { (Int64($0.code), $0.reason, $0.at) },
                    via: via, encryption: encryption, plaintext: plaintext)
    }

    /// What the `client_delivery` column keeps: `json()`'s fields in its order as one JSON array,
    /// times in epoch milliseconds, the plaintext as a string. It is written at each of a
    /// delivery's two recorded states (`sent`, then acknowledged), on the send's and the
    /// acknowledgement's hot paths: a third of the object's bytes, and no time formatted; reads
    /// turn it back into the object (`shown`). An unacknowledged FCM registration's push adds
    /// what the mock encrypted (ciphertext, salt and key, base64url), for a write after a restart.
    func stored() -> String {
        var w = JSONWriter(capacity: 160)
        w.beginArray()
        w.value(kind.transport); w.value(connectionID); w.value(version); w.value(firstSentAt); w.value(Int64(sends))
        if let ack {
            w.value(ack.by)
            if let code = ack.code { w.value(Int64(code)) } else { w.null() }
            w.value(ack.at)
        } else {
            w.null(); w.null(); w.null()
        }
        if let r = rejection {
            w.value(Int64(r.code)); w.value(r.reason); w.value(r.at)
        } else {
            w.null(); w.null(); w.null()
        }
        w.value(via); w.value(encryption); w.value(plaintext)
        if let relay, ack == nil, rejection == nil {
            w.value(base64URLEncode(relay.body)); w.value(base64URLEncode(relay.salt)); w.value(base64URLEncode(relay.dh))
        }
        w.endArray()
        return w.string
    }

    /// A delivery's record read back (`stored()`'s array): at start, to continue at its next
    /// write (its sends, first write and, for an FCM registration, the push the mock encrypted);
    /// for reads, to show it (`expand`). `entry`: how its device holds it now. Nil for anything
    /// else.
    static func restored(_ stored: String, entry: StoredEntry) -> ClientDelivery? {
        guard stored.utf8.first == UInt8(ascii: "["), let a = (try? JSONParser.parse(stored))?.arrayValue, a.count >= 14,
              let kind = a[0].stringValue, let connectionID = a[1].stringValue, let version = a[2].stringValue,
              let firstSentAt = a[3].numberValue?.int64, let sends = a[4].numberValue?.int64 else { return nil }
        var cd = ClientDelivery(kind: kind == ClientKind.autopush.transport ? .autopush : .gcm, connectionID: connectionID,
                                version: version, firstSentAt: firstSentAt, sends: Int(sends), entry: entry,
                                via: a[11].stringValue, encryption: a[12].stringValue, plaintext: a[13].stringValue)
        cd.ack = a[5].stringValue.flatMap { by in a[7].numberValue?.int64.map { (by, a[6].numberValue?.int64.map(Int.init), $0) } }
        cd.rejection = a[8].numberValue?.int64.flatMap { code in a[10].numberValue?.int64.map { (Int(code), a[9].stringValue ?? "", $0) } }
        if a.count == 17, let body = a[14].stringValue.flatMap({ base64URLDecode(Array($0.utf8)) }),
           let salt = a[15].stringValue.flatMap({ base64URLDecode(Array($0.utf8)) }),
           let dh = a[16].stringValue.flatMap({ base64URLDecode(Array($0.utf8)) }) {
            cd.relay = FCMRelay(body: body, salt: salt, dh: dh)
        }
        return cd
    }

    /// `stored()`'s array as the object `json()` writes; nil for anything else.
    static func expand(_ stored: String) -> String? {
        restored(stored, entry: StoredEntry(deliveryID: 0, collapseKey: nil, expiresAt: 0))?.json()
    }

    /// The object's one writer (`plaintext`: JSON text, written as it is).
    private static func object(kind: String, connectionID: String, version: String, firstSentAt: Int64, sends: Int64,
                               ack: (by: String, code: Int64?, at: Int64)?, rejection: (code: Int64, reason: String, at: Int64)?,
                               via: String?, encryption: String?, plaintext: String?) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key(literal: "kind"); w.value(kind)
        w.key(literal: "connection_id"); w.value(connectionID)
        if kind == ClientKind.autopush.transport { w.key(literal: "version") } else { w.key(literal: "persistent_id") }
        w.value(version)
        w.key(literal: "first_sent_at"); w.value(rfc3339(millis: firstSentAt))
        w.key(literal: "sends"); w.value(sends)
        w.key(literal: "ack")
        if let ack {
            w.beginObject()
            w.key(literal: "by"); w.value(ack.by)
            w.key(literal: "code")
            if let code = ack.code { w.value(code) } else { w.null() }
            w.key(literal: "at"); w.value(rfc3339(millis: ack.at))
            w.endObject()
        } else {
            w.null()
        }
        w.key(literal: "rejection")
        if let r = rejection {
            w.beginObject()
            w.key(literal: "code"); w.value(r.code)
            w.key(literal: "reason"); w.value(r.reason)
            w.key(literal: "at"); w.value(rfc3339(millis: r.at))
            w.endObject()
        } else {
            w.null()
        }
        w.key(literal: "via"); w.value(via)
        w.key(literal: "encryption"); w.value(encryption)
        w.key(literal: "plaintext"); if let plaintext { w.raw(plaintext) } else { w.null() }
        w.endObject()
        return w.string
    }

    /// The `client_delivery` column of a held push dropped because its channel unregistered: no
    /// life on a connection, only why (`error_detail`).
    static let droppedJSON = #"{"error_detail":"the channel unregistered"}"#

    /// A stored `client_delivery` as shown: the object, or for a dropped push its reason. A store
    /// written before `stored()` keeps the object itself, shown as it is.
    static func shown(_ stored: String?) -> (clientDelivery: String?, errorDetail: String?) {
        guard let stored else { return (nil, nil) }
        if stored == droppedJSON { return (nil, "the channel unregistered") }
        if stored.utf8.first == UInt8(ascii: "[") { return (expand(stored), nil) }
        return (stored, nil)
    }

    /// What a client's rejecting code means (docs/real-clients.md).
    static func meaning(_ code: Int) -> String {
        switch code {
        case 101: "the browser could not decrypt it"
        case 102: "no service worker took it (not delivered to an app)"
        case 301: "the push handler threw"
        case 302: "the push handler's promise rejected"
        case 303: "the browser failed internally"
        default: "rejected with code \(code)"
        }
    }
}

/// A client as the control API shows it.
extension EngineState {
    /// The fake web device (no client of its own) whose subscription FCM registration `d`
    /// travels over, with that subscription's id; nil for any other device.
    func fakeSubscription(carrying d: Device) -> (device: Device, subscriptionID: String)? {
        guard let link = d.client, link.kind == .fcm, let viaID = link.via, let via = devices[viaID], via.client == nil,
              via.state == .registered, let sub = webPush[viaID], !sub.expired else { return nil }
        return (via, sub.id)
    }

    /// The client whose connection carries `d`'s pushes: its own, or for an FCM registration the
    /// client of the subscription it travels over.
    func carrier(of d: Device) -> RealClient? {
        guard let link = d.client else { return nil }
        if link.kind == .fcm { return link.via.flatMap { devices[$0]?.client }.flatMap { realClients[$0.id] } }
        return realClients[link.id]
    }

    func renderClient(_ c: RealClient) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.value(c.row.id)
        w.key("kind"); w.value(c.row.kind)
        w.key("connected"); w.value(c.connection != nil)
        w.key("connection")
        if let conn = c.connection {
            w.beginObject()
            w.key("id"); w.value(conn.info.id)
            w.key("connected_at"); w.value(rfc3339(millis: conn.connectedAt))
            w.key("remote"); w.value(conn.info.remote)
            w.key("tls"); w.value(conn.info.tls)
            w.key("unacked"); w.value(Int64(conn.unacked.count))
            w.key("last_heartbeat_at"); w.value(conn.lastHeartbeatAt.map { rfc3339(millis: $0) })
            w.key("last_frame_at"); w.value(conn.lastFrameAt.map { rfc3339(millis: $0) })
            w.endObject()
        } else {
            w.null()
        }
        w.key("user_agent"); w.value(c.row.userAgent)
        w.key("client_version"); w.value(c.row.clientVersion)
        w.key("checkin"); if let checkin = c.row.checkin { w.raw(checkin) } else { w.null() }
        w.key("created_at"); w.value(rfc3339(millis: c.row.createdAt))
        w.key("last_connected_at"); w.value(c.row.lastConnectedAt.map { rfc3339(millis: $0) })
        w.key("devices"); w.beginArray()
        // Its own, then the FCM registrations that travel over them (`?client_id=` finds both).
        for id in carried(by: c) { if let d = devices[id] { w.value(d.token) } }
        w.endArray()
        w.key("registrations"); w.beginArray()
        for r in gcmRegistrations.values.filter({ $0.client == c.row.id }).sorted(by: { ($0.createdAt, $0.token) < ($1.createdAt, $1.token) }) {
            w.beginObject()
            w.key("token"); w.value(r.token)
            w.key("app"); w.value(r.app)
            w.key("subtype"); w.value(r.subtype)
            w.key("sender"); w.value(r.sender)
            w.key("instance_id"); w.value(r.instanceID)
            w.key("device"); w.value(r.device.flatMap { devices[$0]?.token })
            w.key("created_at"); w.value(rfc3339(millis: r.createdAt))
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.string
    }

    /// The `client` of a connection that closed before it named one (before autopush's `hello`,
    /// before an MCS login was accepted): the clients API's keys, `id` null, nothing known but its
    /// kind and, for autopush, the upgrade's user agent.
    static func unnamedClient(kind: ClientKind, userAgent: String?) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.null()
        w.key("kind"); w.value(kind.rawValue)
        w.key("connected"); w.value(false)
        w.key("connection"); w.null()
        w.key("user_agent"); w.value(userAgent)
        for key in ["client_version", "checkin", "created_at", "last_connected_at"] { w.key(key); w.null() }
        w.key("devices"); w.beginArray(); w.endArray()
        w.key("registrations"); w.beginArray(); w.endArray()
        w.endObject()
        return w.string
    }

    /// A device's `client` object.
    func writeClient(_ w: inout JSONWriter, _ link: DeviceClient) {
        let carrier = link.kind == .fcm ? link.via.flatMap { devices[$0]?.client } : link
        let c = carrier.flatMap { realClients[$0.id] }
        w.beginObject()
        w.key("kind"); w.value(link.kind.rawValue)
        w.key("id"); w.value(link.kind == .fcm ? c?.row.id : link.id)
        w.key("connected"); w.value(c?.connection != nil)
        w.key("user_agent"); w.value(c?.row.userAgent)
        w.key("client_version"); w.value(c?.row.clientVersion)
        w.key("connected_at"); w.value(c?.connection.map { rfc3339(millis: $0.connectedAt) })
        w.key("last_heartbeat_at"); w.value(c?.connection?.lastHeartbeatAt.map { rfc3339(millis: $0) })
        switch link.kind {
        case .autopush:
            w.key("channel_id"); w.value(link.channelID)
            w.key("unregister_code"); w.value(link.unregisterCode.map { JSONValue.number(JSONNumber($0)) } ?? .null)
        case .gcm:
            w.key("app"); w.value(link.app)
            w.key("subtype"); w.value(link.subtype)
            w.key("sender"); w.value(link.sender)
            w.key("instance_id"); w.value(link.instanceID)
            w.key("channel"); w.value(link.channel)
        case .fcm:
            w.key("installation_fid"); w.value(link.id)
            w.key("app_id"); w.value(link.appID)
            w.key("endpoint"); w.value(link.endpoint)
            w.key("via"); w.value(link.via.flatMap { devices[$0]?.token })
        }
        w.endObject()
    }
}

extension ClientFilter {
    func matches(_ d: Device, state s: EngineState) -> Bool {
        guard let link = d.client else { return false }
        if let kind, link.kind != kind { return false }
        let carrier = link.kind == .fcm ? link.via.flatMap { s.devices[$0]?.client?.id } : link.id
        if let id, carrier != id, link.id != id { return false }
        if let connected, (carrier.flatMap { s.realClients[$0]?.connection } != nil) != connected { return false }
        return true
    }
}
