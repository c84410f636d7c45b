import FCMCore

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
    package var transport: String { self == .autopush ? "autopush" : "mcs" }
    /// What faults on its writes name (`when.transport`).
    package var faultTransport: Transport { self == .autopush ? .autopush : .mcs }
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
    package var unregisterCode: Int?
    /// Held offline by the control API (`PATCH {"online":false}`) while connected.
    package var held = false
    /// The push endpoint the client was given (autopush, a `wp:` registration, an FCM registration's).
    public var endpoint: String?
    /// A register3 registration's `app`, `X-subtype`, `sender`, Instance ID `appid`, and the
    /// checkin's channel when it was made.
    public var app: String?
    public var subtype: String?
    public var sender: String?
    package var instanceID: String?
    package var channel: String?
    /// An FCM registration's app id and the device of the subscription it travels over.
    package var appID: String?
    package var via: Int64?
    /// An FCM registration's `web` object as the client last sent it (JSON).
    package var web: String?

    package init(kind: ClientKind, id: String, channelID: String?) {
        self.kind = kind
        self.id = id
        self.channelID = channelID
    }

    /// The stored form (the `devices.client` column).
    package var stored: String {
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
        if let web { w.key("web"); w.value(web) }
        w.endObject()
        return w.string
    }

    package init?(stored: String?) {
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
        web = o["web"]?.stringValue
    }
}

/// A connection as the room describes it when the client says who it is.
public struct ClientConnectionInfo: Sendable {
    /// The room's name for it (`ws3`), unique while the process runs.
    package var id: String
    /// The peer's `ip:port`.
    package var remote: String
    package var tls: Bool
    /// The upgrade's `User-Agent` (nil: keep the checkin's).
    package var userAgent: String?
    /// What the client says it is (an MCS LoginRequest's `id`, `chrome-156.0.8078.114`).
    package var clientVersion: String?

    public init(id: String, remote: String, tls: Bool, userAgent: String?, clientVersion: String? = nil) {
        self.id = id
        self.remote = remote
        self.tls = tls
        self.userAgent = userAgent
        self.clientVersion = clientVersion
    }
}

/// Why a client's registration was refused.
public enum ClientRefusal: Error, Sendable, Equatable {
    /// The channel belongs to another client.
    case channelInUse
    /// The key is no P-256 public key.
    case invalidKey(String)
    /// The client is unknown (it was forgotten meanwhile).
    case unknownClient
    /// The project is gone, or no device could be made.
    case failed(String)
}
