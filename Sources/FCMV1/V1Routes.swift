public import RoomKit
public import FCMEngine
public import FCMModel
import FCMCore
import FCMStore
public import HTTPServer

/// The HTTP v1 API (docs/spec/fcm-v1.md sections 1, 2 and 2b): `messages:send` and topic
/// subscriptions under `/v1/projects/{project}/`, answered in Google's JSON error shape
/// (`V1Error`). Headers the SDKs add (`X-GOOG-API-FORMAT-VERSION`, `X-Firebase-Client`,
/// `access_token_auth`) are accepted and ignored.
public struct V1Routes: Sendable {
    /// How v1 records show: the message's platform blocks, and the `name` it was answered with.
    public static let recordForm = RecordForm(showsBlocks: true, showsName: true)

    /// HTTP v1's FcmError names a fault may give for the FCM errors they stand for (fcm-v1.md's
    /// error table): a fault with `"when":{"transport":"http_v1"}` may say `UNAVAILABLE`.
    public static let faultErrors = FaultErrors(
        transport: Transport.httpV1.rawValue, kind: "an HTTP v1 FcmError", listName: "HTTP v1's FcmErrors", names: [],
        aliases: ["UNAVAILABLE": "Unavailable", "INTERNAL": "InternalServerError", "QUOTA_EXCEEDED": "DeviceMessageRateExceeded",
                  "UNREGISTERED": "NotRegistered", "SENDER_ID_MISMATCH": "MismatchSenderId",
                  "THIRD_PARTY_AUTH_ERROR": "InvalidApnsCredential", "INVALID_ARGUMENT": "InvalidRegistration"])
    let engine: Engine
    let credentials: GoogleCredentials
    let maxBodyBytes: Int

    public init(engine: Engine, credentials: GoogleCredentials, maxBodyBytes: Int) {
        self.engine = engine
        self.credentials = credentials
        self.maxBodyBytes = maxBodyBytes
    }

    // MARK: messages:send

    /// `POST /v1/projects/{project}/messages:send`.
    public func send(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        if let answer = sendUnlessSending(r, p, responder) { responder.send(answer) }
    }

    /// Answers at once, or returns nil after starting a send that answers `responder` when its
    /// rows are committed. In order: the method (405), the body's size (400), the credential and
    /// the project (401, 404, 403; recorded), then `Engine.admit` (faults, the parser's 400s),
    /// then the send.
    private func sendUnlessSending(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) -> HTTPResponse? {
        guard r.method == "POST" else {
            var answer = V1Error.methodNotAllowed(r.method, allowed: "POST").response
            answer.headers.append(("Allow", "POST"))
            return answer
        }
        if r.bodyTooLarge { return V1Error.bodyTooLarge(limit: maxBodyBytes).response }
        // Kept on records of refused sends only, so built only then.
        var raw: String { String(decoding: r.body.prefix(4096), as: UTF8.self) }
        let project: Project
        switch authorize(r, p) {
        case .success(let found): project = found
        case .failure(let e):
            // Recorded under the path's project when it exists; a refusal the store cannot
            // record is answered all the same (as a legacy 401 is).
            let sender = p["project"].flatMap { try? decode($0) }.flatMap { name in engine.project(named: name) }
            return engine.refused(RejectedRequest(senderID: sender?.senderID, transport: .httpV1, answeredStatus: e.code,
                                                  error: e.recordedError, detail: e.recordedDetail, raw: raw),
                                  answer: e.response, headers: RecordedExchange.headers(r))
        }
        // The parser checked the message's target by v1's rules; its refusals are v1's own.
        let outcome = V1Parser.parse(r.body)
        var byFID = false, request: SendRequest?, parserError: V1Error?, parserDetail = ""
        switch outcome {
        case .send(let s): (byFID, request) = (s.byFID, s.request)
        case .invalidArgument(let message, let violations):
            (parserError, parserDetail) = (.invalidArgument(message, violations), Self.detail(message, violations))
        case .invalidPayload(let message, let violations):
            (parserError, parserDetail) = (.invalidPayload(message, violations), Self.detail(message, violations))
        }
        let admission: Admission
        var recordID: Int64?
        var context = AdmissionContext(transport: .httpV1, path: r.path, format: .json, names: Self.refusalNames, raw: { raw })
        context.recorded = { recordID = $0 }
        do {
            admission = try engine.admit(request, parserError.map { _ in .invalidForTransport(parserDetail) },
                                         target: request?.target ?? .missing, senderID: project.senderID, context)
        } catch {
            return V1Error.internalError.response
        }
        // The record keeps the answer its sender got and the headers it sent.
        let headers = RecordedExchange.headers(r)
        // A local function, not a closure: nothing is allocated for the sends that never use it.
        func kept(_ answer: HTTPResponse) -> HTTPResponse { engine.keeping(answer, record: recordID, headers: headers) }
        switch admission {
        case .faulted(.status(let code, let retry, _)):
            return kept(V1Error.fault(status: code, retryAfter: retry).response)
        case .faulted:
            return .dropConnection
        case .refused(_, let delay):
            let answer = kept((parserError ?? .invalidArgument("", [])).response)
            guard let delay else { return answer }
            responder.send(answer, afterMillis: Int(delay.ms))
            return nil
        case .proceed(let req, let sender, let delay):
            let projectID = project.projectID, byFID = byFID
            let makeAnswer: @Sendable (SendResult) -> HTTPResponse = { Self.answer($0, req, projectID: projectID, byFID: byFID) }
            // The answer is made as the send is decided and kept with its record.
            var submission = Submission(req, sender: sender, transport: .httpV1, faultKey: r.path)
            submission.firedFault = delay?.fault
            submission.byInstallationID = byFID
            submission.body = r.body.prefix(4096)
            // The parser checked the token and the condition by v1's rules; v1 has no device groups.
            submission.targetRules = TargetRules(tokensChecked: true, groupsByToken: false, maxConditionOperators: Self.maxConditionOperators,
                                                 dryRunNeedsKnownToken: true)
            submission.namePrefix = "projects/" + projectID + "/messages/"
            submission.errorNames = Self.errorName
            submission.exchange = SendExchange(headers: headers, answer: makeAnswer)
            submission.answeredStatus = 200
            submission.commitNow = !r.inBatch
            engine.submit(submission) { outcome in
                let answer: HTTPResponse
                switch outcome {
                case .success(let result): answer = (result.response as? HTTPResponse) ?? makeAnswer(result)
                case .failure: answer = V1Error.internalError.response
                }
                if let ms = delay?.ms { responder.send(answer, afterMillis: Int(ms)) } else { responder.send(answer) }
            }
            return nil
        }
    }

    /// Most `&&`/`||` a v1 condition has: five topics, each named once.
    static let maxConditionOperators = 4

    /// An FCM error as v1's records and events name it: its FcmError code.
    @Sendable static func errorName(_ e: FCMErrorCode) -> String { V1Error(e).recordedError }

    /// How HTTP v1's records name what the engine refuses: a status fault by the `FcmError`
    /// code Google answers with it, a message its parser refused `INVALID_ARGUMENT`.
    static let refusalNames = RefusalNames(fault: { f in
        if case .status(let code, let retry, _) = f { return (V1Error.fault(status: code, retryAfter: retry).recordedError, f.detail) }
        return (RequestFault.closedConnection, f.detail)
    }, refusal: { _ in "INVALID_ARGUMENT" }, refusedStatus: 400)

    /// A refused message's detail on its record: Google's message and the fields at fault.
    static func detail(_ message: String, _ violations: [FieldViolation]) -> String {
        violations.isEmpty ? message : message + " (" + violations.map { "\($0.field): \($0.description)" }.joined(separator: "; ") + ")"
    }

    /// A send's answer: `{"name":"projects/{project_id}/messages/{id}"}` (a token send's id is
    /// its recipient's message id, a topic or condition send's the decimal number; a
    /// `validate_only` send's is `fake_message_id`), or the error of the one recipient or topic.
    static func answer(_ result: SendResult, _ req: SendRequest, projectID: String, byFID: Bool) -> HTTPResponse {
        let id: String
        if req.target.isTopicOrCondition {
            if let e = result.topicError { return V1Error(e).response }
            id = String(result.topicMessageID)
        } else {
            guard let first = result.results.first else { return V1Error(.missingRegistration).response }
            if let e = first.error { return V1Error(e, targetField: byFID ? "message.fid" : "message.token").response }
            id = first.messageID ?? ""
        }
        // The engine built the name once for the record.
        if let name = result.v1Name, !req.options.dryRun { return nameAnswer(name) }
        return nameAnswer("projects/\(projectID)/messages/" + (req.options.dryRun ? "fake_message_id" : id))
    }

    // MARK: Topic subscriptions

    /// `POST /v1/projects/{project}/registrations/{token}/topicSubscriptions?topic_name=T` (body
    /// `{}`): subscribes the device (a token or an fid); subscribing twice is 200 again.
    public func subscribe(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        responder.send(subscription(r, p, subscribe: true))
    }

    /// `DELETE /v1/projects/{project}/registrations/{token}/topicSubscriptions/{topic}`
    /// `[?allow_missing=true]`: unsubscribes it; a topic it does not have is 404 unless
    /// `allow_missing` is true.
    public func unsubscribe(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        responder.send(subscription(r, p, subscribe: false))
    }

    private func subscription(_ r: HTTPRequest, _ p: PathParams, subscribe: Bool) -> HTTPResponse {
        if r.bodyTooLarge { return V1Error.bodyTooLarge(limit: maxBodyBytes).response }
        let project: Project
        switch authorize(r, p) {
        case .success(let found): project = found
        case .failure(let e): return e.response
        }
        guard let args = try? p.decoded() else { return V1Error.notFound.response }
        let query = try? Query(r.rawQuery)
        let field = subscribe ? "topic_name" : "topic"
        let given = subscribe ? query?["topic_name"] ?? "" : args["topic"]
        let topic = Topics.name(given)
        guard Topics.isValidName(topic) else {
            let text = "Topic name format is invalid"
            return V1Error.invalidArgument(text, [FieldViolation(field: field, description: "\(text): '\(given)'")]).response
        }
        if subscribe, !r.body.isEmpty, (try? JSONParser.parse(r.body))?.objectValue == nil {
            return V1Error.invalidPayload("Invalid JSON payload received. The body must be a TopicSubscription object such as {}.", []).response
        }
        let token = args["token"]
        let outcome: V1SubscriptionOutcome
        do {
            outcome = try engine.v1Subscription(token, topic: topic, subscribe: subscribe, senderID: project.senderID)
        } catch {
            return V1Error.internalError.response
        }
        switch outcome {
        case .ok:
            guard subscribe else { return HTTPResponse(status: 200, contentType: ContentType.json, body: "{}") }
            return Self.nameAnswer("projects/\(project.projectID)/registrations/\(token)/topicSubscriptions/\(topic)")
        case .notSubscribed:
            if query?["allow_missing"]?.lowercased() == "true" {
                return HTTPResponse(status: 200, contentType: ContentType.json, body: "{}")
            }
            return V1Error.notFound.response
        case .unregistered: return V1Error(.notRegistered).response
        case .senderMismatch: return V1Error(.mismatchSenderId).response
        case .tooManyTopics:
            return V1Error.quotaExceeded("The device is subscribed to \(Subscription.maxTopicsPerDevice) topics, the most it may have.").response
        }
    }

    // MARK: Shared

    /// Any other path under `/v1/`, or a method its path does not take.
    public func notFound(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        responder.send(V1Error.notFound.response)
    }

    /// The credential and the project the path names (see `GoogleCredentials.v1Project`); a refusal is
    /// logged with why (its answer is Google's one text for many causes).
    private func authorize(_ r: HTTPRequest, _ p: PathParams) -> Result<Project, V1Error> {
        guard let name = p["project"], let project = try? decode(name) else { return .failure(.notFound) }
        let result = credentials.v1Project(authorization: r.header("authorization"), project: project).mapError(V1Error.init)
        if case .failure(let e) = result {
            engine.notice("v1 request refused", [("http.path", r.path), ("status", String(e.code)), ("error", e.recordedError),
                                                 ("reason", e.recordedDetail), ("auth", Log.maskCredential(r.header("authorization")))])
        }
        return result
    }

    /// `{"name":"…"}`.
    static func nameAnswer(_ name: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key(literal: "name"); w.value(name)
        w.endObject()
        return HTTPResponse(status: 200, headers: ContentType.jsonHeaders, body: w.bytes)
    }
}
