public import RoomKit
public import FCMEngine
import FCMModel
import FCMCore
import FCMStore
public import HTTPServer

/// `{"error": message}` with `status`: how the group and Instance ID paths refuse a request.
func jsonError(_ status: Int, _ message: String) -> HTTPResponse {
    var w = JSONWriter()
    w.beginObject()
    w.key("error"); w.value(message)
    w.endObject()
    return HTTPResponse(status: status, contentType: ContentType.json, body: w.string)
}

/// The 413 of the group and Instance ID paths (the send path names its limit).
let bodyTooLargeResponse = HTTPResponse(status: 413, contentType: ContentType.text, body: "Request body too large\n")

/// The 401 page Google's front end served (docs/spec/fcm-legacy.md section 1).
let unauthorizedHTML = """
    <HTML>
    <HEAD>
    <TITLE>Unauthorized</TITLE>
    </HEAD>
    <BODY BGCOLOR="#FFFFFF" TEXT="#000000">
    <H1>Unauthorized</H1>
    <H2>Error 401</H2>
    </BODY>
    </HTML>

    """

/// `POST /fcm/send` and `/gcm/send`: the legacy HTTP protocol.
public struct FCMSendRoute: Sendable {
    let engine: Engine
    let credentials: GoogleCredentials
    let maxBodyBytes: Int

    public init(engine: Engine, credentials: GoogleCredentials, maxBodyBytes: Int) {
        self.engine = engine
        self.credentials = credentials
        self.maxBodyBytes = maxBodyBytes
    }

    public func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        if let answer = handleUnlessSending(r, responder) { responder.send(answer) }
    }

    /// Answers at once, or returns nil after starting a send that answers `responder` when
    /// its rows are committed.
    private func handleUnlessSending(_ r: HTTPRequest, _ responder: HTTPResponder) -> HTTPResponse? {
        guard r.method == "POST" else {
            return .postOnly
        }
        if r.bodyTooLarge {
            return HTTPResponse(status: 413, contentType: ContentType.text,
                                body: "Request body larger than \(maxBodyBytes) bytes\n")
        }
        let isJSON = Self.isJSON(r.header("content-type"))
        let format: BodyFormat = isJSON ? .json : .plain
        let outcome = isJSON ? SendParser.parseJSON(r.body) : SendParser.parsePlain(r.body)
        // Kept on records of refused sends only, so built only then.
        var raw: String { String(decoding: r.body.prefix(4096), as: UTF8.self) }

        // A Bearer token counts only with `access_token_auth: true`, as a header (what
        // firebase-admin sends) or in the JSON body. Then any token counts (fcm-legacy.md:
        // "Bearer <anything>"): a valid credential for its own project, any other for the first.
        var inBody = false
        if case .request(let req) = outcome { inBody = req.accessTokenAuth }
        // The record keeps the answer its sender got and the headers it sent.
        let headers = RecordedExchange.headers(r)
        guard let sender = credentials.senderID(authorization: r.header("authorization"), bearerAllowed: r.accessTokenAuth || inBody,
                                                   anyBearer: true) else {
            // Recorded when the store can; answered all the same.
            return engine.refused(RejectedRequest(senderID: nil, transport: .http, format: format, answeredStatus: 401,
                                                  error: "Unauthorized", detail: "missing or unknown server key", raw: raw),
                                  answer: HTTPResponse(status: 401, contentType: ContentType.html, body: unauthorizedHTML), headers: headers)
        }
        let admission: Admission
        var recordID: Int64?
        var context = AdmissionContext(transport: .http, path: r.path, format: format, names: Self.refusalNames, raw: { raw })
        context.recorded = { recordID = $0 }
        if case .request(let request) = outcome, request.messageError == .invalidParameters, format == .plain {
            // The plain-text answer (`Error=InvalidParameters`, status 400) cannot say that the
            // body was JSON sent without its Content-Type; the log can.
            let looksJSON = raw.first { $0 != " " && $0 != "\n" && $0 != "\r" && $0 != "\t" } == "{"
            engine.notice("send answered Error=InvalidParameters", [
                ("http.path", r.path), ("error_detail", request.messageErrorDetail ?? ""),
                ("hint", looksJSON ? "the body is JSON but was read as a form: add the header Content-Type: application/json"
                                   : "the body was read as a form (no Content-Type: application/json)"),
            ])
        }
        do {
            admission = try engine.admit(outcome, senderID: sender, context)
        } catch {
            return HTTPResponse(status: 500, contentType: ContentType.text, body: "Internal Server Error\n")
        }
        // A local function, not a closure: nothing is allocated for the sends that never use it.
        func kept(_ answer: HTTPResponse) -> HTTPResponse { engine.keeping(answer, record: recordID, headers: headers) }
        switch admission {
        case .faulted(.status(let code, let retry, _)):
            return kept(Self.faultStatus(code, retryAfter: retry))
        case .faulted:
            return .dropConnection
        case .refused(let refusal, let delay):
            // A refused request is answered like any other: after a delay fault's delay.
            let answer: HTTPResponse
            if case .invalidParameters(let detail) = refusal {
                var w = JSONWriter()
                w.beginObject()
                w.key("error"); w.value(FCMErrorCode.invalidParameters.rawValue)
                w.key("error_description"); w.value(detail)
                w.endObject()
                answer = HTTPResponse(status: 400, contentType: ContentType.json, body: w.string)
            } else {
                answer = HTTPResponse(status: 400, contentType: ContentType.text, body: refusal.detail + "\n")
            }
            _ = kept(answer)
            guard let delay else { return answer }
            send(answer, to: responder, after: delay.ms)
            return nil
        case .proceed(let req, let sender, let delay):
            let isTopicSend = req.target.isTopicOrCondition
            let lateMs = delay?.ms
            let makeAnswer: @Sendable (SendResult) -> HTTPResponse = { result in
                if result.group != nil {
                    return isJSON ? Self.groupResponse(result) : Self.plainGroupResponse(result)
                }
                return isTopicSend ? Self.topicResponse(result) : isJSON ? Self.jsonResponse(result) : Self.plainResponse(result)
            }
            // The answer is made as the send is decided and kept with its record.
            // An HTTP/2 read's sends are committed together, after the read (`afterBatch`).
            var submission = Submission(req, sender: sender, transport: .http, faultKey: r.path)
            submission.firedFault = delay?.fault
            submission.body = r.body.prefix(4096)
            submission.exchange = SendExchange(headers: headers, answer: makeAnswer)
            submission.answeredStatus = 200
            submission.commitNow = !r.inBatch
            engine.submit(submission) { outcome in
                let answer: HTTPResponse
                switch outcome {
                case .success(let result): answer = (result.response as? HTTPResponse) ?? makeAnswer(result)
                case .failure: answer = HTTPResponse(status: 500, contentType: ContentType.text, body: "Internal Server Error\n")
                }
                send(answer, to: responder, after: lateMs)
            }
            return nil
        }
    }

    /// How the legacy protocol's records name what the engine refuses: a status fault `Fault`,
    /// a body refused `InvalidParameters` (an unknown parameter) or `InvalidJson`.
    static let refusalNames = RefusalNames(fault: { f in
        if case .drop = f { return (RequestFault.closedConnection, f.detail) }
        return ("Fault", f.detail)
    }, refusal: { refusal in
        if case .invalidParameters = refusal { return FCMErrorCode.invalidParameters.rawValue }
        return "InvalidJson"
    }, refusedStatus: 400)

    static func statusText(_ code: Int) -> String {
        switch code {
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 429: return "Too Many Requests"
        default: return "Error \(code)"
        }
    }

    /// A status fault's answer: the status's reason in plain text; "Unavailable" always says when
    /// to come back (fcm-legacy.md §1), 10 s unless the fault says.
    static func faultStatus(_ code: Int, retryAfter retry: Int64?) -> HTTPResponse {
        var answer = HTTPResponse(status: code, contentType: ContentType.text, body: statusText(code) + "\n")
        if let retry = retry ?? (code == 503 ? unavailableRetryAfter : nil) { answer.headers.append(("Retry-After", String(retry))) }
        return answer
    }

    /// Sends `answer`, `ms` later when a delay fault fired.
    func send(_ answer: HTTPResponse, to responder: HTTPResponder, after ms: Int64?) {
        guard let ms else { return responder.send(answer) }
        responder.send(answer, afterMillis: Int(ms))
    }

    /// Whether the media type is `application/json` (any case, parameters such as charset ignored).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let ct = contentType else { return false }
        // `application/json`, any case, with optional blanks around it and parameters after `;`.
        // Bytes, as HTTP defines header values (a `;` followed by a combining mark still ends the
        // media type).
        var bytes = ct.utf8[...]
        while let b = bytes.first, b == 32 || b == 9 { bytes = bytes.dropFirst() }
        guard hasPrefixIgnoringCase(bytes, "application/json") else { return false }
        for b in bytes.dropFirst(16) {
            if b == 59 { return true }
            if b != 32 && b != 9 { return false }
        }
        return true
    }

    /// Seeds Table 5: `multicast_id`, counts and one result per recipient in request order.
    static func jsonResponse(_ result: SendResult) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key(literal: "multicast_id"); w.value(result.multicastID)
        w.key(literal: "success"); w.value(result.success)
        w.key(literal: "failure"); w.value(result.failure)
        w.key(literal: "canonical_ids"); w.value(result.canonicalIDs)
        w.key(literal: "results"); w.beginArray()
        for r in result.results {
            w.beginObject()
            if let e = r.error {
                w.key(literal: "error"); w.value(e.rawValue)
            } else {
                w.key(literal: "message_id"); w.value(r.messageID)
                if let c = r.canonicalToken { w.key(literal: "registration_id"); w.value(c) }
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return HTTPResponse(status: 200, headers: ContentType.jsonHeaders, body: w.bytes)
    }

    /// Seeds Table 6: `{"message_id":N}` (a number) or `{"error":"…"}` for topic and condition sends.
    static func topicResponse(_ result: SendResult) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        if let e = result.topicError {
            w.key(literal: "error"); w.value(e.rawValue)
        } else {
            w.key(literal: "message_id"); w.value(result.topicMessageID)
        }
        w.endObject()
        return HTTPResponse(status: 200, headers: ContentType.jsonHeaders, body: w.bytes)
    }

    /// A device-group send: `{"success":N,"failure":M}` and `failed_registration_ids` when M > 0.
    static func groupResponse(_ result: SendResult) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        if let e = result.topicError {
            w.key(literal: "error"); w.value(e.rawValue)
        } else if let g = result.group {
            w.key(literal: "success"); w.value(g.success)
            w.key(literal: "failure"); w.value(g.failedTokens.count)
            if !g.failedTokens.isEmpty {
                w.key(literal: "failed_registration_ids"); w.beginArray()
                for t in g.failedTokens { w.value(t) }
                w.endArray()
            }
        }
        w.endObject()
        return HTTPResponse(status: 200, headers: ContentType.jsonHeaders, body: w.bytes)
    }

    /// A plain-text send to a notification key answers in the plain-text form too: the message
    /// id when a member was reached, else the error (`NotRegistered`: no member can receive it).
    static func plainGroupResponse(_ result: SendResult) -> HTTPResponse {
        let body: String
        if let e = result.topicError {
            body = "Error=\(e.rawValue)\n"
        } else if let g = result.group, g.success > 0 {
            body = "id=\(result.recordID)\n"
        } else {
            body = "Error=\(FCMErrorCode.notRegistered.rawValue)\n"
        }
        return HTTPResponse(status: 200, contentType: ContentType.text, body: body)
    }

    /// Seeds Tables 7 and 8: `id=…` (plus `registration_id=…`) or `Error=…`; errors that mean
    /// "retry later" become HTTP 500/503, since the plain format cannot say so in its body.
    /// Seconds a 503 asks the sender to wait when nothing says otherwise (as HTTP v1's).
    static let unavailableRetryAfter: Int64 = 10

    static func plainResponse(_ result: SendResult) -> HTTPResponse {
        guard let r = result.results.first else {
            return HTTPResponse(status: 200, contentType: ContentType.text, body: "Error=MissingRegistration\n")
        }
        if let e = r.error {
            if let status = e.plainTextStatus {
                var answer = HTTPResponse(status: status, contentType: ContentType.text,
                                          body: status == 503 ? "Service Unavailable\n" : "Internal Server Error\n")
                if status == 503 { answer.headers.append(("Retry-After", String(unavailableRetryAfter))) }
                return answer
            }
            // InvalidParameters is "400 + error" (the seeds' Table 9): a bad parameter, not a
            // recipient's failure.
            return HTTPResponse(status: e == .invalidParameters ? 400 : 200, contentType: ContentType.text, body: "Error=\(e.rawValue)\n")
        }
        var body = "id=\(r.messageID ?? "")\n"
        if let c = r.canonicalToken { body += "registration_id=\(c)\n" }
        return HTTPResponse(status: 200, contentType: ContentType.text, body: body)
    }
}
