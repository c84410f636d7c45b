public import FCMStore

/// Filters of `GET /api/v1/messages`.
public struct MessageFilter: Sendable {
    public var senderID: String?
    public var token: String?
    public var topic: String?
    public var transport: String?
    public var status: String?
    public var sinceMillis: Int64?
    /// Accepted at or before this time.
    public var untilMillis: Int64?
    /// The record's error or a recipient's (`NotRegistered`, `UNREGISTERED`, `Fault` …).
    public var error: String?
    /// The `message_id` an XMPP client gave its message.
    public var xmppMessageID: String?
    /// The `name` a v1 send was answered (`projects/{project_id}/messages/{id}`).
    public var v1Name: String?
    /// `recipients=N`: at most N recipients per record (the first N), with `recipients_total`.
    public var recipientsLimit: Int?
    /// `text`: words or phrases each found, ignoring case, in the data, notification or platform blocks.
    public var text: [String] = []
    /// Sent to a device of this app, or restricted to this package name.
    public var app: String?
    /// `client_kind`: sent to a real client's device of this kind (`autopush`, `gcm`, `fcm`).
    public var clientKind: String?
    /// `not_…`: records matching none of these.
    public var excluded: [MessageFilter] = []
    /// `recipient_counts=true`: each record's recipients counted by status.
    public var recipientCounts = false
    /// `total=true` (or `total=N`): how many records match, counted up to `totalCap` (or N).
    public var totalCap: Int?
    /// The most records `total=true` counts: beyond, the list says "more than". 2,000 rows cost
    /// about 2 ms at 1 M stored, which keeps the page's first screen as cheap as before.
    public static let defaultTotalCap = 2_000
    /// The most `total=N` may ask to count.
    public static let maxTotalCap = 100_000
    public init() {}
}

/// What pushes the Web Push endpoint has taken since start (`GET /api/v1/health`).
public struct WebPushCounts: Sendable, Equatable {
    public var pushes: Int64 = 0
    public var undecryptable: Int64 = 0

    package init(pushes: Int64 = 0, undecryptable: Int64 = 0) {
        self.pushes = pushes
        self.undecryptable = undecryptable
    }
}

/// What `GET /api/v1/stats` answers (the XMPP connections are the listener's to count).
public struct StatsSnapshot: Sendable {
    public var counts: SendCounts
    /// Deliveries held for offline devices.
    public var pending: Int
    public var devices: Int

    package init(counts: SendCounts, pending: Int, devices: Int) {
        self.counts = counts
        self.pending = pending
        self.devices = devices
    }
}

/// `GET /api/v1/devices?client_kind=&client_id=&connected=`: which real clients' devices.
public struct ClientFilter: Sendable {
    package var kind: ClientKind?
    package var id: String?
    package var connected: Bool?

    public init(kind: ClientKind?, id: String?, connected: Bool?) {
        self.kind = kind
        self.id = id
        self.connected = connected
    }
}
