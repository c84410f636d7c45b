public import FCMCore

/// How the rooms' record blocks read back. A room that keeps more on its records than the
/// fields every record has writes a block of its own (APNs's `apns` block: Apple's request as
/// received, written straight as bytes by its room) and gives the engine, at start, the function
/// that shows that block as sent (APNs/APNsRecordBlock.swift): so a block is written and read
/// back in its room, and the control API, the inbox and a restart's collapse keys read it through
/// here. A block no reader claims is shown as stored.
public struct RecordBlocks: Sendable {
    /// A stored block (`{"apns": {…}}`'s object) as shown, given when its send was accepted (ms).
    public typealias Reader = @Sendable (_ block: JSONObject, _ acceptedAtMillis: Int64) -> JSONObject
    /// Fields a room shows at the top of its records, read from their stored platform blocks
    /// (APNs's `apns_id` and `apns_unique_id`): names and string values, null when absent.
    public typealias Fields = @Sendable (_ blocks: JSONObject?) -> [(name: String, value: String?)]

    /// What a device received of a send with stored block `block` (as read), from that
    /// platform's part of the effective payload (`shown`): APNs's body that was no JSON object,
    /// as it came.
    public typealias Received = @Sendable (_ block: JSONObject, _ shown: JSONObject) -> JSONObject

    private let readers: [String: Reader]
    private let fields: [String: Fields]
    private let received: [String: Received]
    private let forms: [String: RecordForm]

    /// `readers` and `received` by the block's name in the record's platform blocks (`apns`);
    /// `fields` and `forms` by the transport whose records they are.
    public init(_ readers: [String: Reader] = [:], fields: [String: Fields] = [:], received: [String: Received] = [:],
                forms: [String: RecordForm] = [:]) {
        self.readers = readers
        self.fields = fields
        self.received = received
        self.forms = forms
    }

    /// How the records of `transport` show (every record's fields alone when its room gave none).
    package func form(_ transport: String) -> RecordForm {
        forms[transport] ?? RecordForm()
    }

    /// `payload`, an effective payload by platform, as the device received it, for a send
    /// with stored blocks `platforms`.
    package func received(_ platforms: PlatformConfigs?, in payload: inout JSONObject) {
        for (name, show) in received {
            guard let block = platforms?.block(name), case .object(let shown)? = payload[name] else { continue }
            payload[name] = .object(show(block, shown))
        }
    }

    /// The fields a record of `transport` shows at its top, from its stored blocks.
    package func recordFields(transport: String, _ blocks: JSONObject?) -> [(name: String, value: String?)] {
        fields[transport].map { $0(blocks) } ?? []
    }

    /// Block `name` of a record accepted at `acceptedAtMillis`, as shown.
    package func read(_ name: String, _ block: JSONObject, acceptedAtMillis: Int64) -> JSONObject {
        readers[name].map { $0(block, acceptedAtMillis) } ?? block
    }

    /// A record's stored platform blocks (`EffectivePayload.storedPlatforms`), each as shown.
    package func platforms(_ json: String, acceptedAtMillis: Int64) -> PlatformConfigs? {
        guard var p = EffectivePayload.storedPlatforms(json) else { return nil }
        if let b = p.android { p.android = read("android", b, acceptedAtMillis: acceptedAtMillis) }
        if let b = p.apns { p.apns = read("apns", b, acceptedAtMillis: acceptedAtMillis) }
        if let b = p.webpush { p.webpush = read("webpush", b, acceptedAtMillis: acceptedAtMillis) }
        return p
    }
}

/// What a protocol's records show in the control API and its events beyond what every record
/// has, as its room says (`RecordBlocks`' `forms`, by transport).
public struct RecordForm: Sendable {
    /// Its records show their stored platform blocks and the room's fields (`RecordBlocks.Fields`):
    /// a room that keeps a block of its own or a message's platform blocks (HTTP v1, APNs, Web Push).
    package var showsBlocks: Bool
    /// Its records show the name a send was answered with (`v1_name`).
    package var showsName: Bool
    /// Its records name the client's message id instead of an HTTP status (`xmpp_message_id`).
    package var byClientMessageID: Bool
    /// Its inbox entries show their transport and this stored platform block as the service saw
    /// the request (`webpush`).
    package var inboxBlock: String?
    /// Its inbox entries show their transport at the top, beside `via.transport` (a room with a
    /// wire of its own: APNs; implied by `inboxBlock`).
    package var inboxNamesTransport: Bool

    public init(showsBlocks: Bool = false, showsName: Bool = false, byClientMessageID: Bool = false, inboxBlock: String? = nil,
                inboxNamesTransport: Bool = false) {
        self.showsBlocks = showsBlocks
        self.showsName = showsName
        self.byClientMessageID = byClientMessageID
        self.inboxBlock = inboxBlock
        self.inboxNamesTransport = inboxNamesTransport || inboxBlock != nil
    }
}

/// Errors of a room's own that a fault may answer with (`then.error` with `when.transport` set
/// to the room's): APNs's reasons, which its room answers as Apple does.
public struct FaultErrors: Sendable {
    /// The transport whose faults may name them (`apns`).
    package var transport: String
    /// One of them, in words (`an APNs reason`).
    package var kind: String
    /// All of them, in words (`Apple's reasons`).
    package var listName: String
    /// Their names, in the order an error message lists them.
    package var names: [String]
    /// Set for a surface that is no send (register3): the errors go with `when.path` naming it,
    /// whatever the transport. No names: a surface without errors of its own (a checkin), where
    /// `then.error` is refused.
    package var path: String?
    /// Names of the room's own for FCM's errors (HTTP v1's FcmErrors: `UNAVAILABLE` for
    /// `Unavailable`): taken as those errors, which the room answers in its own form anyway.
    package var aliases: [String: String]

    /// Whether a fault's `when.path` `p` names this surface: `path` itself, or a call's form of a
    /// pattern (`/v1/projects/demo-project/installations` for `/v1/projects/*/installations`).
    package func covers(_ p: String) -> Bool {
        guard let path else { return false }
        if path == p { return true }
        let (a, b) = (path.split(separator: "/", omittingEmptySubsequences: false), p.split(separator: "/", omittingEmptySubsequences: false))
        return a.count == b.count && zip(a, b).allSatisfy { $0 == "*" ? !$1.isEmpty : $0 == $1 }
    }

    public init(transport: String, kind: String, listName: String, names: [String], path: String? = nil,
                aliases: [String: String] = [:]) {
        self.transport = transport
        self.kind = kind
        self.listName = listName
        self.names = names
        self.path = path
        self.aliases = aliases
    }
}

/// What the rooms give the engine at start, so it needs none of their wire: how their record
/// blocks read back, the errors of their own a fault may answer with, and the holding rules of
/// the protocols that do not hold messages by FCM's.
public struct RoomHooks: Sendable {
    package var recordBlocks: RecordBlocks
    package var faultErrors: [FaultErrors]
    package var holding: [Transport: HoldingRules]

    public init(recordBlocks: RecordBlocks = RecordBlocks(), faultErrors: [FaultErrors] = [], holding: [Transport: HoldingRules] = [:]) {
        self.recordBlocks = recordBlocks
        self.faultErrors = faultErrors
        self.holding = holding
    }
}
