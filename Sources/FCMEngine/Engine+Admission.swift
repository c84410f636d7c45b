import Platform
public import FCMModel
public import FCMCore
public import FCMStore

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

extension Engine {
    /// Authentication, validation of the request and its target, the request-wide faults, and
    /// the record of a refusal, in the order the transport's protocol has them: over HTTP a
    /// fault comes before the body is judged (FCM being unavailable does not depend on what a
    /// request says) and a refused body still waits out a delay fault; over XMPP a malformed
    /// message is nacked before any fault is consulted.
    ///
    /// A rejection record the store cannot write fails the request (its room answers that the
    /// store failed) unless the context says the refusal goes out all the same (an XMPP
    /// message's nack); a refused credential is answered whatever the store says.
    public func admit(_ outcome: SendParseOutcome, senderID: String, _ context: AdmissionContext) throws(StoreError) -> Admission {
        var request: SendRequest?
        var refusal: Admission.Refusal?
        switch outcome {
        case .badRequest(let reason): refusal = .invalidJSON(reason)
        case .invalidParameters(let detail): refusal = .invalidParameters(detail)
        case .request(let r):
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
            try record(context, senderID: senderID, answeredStatus: context.names.recordedStatus, error: context.names.refusal(refusal),
                       detail: refusal.detail, fault: nil, target: target)
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
            try record(context, senderID: senderID, answeredStatus: status, error: error, detail: detail, fault: f.fault, target: target)
            return .faulted(f)
        default:
            break
        }
        if let refusal {
            try record(context, senderID: senderID, answeredStatus: context.names.recordedStatus, error: context.names.refusal(refusal),
                       detail: refusal.detail,
                       fault: delay?.fault, target: target)
            return .refused(refusal, delay: delay)
        }
        guard let request else { preconditionFailure("a request without a refusal parsed") }
        return .proceed(request, senderID: senderID, delay: delay)
    }

    /// The rejection record of a refused request, with the target it named when one was read
    /// (so `?token=` and `?topic=` find a send a fault answered).
    private func record(_ context: AdmissionContext, senderID: String, answeredStatus: Int, error: String, detail: String,
                        fault: String?, target: SendTarget) throws(StoreError) {
        let raw = context.rawLimit.map { String(context.raw().prefix($0)) } ?? context.raw()
        let named = target.value.map { (kind: target.kind, value: $0) }
        do throws(StoreError) {
            context.recorded(try recordRejected(RejectedRequest(senderID: senderID, transport: context.transport, format: context.format,
                                                                answeredStatus: answeredStatus, error: error, detail: detail, raw: raw,
                                                                fault: fault, clientMessageID: context.clientMessageID,
                                                                target: named)))
        } catch {
            if !context.recordIsBestEffort { throw error }
        }
    }
}
