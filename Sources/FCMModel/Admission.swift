public import FCMCore

/// What the engine decided about a downstream request before its message is sent. Every
/// transport asks the same question (`Engine.admit`) and only turns the answer into its own wire
/// form (HTTP status and body, an XMPP nack); the refused ones are already recorded.
public enum Admission: Sendable {
    /// The request itself is wrong: `invalidParameters` carries an unknown parameter's detail,
    /// `invalidJSON` every other reason (syntax, types, the target). To be answered after
    /// `delay` when a delay fault fired.
    case refused(Refusal, delay: DelayFault?)
    /// A request fault answers the whole request (`.status`) or closes its connection (`.drop`);
    /// the refusal is recorded already.
    case faulted(RequestFault)
    /// Send it as `senderID`, answering after `delay` when a delay fault fired.
    case proceed(SendRequest, senderID: String, delay: DelayFault?)

    /// Why a request was refused.
    public enum Refusal: Sendable {
        case invalidJSON(String)
        case invalidParameters(String)
        /// The room's own rules refused it (`AdmissionContext.validate`, or its own parser).
        case invalidForTransport(String)
        public var detail: String {
            switch self {
            case .invalidJSON(let d), .invalidParameters(let d), .invalidForTransport(let d): return d
            }
        }
    }
}

/// What the rejection record of a refused request is made of.
public struct AdmissionContext {
    package var transport: Transport
    package var path: String
    package var format: BodyFormat
    /// The room's words for what it refuses.
    package var names: RefusalNames
    /// The body (or the stanza's JSON), for `raw_body`; read only when a record needs it.
    package var raw: () -> String
    /// The `message_id` an XMPP client gave the message.
    package var clientMessageID: String?
    /// A transport's own check of a request the protocol parsed (XMPP's
    /// `delivery_receipt_requested`), after the target's.
    package var validate: (SendRequest) -> String? = { _ in nil }
    /// Told the id of the rejection record it made, so the transport can keep its answer on it.
    public var recorded: (Int64) -> Void = { _ in }
    /// Most characters of the body a rejection record keeps (nil: all of it).
    public var rawLimit: Int?
    /// The refusal goes out whether or not its record could be written (a stanza's nack): the
    /// record is best effort and a store failure does not fail the admission.
    public var recordIsBestEffort = false

    public init(transport: Transport, path: String, format: BodyFormat, names: RefusalNames, raw: @escaping () -> String,
                clientMessageID: String? = nil, validate: @escaping (SendRequest) -> String? = { _ in nil }) {
        self.transport = transport
        self.names = names
        self.path = path
        self.format = format
        self.raw = raw
        self.clientMessageID = clientMessageID
        self.validate = validate
    }
}

/// How a room names, on its records, the refusals the engine decides for it: its wire's words
/// (legacy's `InvalidJson`, HTTP v1's `INVALID_ARGUMENT`, XMPP's `INVALID_JSON`), so the
/// engine never spells one.
public struct RefusalNames: Sendable {
    /// A request fault that answered or closed the request: the record's error and detail.
    package var fault: @Sendable (RequestFault) -> (error: String, detail: String)
    /// A request the room's parser refused.
    package var refusal: @Sendable (Admission.Refusal) -> String
    /// The status the room answers a refused request with (kept on the record); nil where its
    /// answers have none, as XMPP's nacks (recorded as 0, and so is a status fault's).
    package var refusedStatus: Int?

    /// The status a refused request's record keeps: `refusedStatus`, or 0 where there is none.
    package var recordedStatus: Int { refusedStatus ?? 0 }

    public init(fault: @escaping @Sendable (RequestFault) -> (error: String, detail: String),
                refusal: @escaping @Sendable (Admission.Refusal) -> String, refusedStatus: Int?) {
        self.fault = fault
        self.refusal = refusal
        self.refusedStatus = refusedStatus
    }
}

/// A delay fault that fired: its id and how long the answer waits.
public struct DelayFault: Sendable {
    public var fault: String
    public var ms: Int64

    package init(fault: String, ms: Int64) {
        self.fault = fault
        self.ms = ms
    }
}

/// What a request-level fault does to a request, decided once by the engine (`requestFault`)
/// for every room, which answers it in its own wire form.
public enum RequestFault: Sendable, Equatable {
    /// Answer the whole request with this status, and a retry time when the fault gives one.
    case status(Int, retryAfter: Int64?, fault: String)
    /// Answer with the protocol's own error that the fault names (an APNs reason).
    case protocolError(String, fault: String)
    /// Close the connection without an answer.
    case drop(fault: String)
    /// Go on, and answer this many milliseconds late.
    case delay(ms: Int64, fault: String)

    /// The fault's id, kept on the record of what it did.
    public var fault: String {
        switch self {
        case .status(_, _, let f), .protocolError(_, let f), .drop(let f), .delay(_, let f): f
        }
    }

    /// Whether it answers the request itself (a status, an error, a closed connection), rather
    /// than only delaying it.
    public var isAnswered: Bool {
        if case .delay = self { return false }
        return true
    }

    /// What a refusal's record says the fault did, in the mock's words (a room that answers a
    /// status with an error of its own adds that error's name, as APNs's reasons).
    public var detail: String {
        switch self {
        case .status(let code, _, let f): "fault \(f) answered HTTP \(code)"
        case .protocolError(let e, let f): "fault \(f) answered \(e)"
        case .drop(let f): "fault \(f) closed the connection without an answer"
        case .delay(_, let f): "fault \(f)"
        }
    }

    /// The error a refusal's record names for a closed connection, whatever the room.
    public static let closedConnection = "ConnectionClosed"
}

/// A request a room refused as a whole, for its record (`status: "rejected"`,
/// `Engine.recordRejected`): who sent it and how, the room's words for why, and what the
/// sender was answered.
public struct RejectedRequest: Sendable {
    public var senderID: String?
    public var transport: Transport
    public var format: BodyFormat
    /// The status the sender was answered with (0: none, as a stanza's nack or a dropped connection).
    public var answeredStatus: Int
    public var error: String
    public var detail: String
    /// The body as received (cut as the room keeps it), for `raw_body`.
    public var raw: String?
    public var fault: String?
    /// The message id the client gave (an XMPP message's).
    public var clientMessageID: String?
    /// What the request named, when its room reads that before refusing (an APNs send's device
    /// by its FCM token, or its APNs token as sent: `apns_token`); nil: none.
    public var target: (kind: String, value: String)?

    public init(senderID: String?, transport: Transport, format: BodyFormat = .json, answeredStatus: Int, error: String,
                detail: String, raw: String? = nil, fault: String? = nil, clientMessageID: String? = nil,
                target: (kind: String, value: String)? = nil) {
        self.senderID = senderID
        self.transport = transport
        self.format = format
        self.answeredStatus = answeredStatus
        self.error = error
        self.detail = detail
        self.raw = raw
        self.fault = fault
        self.clientMessageID = clientMessageID
        self.target = target
    }
}
