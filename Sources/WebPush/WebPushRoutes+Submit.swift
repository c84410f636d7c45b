import FCMCore
import FCMEngine
import FCMModel
import FCMStore
import HTTPServer

/// A push that passed every check, as the engine's send is made from it once its body is
/// decrypted: on the HTTP thread it came in on (no body, or a relayed one), or on the room's
/// pool, in its place among the pushes to its device (`WebPushPushOrder`).
struct PendingPush: Sendable {
    let routes: WebPushRoutes
    let device: Device
    let headers: WebPushHeaders
    let identity: VAPIDIdentity?
    let body: [UInt8]
    let relayed: Bool
    let origin: String
    let exchangeHeaders: String?
    let path: String
    /// A delay fault's: the answer waits this long.
    let delayMillis: Int64?
    let responder: HTTPResponder

    /// Submits the send; `commitNow` false leaves its writes for the HTTP thread's commit of its
    /// round (`afterBatch`). The answer goes to `responder` once the writes are committed.
    func submit(decrypted: Result<[UInt8], WebPushDecryptFailure>?, commitNow: Bool) {
        let req = WebPushRoutes.request(to: device, headers: headers, identity: identity, body: body, decrypted: decrypted,
                                        relayed: relayed)
        let (origin, ttl) = (origin, headers.ttl)
        let exchange = SendExchange(headers: exchangeHeaders) { result -> HTTPResponse in
            if let e = result.results.first?.error { return WebPushRoutes.response(WebPushRoutes.refusal(e)) }
            return WebPushRoutes.created(origin: origin, messageID: result.results.first?.messageID ?? result.recordID, ttl: ttl)
        }
        var submission = Submission(req, sender: device.senderID, transport: .webpush, faultKey: path)
        submission.exchange = exchange
        // Why a push the send refused was refused, in the words of the answer's message.
        submission.errorDetails = { WebPushRoutes.refusal($0).message }
        // The record's status: 200, as every accepted HTTP send's.
        submission.answeredStatus = 200
        submission.commitNow = commitNow
        if relayed { submission.relay = WebPushRoutes.relay(body, headers: headers) }
        // A body that would not decrypt is taken (201) and settles `undecryptable`.
        if !relayed, case .failure? = decrypted { submission.undecryptable = true }
        let (responder, delayMillis) = (responder, delayMillis)
        routes.engine.submit(submission) { outcome in
            switch outcome {
            case .failure: responder.send(WebPushRoutes.response(WebPushError.fault(status: 500, "the store failed")))
            case .success(let result):
                let answer = result.response as? HTTPResponse ?? WebPushRoutes.response(WebPushError.fault(status: 500, "the send made no answer"))
                if let delayMillis { responder.send(answer, afterMillis: Int(delayMillis)) } else { responder.send(answer) }
            }
        }
    }

    /// Submits the send from a pool thread, in the push's turn; its writes are committed with
    /// the round of the HTTP thread the request came in on (which then answers it), or here when
    /// that connection has ended meanwhile.
    func submitOffThread(decrypted: Result<[UInt8], WebPushDecryptFailure>?) {
        submit(decrypted: decrypted, commitNow: false)
        let engine = routes.engine
        responder.continueOnConnection { inBatch in
            if !inBatch { engine.commitQueued() }
        }
    }
}
