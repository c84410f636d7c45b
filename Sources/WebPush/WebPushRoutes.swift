public import RoomKit
import FCMCore
public import FCMEngine
public import FCMModel
public import HTTPServer
import Platform
import TLS

/// The Web Push protocol (docs/spec/webpush.md, RFC 8030/8291/8292): `POST /wp/{id}` (and
/// `/fcm/send/{id}`, older Chrome endpoints) on every port and HTTP version, `DELETE /m/{id}`.
/// Refusals answer autopush's `{"code","errno","error","message"}`. Checks run in this order:
/// the subscription (404, 410), the method (405), the body's size (413), the headers (400),
/// VAPID (401, 403), faults; then the body is decrypted with the subscription's keys and the
/// push goes through the engine's send path as `transport: "webpush"`: 201 with `Location` and
/// `TTL`, also when the body does not decrypt (its delivery settles `undecryptable`).
public struct WebPushRoutes: Sendable {
    /// How Web Push records show: their `webpush` block (headers, VAPID, plaintext), also on the
    /// device's inbox entries.
    public static let recordForm = RecordForm(showsBlocks: true, inboxBlock: "webpush")
    let engine: Engine
    /// VAPID tokens verified, and subscriptions' private keys parsed: what pushes reuse.
    let vapid: VAPID
    let decryption = WebPushDecryption()
    /// Threads of the room's own, as many as the cores the process may use, that decrypt
    /// bodies off the HTTP threads; and the order pushes to each device are submitted in.
    let pool = WorkerPool(threads: HTTPServer.availableCores)
    let order = WebPushPushOrder()
    /// Which pushes are decrypted on `pool`: those over HTTP/2 (one thread per connection, so one
    /// busy connection would otherwise hold every push to a single core); `FCM_MOCK_WEBPUSH_HANDOFF=all`
    /// hands off those over HTTP/1.1 too (measured slower on loops as many as the cores).
    let handOff = WebPushHandOff(environment: SystemIO.environment()["FCM_MOCK_WEBPUSH_HANDOFF"])
    /// FCM registrations' pushes over a fake web device's subscription, taken there as pushes.
    let relays: FakeSubscriptionRelay

    public init(engine: Engine, log: Log) {
        self.engine = engine
        vapid = VAPID(clock: engine.clock)
        relays = FakeSubscriptionRelay(engine: engine, decryption: decryption, log: log)
        // FCM registrations' pushes go over a subscription encrypted as Google does (`aesgcm`, a
        // fresh key and salt each); the engine asks this room, which owns Web Push's crypto.
        engine.setRelayEncryption(name: "aesgcm") { plaintext, p256dh, auth in
            guard let receiver = try? P256PublicKey(rawPoint: p256dh), let sender = try? P256PrivateKey(),
                  let salt = try? randomBytes(16),
                  let sealed = try? WebPushCrypto.encrypt(aesgcm: plaintext, to: receiver, authSecret: auth, senderKey: sender, salt: salt)
            else { return nil }
            return (sealed.body, salt, sender.publicKey.rawPoint)
        }
    }

    /// `POST /wp/{id}`, `POST /fcm/send/{id}`.
    public func push(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        if let answer = answer(r, id: p["id"].map(String.init) ?? "", responder) { responder.send(answer) }
    }

    /// Answers at once, or returns nil after starting a send that answers `responder` once its
    /// rows are committed.
    func answer(_ r: HTTPRequest, id: String, _ responder: HTTPResponder) -> HTTPResponse? {
        let origin = Self.origin(r)
        let device: Device, sub: WebPushSubscription
        switch engine.webPushTarget(id) {
        case .unknown:
            return recorded(WebPushError(.unknownSubscription, "no subscription has this endpoint"), r, senderID: nil)
        case .gone(let why, let sender):
            return recorded(Self.gone(why), r, senderID: sender)
        case .active(let d, let s):
            (device, sub) = (d, s)
        }
        do throws(WebPushError) {
            guard r.method == "POST" else {
                throw WebPushError(.methodNotAllowed, "\(r.method) on a push endpoint: it takes POST only")
            }
            try WebPushHeaders.checkSize(r.body.count, overServerLimit: r.bodyTooLarge)
            let headers = try WebPushHeaders.parse(r.headers, bodyBytes: r.body.count)
            let credential = try VAPIDCredential.parse(authorization: headers.authorization, cryptoKey: headers.cryptoKey)
            let identity = try vapid.authorize(credential, audience: origin, subscription: sub)
            let fault = engine.requestFault(transport: .webpush, path: r.path, senderID: device.senderID, tokens: [device.token], topic: nil)
            if let f = fault, f.isAnswered { return answer(f, r, device: device) }
            let delayMillis: Int64? = if case .delay(let ms, _)? = fault { ms } else { nil }
            // What the send needs once the body is decrypted (or at once, without one).
            let push = PendingPush(routes: self, device: device, headers: headers, identity: identity, body: r.body,
                                   relayed: sub.isRelayed, origin: origin, exchangeHeaders: RecordedExchange.headers(r),
                                   path: r.path, delayMillis: delayMillis, responder: responder)
            let key = device.token
            guard !sub.isRelayed, let encoding = headers.encoding else {
                // A real browser's subscription (its keys are the browser's, the body goes to it
                // unread), or no body: nothing to decrypt, sent on this thread, unless pushes to the
                // same device are still being decrypted: then behind them.
                if order.isBusy(key) {
                    let place = order.take(key)
                    pool.run { [order] in order.finish(key, place) { push.submitOffThread(decrypted: nil) } }
                } else {
                    push.submit(decrypted: nil, commitNow: !r.inBatch)
                }
                return nil
            }
            let encrypted = WebPushBody(encoding: encoding, bytes: r.body, encryption: headers.encryption, cryptoKey: headers.cryptoKey)
            if !handOff.takes(r), !order.isBusy(key) {
                // An HTTP/1.1 loop: there are as many as cores, so decrypting here already spreads
                // over them, and a hand-off would only add switches (docs/performance.md).
                push.submit(decrypted: decryption.decrypt(encrypted, for: sub), commitNow: !r.inBatch)
                return nil
            }
            // The ECDH, HKDF and AES-GCM (about 70 µs) on the pool; the push keeps its place
            // among the pushes to its device (docs/performance.md, "Web Push off the HTTP threads").
            let place = order.take(key)
            pool.run { [order, decryption] in
                let decrypted = decryption.decrypt(encrypted, for: sub)
                order.finish(key, place) { push.submitOffThread(decrypted: decrypted) }
            }
            return nil
        } catch {
            return recorded(error, r, senderID: device.senderID)
        }
    }

    /// The push service's 410 for a subscription that takes no more pushes.
    static func gone(_ why: WebPushGone) -> WebPushError {
        switch why {
        case .deviceDeleted: WebPushError(.unregistered, "the subscription's device was deleted")
        case .ended: WebPushError(.expiredSubscription, "the subscription was ended (the user revoked the permission)")
        case .device(let state): WebPushError(.unregistered, "the subscription's device is \(state.rawValue)")
        }
    }

    /// `DELETE /m/{message-id}`: removes a message not yet delivered (RFC 8030 §6.2): 204; 404
    /// when none is held under that id. Other methods: 405.
    public func message(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        guard r.method == "DELETE" else {
            return responder.send(Self.response(WebPushError(.methodNotAllowed, "\(r.method) on a message: it takes DELETE only"),
                                                allow: Self.messageMethods))
        }
        guard let text = FormBody.percentDecode((p["id"] ?? "").utf8, plusIsSpace: false), let id = MessageID(text) else {
            return responder.send(Self.response(WebPushError(.messageNotFound, "no message has this id")))
        }
        do {
            // RFC 8030 section 6.2: only a push this endpoint took, under its whole id; an FCM or
            // APNs message the same device holds is not its to delete.
            if try engine.withdrawHeld(id, sentThrough: .webpush) {
                responder.send(HTTPResponse(status: 204))
            } else {
                responder.send(Self.response(WebPushError(.messageNotFound, "no message is held under this id (delivered, expired or unknown)")))
            }
        } catch {
            responder.send(Self.response(WebPushError.fault(status: 500, "the store failed")))
        }
    }

    /// The answer to a request fault that answers a push to `device` (`when.transport: "webpush"`
    /// or any): a status in the push service's shape (`Retry-After` kept), a dropped connection
    /// nothing; both recorded as refused with the fault.
    func answer(_ f: RequestFault, _ r: HTTPRequest, device: Device) -> HTTPResponse {
        let status: Int, answer: HTTPResponse
        switch f {
        case .status(let code, let retry, _):
            var a = Self.response(WebPushError.fault(status: code, f.detail))
            if let retry { a.headers.append(("Retry-After", String(retry))) }
            (status, answer) = (code, a)
        default:
            // A dropped connection (an APNs reason never matches a push).
            (status, answer) = (0, .dropConnection)
        }
        let refused = RejectedRequest(senderID: device.senderID, transport: .webpush, answeredStatus: status,
                                      error: status == 0 ? RequestFault.closedConnection : WebPushErrorKind.fault.rawValue,
                                      detail: f.detail, fault: f.fault, target: ("token", device.token))
        return engine.refused(refused, answer: answer, headers: RecordedExchange.headers(r))
    }

    /// The answer to a refused push, kept on a record of its own (`status: "rejected"`, the
    /// refusal's kind as `error`, its message as `error_detail`) under the subscription's project
    /// when there is one. A refusal the store cannot record is answered all the same.
    func recorded(_ e: WebPushError, _ r: HTTPRequest, senderID: String?) -> HTTPResponse {
        engine.refused(RejectedRequest(senderID: senderID, transport: .webpush, answeredStatus: e.status, error: e.kind.rawValue,
                                       detail: e.message),
                       answer: Self.response(e), headers: RecordedExchange.headers(r))
    }

    /// The engine's send of a push to `device`: the headers kept (`TTL` as kept, `Urgency` as
    /// recorded, `Topic` when sent), the VAPID identity, the coding, the ciphertext's size and the
    /// plaintext (text when UTF-8, else base64url) or why it does not decrypt (and the ciphertext
    /// itself, base64url), as a `webpush`
    /// block, so the web delivery rules read `TTL` and `Topic` from it as they do for an FCM
    /// send's webpush block. A plaintext that is a JSON object with `title` or `body` is also its
    /// `notification` (the page's browser-notification preview).
    /// `relayed`: for a real browser, which holds the keys: the block says so and keeps the
    /// ciphertext (and an `aesgcm` body's `Encryption` and `Crypto-Key`); only the browser can
    /// say whether it decrypts.
    static func request(to device: Device, headers: WebPushHeaders, identity: VAPIDIdentity?, body: [UInt8],
                        decrypted: Result<[UInt8], WebPushDecryptFailure>?, relayed: Bool = false) -> SendRequest {
        var req = SendRequest(format: .json, target: .token(device.token))
        req.options.timeToLive = headers.ttl
        req.options.collapseKey = headers.topic
        req.options.priority = headers.urgency == .high ? .high : .normal
        var h = JSONObject()
        h["TTL"] = .string(String(headers.ttl))
        h["Urgency"] = .string(headers.urgency.rawValue)
        if let topic = headers.topic { h["Topic"] = .string(topic) }
        var block = JSONObject([("headers", .object(h))])
        if let identity {
            block["vapid"] = .object(JSONObject([("subject", .string(identity.subject)), ("key", .string(identity.key)),
                                                 ("scheme", .string(identity.scheme.rawValue))]))
        } else {
            block["vapid"] = .null
        }
        block["content_encoding"] = headers.encoding.map { .string($0.rawValue) } ?? .null
        block["ciphertext_bytes"] = .number(JSONNumber(Int64(body.count)))
        if relayed {
            block["relayed"] = .bool(true)
            block["plaintext"] = .null
            block["decrypt_error"] = .null
            block["ciphertext_base64"] = .string(base64URLEncode(body))
            if headers.encoding == .aesgcm {
                block["encryption"] = headers.encryption.map { .string($0) } ?? .null
                block["crypto_key"] = headers.cryptoKey.map { .string($0) } ?? .null
            }
            req.platforms = PlatformConfigs(webpush: block)
            return req
        }
        switch decrypted {
        case .success(let plain)?:
            if let text = String(validating: plain, as: UTF8.self) {
                block["plaintext"] = .string(text)
                if let o = try? JSONParser.parse(plain).objectValue, o["title"] != nil || o["body"] != nil {
                    block["notification"] = .object(o)
                }
            } else {
                block["plaintext"] = .null
                block["plaintext_base64"] = .string(base64URLEncode(plain))
            }
            block["decrypt_error"] = .null
        case .failure(let f)?:
            block["plaintext"] = .null
            block["decrypt_error"] = .string(f.reason)
            // What would not decrypt, kept to be taken apart (a decrypted body keeps its size only).
            block["ciphertext_base64"] = .string(base64URLEncode(body))
        case nil:
            // No body: a push with nothing to decrypt (the service worker gets a null `data`).
            block["plaintext"] = .null
            block["decrypt_error"] = .null
        }
        req.platforms = PlatformConfigs(webpush: block)
        return req
    }

    /// What a browser's connection is sent for a relayed push: the body and its coding, as the
    /// sender sent them (the client room writes them in its protocol's form).
    static func relay(_ body: [UInt8], headers: WebPushHeaders) -> ClientPayload {
        var fields: [(String, String)] = []
        if let encoding = headers.encoding { fields.append(("encoding", encoding.rawValue)) }
        if headers.encoding == .aesgcm {
            if let e = headers.encryption { fields.append(("encryption", e)) }
            if let k = headers.cryptoKey { fields.append(("crypto_key", k)) }
        }
        return ClientPayload(body: body.isEmpty ? nil : body, fields: fields)
    }

    /// The push service's answer to a recipient the engine's send refused.
    static func refusal(_ e: FCMErrorCode) -> WebPushError {
        switch e {
        case .notRegistered: return WebPushError(.unregistered, "the subscription's device is no longer registered")
        case .deviceMessageRateExceeded: return WebPushError.fault(status: 429, "over the per-device rate (--device-rate)")
        case .unavailable: return WebPushError.fault(status: 503, "the push service is unavailable (a fault)")
        default: return WebPushError.fault(status: 500, "the push failed: \(e.rawValue)")
        }
    }

    /// The origin a request came in on: the scheme of its connection and its `Host` (HTTP/2's
    /// `:authority`). VAPID's `aud` must be it, and `Location` points at it.
    static func origin(_ r: HTTPRequest) -> String {
        (r.isSecure ? "https://" : "http://") + (r.header("host") ?? "127.0.0.1")
    }

    /// 201 Created: `Location: {origin}/m/{message-id}` (the id's `%` written `%25`, so the
    /// URL means the id) and the `TTL` kept.
    static func created(origin: String, messageID: String, ttl: Int64) -> HTTPResponse {
        HTTPResponse(status: 201, headers: [("Location", origin + "/m/" + messageID.replacingPercent()), ("TTL", String(ttl))])
    }

    /// The methods a push endpoint takes, as a 405 names them in `Allow`.
    static let pushMethods = "POST"
    /// The methods a message's `Location` (`/m/{id}`) takes.
    static let messageMethods = "DELETE"

    /// A refusal: its status and exactly autopush's JSON body; a 405 (the method, or a fault's
    /// status) also says in `Allow` what the path takes (`allow`: a push endpoint's unless said),
    /// as RFC 9110 §15.5.6 requires.
    static func response(_ e: WebPushError, allow: String = pushMethods) -> HTTPResponse {
        var answer = HTTPResponse(status: e.status, contentType: "application/json", body: e.body)
        if e.status == 405 { answer.headers.append(("Allow", allow)) }
        return answer
    }
}

extension String {
    /// With every `%` written `%25`.
    fileprivate func replacingPercent() -> String {
        guard contains("%") else { return self }
        return split(separator: "%", omittingEmptySubsequences: false).joined(separator: "%25")
    }
}
