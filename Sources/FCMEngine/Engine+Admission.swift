import Platform
public import FCMCore
public import FCMStore

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

/// Something a tester should be able to read in the log that the wire answer does not say (why
/// a credential was refused, a hint for a body that was read in the wrong format): a message and
/// dotted metadata, as `Log` takes them. The engine has no logger of its own; the application
/// forwards these to its log (`Engine.onNotice`).
public struct EngineNotice: Sendable {
    public var message: String
    public var fields: [(String, String)]
}

extension Engine {
    /// Sends every notice to `sink` (once, at start: the application's log).
    public func onNotice(_ sink: @escaping @Sendable (EngineNotice) -> Void) {
        noticeSink.withLock { $0 = sink }
    }

    /// Reports `message` to the notice sink, if there is one. For refusals and hints, not for
    /// every request: it takes a lock.
    public func notice(_ message: String, _ fields: [(String, String)]) {
        guard let sink = noticeSink.withLock({ $0 }) else { return }
        sink(EngineNotice(message: message, fields: fields))
    }
}

/// A delay fault that fired: its id and how long the answer waits.
public struct DelayFault: Sendable {
    public var fault: String
    public var ms: Int64
}

/// How a room names, on its records, the refusals the engine decides for it: its wire's words
/// (legacy's `InvalidJson`, HTTP v1's `INVALID_ARGUMENT`, XMPP's `INVALID_JSON`), so the
/// engine never spells one.
public struct RefusalNames: Sendable {
    /// A request fault that answered or closed the request: the record's error and detail.
    var fault: @Sendable (RequestFault) -> (error: String, detail: String)
    /// A request the room's parser refused.
    var refusal: @Sendable (Admission.Refusal) -> String
    /// The status the room answers a refused request with (kept on the record); nil where its
    /// answers have none, as XMPP's nacks (recorded as 0, and so is a status fault's).
    var refusedStatus: Int?

    /// The status a refused request's record keeps: `refusedStatus`, or 0 where there is none.
    var recordedStatus: Int { refusedStatus ?? 0 }

    public init(fault: @escaping @Sendable (RequestFault) -> (error: String, detail: String),
                refusal: @escaping @Sendable (Admission.Refusal) -> String, refusedStatus: Int?) {
        self.fault = fault
        self.refusal = refusal
        self.refusedStatus = refusedStatus
    }
}

/// What the rejection record of a refused request is made of.
public struct AdmissionContext {
    var transport: Transport
    var path: String
    var format: BodyFormat
    /// The room's words for what it refuses.
    var names: RefusalNames
    /// The body (or the stanza's JSON), for `raw_body`; read only when a record needs it.
    var raw: () -> String
    /// The `message_id` an XMPP client gave the message.
    var clientMessageID: String?
    /// A transport's own check of a request the protocol parsed (XMPP's
    /// `delivery_receipt_requested`), after the target's.
    var validate: (SendRequest) -> String? = { _ in nil }
    /// Told the id of the rejection record it made, so the transport can keep its answer on it.
    public var recorded: (Int64) -> Void = { _ in }

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

extension Engine {
    /// Authentication, validation of the request and its target, the request-wide faults, and
    /// the record of a refusal, in the order the transport's protocol has them: over HTTP a
    /// fault comes before the body is judged (FCM being unavailable does not depend on what a
    /// request says) and a refused body still waits out a delay fault; over XMPP a malformed
    /// message is nacked before any fault is consulted.
    ///
    /// A rejection record the store cannot write fails an HTTP request (answered 500 by its
    /// caller) but not an XMPP message, whose nack goes out all the same; a 401 is answered
    /// whatever the store says.
    public func admit(_ outcome: SendParseOutcome, senderID: String, _ context: AdmissionContext) throws(StoreError) -> Admission {
        var request: SendRequest?
        var refusal: Admission.Refusal?
        switch outcome {
        case .badRequest(let reason): refusal = .invalidJSON(reason)
        case .invalidParameters(let detail): refusal = .invalidParameters(detail)
        case .request(let r):
            if r.messageError == .invalidParameters, context.format == .plain {
                // The plain-text answer (`Error=InvalidParameters`, status 200) cannot say that
                // the body was JSON sent without its Content-Type; the log can.
                let body = context.raw()
                let looksJSON = body.first { $0 != " " && $0 != "\n" && $0 != "\r" && $0 != "\t" } == "{"
                notice("send answered Error=InvalidParameters", [
                    ("http.path", context.path), ("error_detail", r.messageErrorDetail ?? ""),
                    ("hint", looksJSON ? "the body is JSON but was read as a form: add the header Content-Type: application/json"
                                       : "the body was read as a form (no Content-Type: application/json)"),
                ])
            }
            if let reason = r.target.invalidReason(maxConditionOperators: maxConditionOperators) {
                refusal = .invalidJSON(reason)
            } else if let reason = context.validate(r) {
                refusal = .invalidForTransport(reason)
            } else {
                request = r
            }
        }
        var target: SendTarget = .missing
        if case .request(let r) = outcome { target = r.target }
        return try admit(request, refusal, target: target, senderID: senderID, context)
    }

    /// What every room shares: the faults and the record of a refusal, given the request that
    /// its parser made or why it made none (HTTP v1's message parser, which checks the target by
    /// v1's rules itself, asks this directly).
    public func admit(_ request: SendRequest?, _ refusal: Admission.Refusal?, target: SendTarget, senderID: String,
                      _ context: AdmissionContext) throws(StoreError) -> Admission {
        let hasStatus = context.names.refusedStatus != nil
        if !hasStatus, let refusal {
            try record(context, senderID: senderID, httpStatus: context.names.recordedStatus, error: context.names.refusal(refusal),
                       detail: refusal.detail, fault: nil)
            return .refused(refusal, delay: nil)
        }
        var delay: DelayFault?
        switch requestFault(transport: context.transport, path: context.path, senderID: senderID, tokens: target.tokens,
                            topic: target.topicName) {
        case .delay(let ms, let fault)?:
            delay = DelayFault(fault: fault, ms: ms)
        case let f? where f.isAnswered:
            // The record names the fault's outcome as the room's wire does (`context.names`).
            var status = 0
            if case .status(let code, _, _) = f, hasStatus { status = code }
            let (error, detail) = context.names.fault(f)
            try record(context, senderID: senderID, httpStatus: status, error: error, detail: detail, fault: f.fault)
            return .faulted(f)
        default:
            break
        }
        if let refusal {
            try record(context, senderID: senderID, httpStatus: context.names.recordedStatus, error: context.names.refusal(refusal),
                       detail: refusal.detail,
                       fault: delay?.fault)
            return .refused(refusal, delay: delay)
        }
        guard let request else { preconditionFailure("a request without a refusal parsed") }
        return .proceed(request, senderID: senderID, delay: delay)
    }

    /// The rejection record of a refused request.
    private func record(_ context: AdmissionContext, senderID: String, httpStatus: Int, error: String, detail: String,
                        fault: String?) throws(StoreError) {
        let raw = context.raw()
        guard context.transport == .xmpp else {
            context.recorded(try recordRejectedID(senderID: senderID, transport: context.transport, format: context.format,
                                                  httpStatus: httpStatus, error: error, detail: detail, raw: raw, fault: fault,
                                                  clientMessageID: context.clientMessageID))
            return
        }
        if let id = try? recordRejectedID(senderID: senderID, transport: .xmpp, format: context.format, httpStatus: httpStatus, error: error,
                                          detail: detail, raw: String(raw.prefix(4096)), fault: fault, clientMessageID: context.clientMessageID) {
            context.recorded(id)
        }
    }
}
