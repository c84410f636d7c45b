public import FCMCore

/// One send as a protocol's room hands it to the engine (`Engine.submit`): everything the engine
/// needs to place, store and record it, in the engine's terms. A room reads its wire (headers,
/// body, credentials), checks its own rules, builds a `Submission` and turns the `SendResult`
/// back into its wire answer; the engine never sees a header, a status or a path's meaning.
public struct Submission: Sendable {
    /// What is sent, to which target, with which delivery options.
    package var request: SendRequest
    /// The verified sender: the sender id of the project the credential speaks for.
    package var sender: String
    /// The room that took the send, as records, events, statistics and faults name it.
    package var transport: Transport
    /// What request and recipient faults match on (`when.path`): the request's path as sent, or
    /// empty where the protocol has none (XMPP).
    package var faultKey: String
    /// A request fault that fired already (a delay the room waits out), kept on the record.
    public var firedFault: String?
    /// The room's own record block, a JSON object's text (an APNs request's headers, payload and
    /// credential; a Web Push request's headers and plaintext), kept on the record as it is and
    /// read back by the room. Nil: made from `request.platforms` (an HTTP v1 message's blocks).
    public var recordBlock: String?
    /// The request headers the record keeps and how the room's answer is made from the result:
    /// the answer is written with its record, in one commit.
    public var exchange: SendExchange?
    /// The body as received, kept on the record where the send's rows need it (a plain-text
    /// body, or one the device cannot read): a slice of the request's own bytes, copied only
    /// then.
    public var body: ArraySlice<UInt8>?
    /// The message id an XMPP client gave the message.
    public var clientMessageID: String?
    /// The one token is a Firebase installation id (HTTP v1's `message.fid`): its device's
    /// current token gets it; an unknown one is `NotRegistered`, never registered on first use.
    public var byInstallationID = false
    /// What the room's protocol says about the target where protocols differ.
    public var targetRules = TargetRules()
    /// The start of the `name` the record keeps for an accepted send, the message's id after it
    /// (HTTP v1's `projects/{project_id}/messages/`); nil: the record has none.
    public var namePrefix: String?
    /// How the room's records and events name FCM's errors (HTTP v1's FcmError codes); nil:
    /// by FCM's own names (`NotRegistered`).
    public var errorNames: (@Sendable (FCMErrorCode) -> String)?
    /// Why, in the room's words, for a record all of whose recipients failed alike (its
    /// `error_detail`, where the engine has no reason of its own); nil: none.
    public var errorDetails: (@Sendable (FCMErrorCode) -> String?)?
    /// Why an accepted send cannot reach a device: each delivery is `undeliverable`, the record
    /// (and each inbox entry) keeps the reason as `error_detail`, and the record the body as
    /// received (`body`, when it is text; the room's block keeps it otherwise).
    public var undeliverable: String?
    /// The mock clock's time (ms) the room decided the send's options from (an APNs send's
    /// expiration), taken as its accept time; nil: read when the engine takes it.
    public var acceptedAt: Int64?
    /// The status the room answers an accepted send with, kept on its record (`http_status`);
    /// nil where the room's answers have none (an XMPP ack).
    public var answeredStatus: Int?
    /// What a real client's connection is sent for this push (a relayed Web Push body and its
    /// coding), in the client room's terms; the engine keeps it until the client acknowledges.
    public var relay: ClientPayload?
    /// Taken, but its body would not decrypt (a Web Push push): its deliveries settle
    /// `undecryptable` instead of reaching the device.
    public var undecryptable = false
    /// False: the writes stay queued for the caller's next `commitQueued()` (an HTTP/2 read's
    /// sends commit together), or for a commit already running.
    public var commitNow = true

    public init(_ request: SendRequest, sender: String, transport: Transport, faultKey: String) {
        self.request = request
        self.sender = sender
        self.transport = transport
        self.faultKey = faultKey
    }
}

/// What a room's protocol says about a send's target, where the protocols differ.
public struct TargetRules: Sendable {
    /// The room's parser checked the tokens already (HTTP v1's): they are taken as well formed.
    package var tokensChecked = false
    /// A token may be a device group's notification key (the legacy protocols; HTTP v1 has no
    /// device groups).
    package var groupsByToken = true
    /// Most `&&`/`||` a condition may have; nil: the server's `--max-condition-operators`.
    package var maxConditionOperators: Int?
    /// A dry run fails an unknown token even where a send would register it (HTTP v1's
    /// `validate_only`; a legacy `dry_run` is validated exactly as the send would be).
    package var dryRunNeedsKnownToken = false

    public init(tokensChecked: Bool = false, groupsByToken: Bool = true, maxConditionOperators: Int? = nil,
                dryRunNeedsKnownToken: Bool = false) {
        self.tokensChecked = tokensChecked
        self.groupsByToken = groupsByToken
        self.maxConditionOperators = maxConditionOperators
        self.dryRunNeedsKnownToken = dryRunNeedsKnownToken
    }
}
