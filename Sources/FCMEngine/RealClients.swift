public import FCMCore
public import FCMStore

// Real receiving clients (docs/real-clients.md) as the engine keeps them: a client (a Firefox
// uaid), its devices' link to it, its connection while one is open, and each delivery's life on
// that connection. The wire (WebSocket, autopush's JSON) is the room's; the engine keeps the
// data and the delivery rules.

/// Which protocol a real client speaks.
public enum ClientKind: String, Sendable, Equatable, CaseIterable {
    /// Firefox, over Mozilla's autopush WebSocket protocol.
    case autopush
    /// Chromium's GCM driver and raw GCM clients: checkin, register3, MCS.
    case gcm
    /// An FCM registration (Firebase's web SDK, firebase-messaging), delivered over the Web Push
    /// subscription its endpoint names.
    case fcm

    /// How its connection is named in `client_delivery.kind`.
    var transport: String { self == .autopush ? "autopush" : "mcs" }
    /// What faults on its writes name (`when.transport`).
    var faultTransport: Transport { self == .autopush ? .autopush : .mcs }
}

/// A real client's device's link to its client (`Device.client`).
public struct DeviceClient: Sendable, Equatable {
    public var kind: ClientKind
    /// The client's id: an autopush uaid, a checked-in android id; for an FCM registration, its
    /// installation's fid.
    public var id: String
    /// The autopush channel the device stands for.
    public var channelID: String?
    /// Why the client unregistered the channel (autopush's code), once it did.
    public var unregisterCode: Int?
    /// Held offline by the control API (`PATCH {"online":false}`) while connected.
    var held = false
    /// The push endpoint the client was given (autopush, a `wp:` registration, an FCM registration's).
    public var endpoint: String?
    /// A register3 registration's `app`, `X-subtype`, `sender`, Instance ID `appid`, and the
    /// checkin's channel when it was made.
    public var app: String?
    public var subtype: String?
    public var sender: String?
    public var instanceID: String?
    public var channel: String?
    /// An FCM registration's app id and the device of the subscription it travels over.
    public var appID: String?
    public var via: Int64?

    public init(kind: ClientKind, id: String, channelID: String?) {
        self.kind = kind
        self.id = id
        self.channelID = channelID
    }

    /// The stored form (the `devices.client` column).
    var stored: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("kind"); w.value(kind.rawValue)
        w.key("id"); w.value(id)
        w.key("channel_id"); w.value(channelID)
        w.key("unregister_code"); w.value(unregisterCode.map { JSONValue.number(JSONNumber($0)) } ?? .null)
        w.key("held"); w.value(held)
        w.key("endpoint"); w.value(endpoint)
        w.key("app"); w.value(app)
        w.key("subtype"); w.value(subtype)
        w.key("sender"); w.value(sender)
        w.key("instance_id"); w.value(instanceID)
        w.key("channel"); w.value(channel)
        w.key("app_id"); w.value(appID)
        w.key("via"); w.value(via.map { JSONValue.number(JSONNumber($0)) } ?? .null)
        w.endObject()
        return w.string
    }

    init?(stored: String?) {
        guard let stored, let o = try? JSONParser.parse(stored).objectValue, let kind = o["kind"]?.stringValue.flatMap(ClientKind.init),
              let id = o["id"]?.stringValue else { return nil }
        self.init(kind: kind, id: id, channelID: o["channel_id"]?.stringValue)
        unregisterCode = o["unregister_code"]?.numberValue?.int64.map(Int.init)
        held = o["held"]?.boolValue ?? false
        endpoint = o["endpoint"]?.stringValue
        app = o["app"]?.stringValue
        subtype = o["subtype"]?.stringValue
        sender = o["sender"]?.stringValue
        instanceID = o["instance_id"]?.stringValue
        channel = o["channel"]?.stringValue
        appID = o["app_id"]?.stringValue
        via = o["via"]?.numberValue?.int64
    }
}

extension Device {
    /// A real browser's Web Push subscription (an autopush channel, a `wp:` registration): FCM's
    /// sends cannot name it.
    var isWebPushSubscription: Bool {
        guard let link = client else { return false }
        return link.kind == .autopush || (link.kind == .gcm && platform == .web)
    }
}

/// A connection as the room describes it when the client says who it is.
public struct ClientConnectionInfo: Sendable {
    /// The room's name for it (`ws3`), unique while the process runs.
    public var id: String
    /// The peer's `ip:port`.
    public var remote: String
    public var tls: Bool
    /// The upgrade's `User-Agent` (nil: keep the checkin's).
    public var userAgent: String?
    /// What the client says it is (an MCS LoginRequest's `id`, `chrome-156.0.8078.114`).
    public var clientVersion: String?

    public init(id: String, remote: String, tls: Bool, userAgent: String?, clientVersion: String? = nil) {
        self.id = id
        self.remote = remote
        self.tls = tls
        self.userAgent = userAgent
        self.clientVersion = clientVersion
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

    func json() -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key(literal: "kind"); w.value(kind.transport)
        w.key(literal: "connection_id"); w.value(connectionID)
        if kind == .autopush { w.key(literal: "version") } else { w.key(literal: "persistent_id") }
        w.value(version)
        w.key(literal: "first_sent_at"); w.value(rfc3339(millis: firstSentAt))
        w.key(literal: "sends"); w.value(Int64(sends))
        w.key(literal: "ack")
        if let ack {
            w.beginObject()
            w.key(literal: "by"); w.value(ack.by)
            w.key(literal: "code")
            if let code = ack.code { w.value(Int64(code)) } else { w.null() }
            w.key(literal: "at"); w.value(rfc3339(millis: ack.at))
            w.endObject()
        } else {
            w.null()
        }
        w.key(literal: "rejection")
        if let r = rejection {
            w.beginObject()
            w.key(literal: "code"); w.value(Int64(r.code))
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

    /// A stored `client_delivery` as shown: the object, or for a dropped push its reason.
    static func shown(_ stored: String?) -> (clientDelivery: String?, errorDetail: String?) {
        guard let stored else { return (nil, nil) }
        if stored == droppedJSON { return (nil, "the channel unregistered") }
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

/// What a room hands the engine with a push for a real client: what the client is sent, in the
/// room's terms (a relayed Web Push body and its coding headers), kept until it is acknowledged.
public struct ClientPayload: Sendable {
    public var body: [UInt8]?
    public var fields: [(String, String)]

    public init(body: [UInt8]?, fields: [(String, String)]) {
        self.body = body
        self.fields = fields
    }

    /// A relayed push's body and coding read back from its record's `webpush` block (the Web
    /// Push room writes `ciphertext_base64`, `content_encoding` and, for `aesgcm`, `encryption`
    /// and `crypto_key`): what memory no longer has after a restart.
    public init(webPushBlock block: JSONObject?) {
        body = block?["ciphertext_base64"]?.stringValue.flatMap { base64URLDecode(Array($0.utf8)) }
        var fields: [(String, String)] = []
        if let e = block?["content_encoding"]?.stringValue { fields.append(("encoding", e)) }
        if let e = block?["encryption"]?.stringValue { fields.append(("encryption", e)) }
        if let k = block?["crypto_key"]?.stringValue { fields.append(("crypto_key", k)) }
        self.fields = fields
    }
}

/// A delivery to write on a client's connection.
public struct ClientWrite: Sendable {
    /// The room that writes it (the connection's protocol).
    public var transport: ClientKind
    public var clientID: String
    public var connectionID: String
    public var deliveryID: Int64
    /// The message id the client acknowledges it by.
    public var version: String
    public var token: String
    public var channelID: String?
    /// What to write; nil after a restart (read it back with `Engine.clientPayload(of:)`).
    public var payload: ClientPayload?
    /// A fault's delay before the write.
    public var delayMillis: Int64?
    /// The device it is for (a register3 registration's, an FCM registration's), and its token
    /// (whose inbox holds the entry).
    public var device: DeviceClient?
    public var deviceToken: String = ""
    /// The registration a push travels on over MCS: its `app` (the stanza's category), its
    /// `X-subtype`, its `sender`.
    public var registration: DeviceClient?
    /// The entry as the send that placed it made it, and its project's sender id: a write decided
    /// by a send carries them, so the room reads nothing back (nil for one re-sent from held).
    public var entry: InboxEntry?
    public var senderID: String?
}

/// What the engine asks of a client room after a change: writes, and connections to close (a
/// fault's `close_connection`).
public struct ClientOrders: Sendable {
    public var writes: [ClientWrite] = []
    public var close: [ClientClose] = []
    var isEmpty: Bool { writes.isEmpty && close.isEmpty }

    public init(writes: [ClientWrite] = [], close: [ClientClose] = []) {
        self.writes = writes
        self.close = close
    }
}

/// `GET /api/v1/devices?client_kind=&client_id=&connected=`: which real clients' devices.
public struct ClientFilter: Sendable {
    public var kind: ClientKind?
    public var id: String?
    public var connected: Bool?

    public init(kind: ClientKind?, id: String?, connected: Bool?) {
        self.kind = kind
        self.id = id
        self.connected = connected
    }

    func matches(_ d: Device, state s: EngineState) -> Bool {
        guard let link = d.client else { return false }
        if let kind, link.kind != kind { return false }
        let carrier = link.kind == .fcm ? link.via.flatMap { s.devices[$0]?.client?.id } : link.id
        if let id, carrier != id, link.id != id { return false }
        if let connected, (carrier.flatMap { s.realClients[$0]?.connection } != nil) != connected { return false }
        return true
    }
}

/// A connection for a client room to close.
public struct ClientClose: Sendable {
    public var transport: ClientKind = .autopush
    public var clientID: String
    public var connectionID: String
    /// Tell the client to stay away (autopush's back-off close code).
    public var backoff = false
    /// Why, for the log and `client.closed`.
    public var reason: String
}

/// A client as the control API shows it.
extension EngineState {
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
        for id in c.devices { if let d = devices[id] { w.value(d.token) } }
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
