public import FCMCore

/// What a client's `hello` found and did.
public struct ClientHello: Sendable {
    public var clientID: String
    /// The id asked for was unknown (or none was given): a new client.
    public var isNew: Bool
    /// The connection this one replaces (one connection per client), to be closed by the room.
    public var replaced: String?
    /// What was held or unacknowledged, to write after the answer, in acceptance order.
    public var orders: ClientOrders

    package init(clientID: String, isNew: Bool, replaced: String? = nil, orders: ClientOrders) {
        self.clientID = clientID
        self.isNew = isNew
        self.replaced = replaced
        self.orders = orders
    }
}

/// What the engine asks of a client room after a change: writes, and connections to close (a
/// fault's `close_connection`).
public struct ClientOrders: Sendable {
    public var writes: [ClientWrite] = []
    public var close: [ClientClose] = []
    package var isEmpty: Bool { writes.isEmpty && close.isEmpty }

    public init(writes: [ClientWrite] = [], close: [ClientClose] = []) {
        self.writes = writes
        self.close = close
    }
}

/// A delivery to write on a client's connection. A class of constants: a write is handed along
/// (orders, the room's queue, a fault's delay) without copying its strings and registrations.
public final class ClientWrite: Sendable {
    /// The room that writes it (the connection's protocol).
    package let transport: ClientKind
    public let clientID: String
    public let connectionID: String
    public let deliveryID: Int64
    /// The message id the client acknowledges it by.
    public let version: String
    public let token: String
    public let channelID: String?
    /// What to write; nil after a restart (read it back with `Engine.clientRecordPayload(of:)`).
    public let payload: ClientPayload?
    /// A fault's delay before the write.
    public let delayMillis: Int64?
    /// The device it is for (a register3 registration's, an FCM registration's), and its token
    /// (whose inbox holds the entry).
    public let device: DeviceClient?
    public let deviceToken: String
    /// The registration a push travels on over MCS: its `app` (the stanza's category), its
    /// `X-subtype`, its `sender`.
    public let registration: DeviceClient?
    /// The entry as the send that placed it made it, and its project's sender id: a write decided
    /// by a send carries them, so the room reads nothing back (nil for one re-sent from held).
    public let entry: InboxEntry?
    public let senderID: String?

    package init(transport: ClientKind, clientID: String, connectionID: String, deliveryID: Int64, version: String,
                 token: String, channelID: String? = nil, payload: ClientPayload? = nil, delayMillis: Int64? = nil,
                 device: DeviceClient? = nil, deviceToken: String = "", registration: DeviceClient? = nil,
                 entry: InboxEntry? = nil, senderID: String? = nil) {
        self.transport = transport
        self.clientID = clientID
        self.connectionID = connectionID
        self.deliveryID = deliveryID
        self.version = version
        self.token = token
        self.channelID = channelID
        self.payload = payload
        self.delayMillis = delayMillis
        self.device = device
        self.deviceToken = deviceToken
        self.registration = registration
        self.entry = entry
        self.senderID = senderID
    }

    /// The same write carrying the entry its send made and its project's sender id.
    package func carrying(entry: InboxEntry, senderID: String?) -> ClientWrite {
        ClientWrite(transport: transport, clientID: clientID, connectionID: connectionID, deliveryID: deliveryID, version: version,
                    token: token, channelID: channelID, payload: payload, delayMillis: delayMillis, device: device,
                    deviceToken: deviceToken, registration: registration, entry: entry, senderID: senderID)
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

/// A connection for a client room to close.
public struct ClientClose: Sendable {
    package var transport: ClientKind = .autopush
    public var clientID: String
    public var connectionID: String
    /// Tell the client to stay away (autopush's back-off close code).
    public var backoff = false
    /// Why, for the log and `client.closed`.
    public var reason: String

    package init(transport: ClientKind = .autopush, clientID: String, connectionID: String, backoff: Bool = false,
                 reason: String) {
        self.transport = transport
        self.clientID = clientID
        self.connectionID = connectionID
        self.backoff = backoff
        self.reason = reason
    }
}
