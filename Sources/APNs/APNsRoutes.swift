import RoomKit
public import FCMCore
public import FCMEngine
import FCMModel
public import HTTPServer
import Platform

/// Apple's APNs provider API (docs/spec/apns.md, docs/apns.md): `POST /3/device/{token}` over
/// HTTP/2, answered in Apple's shape (`{"reason":…}` with the reason's status, `apns-id` echoed
/// or made). Checks run in the contract's order: path, method, authentication (provider token or
/// client certificate), headers, device token, topic against the key's team or the certificate,
/// topic against the device (its environment and app; an unknown token is refused here unless it
/// can be registered), body, size, the device's state. A device is registered for an unknown
/// token only once the send passed its body and size.
public struct APNsRoutes: Sendable {
    let engine: Engine
    /// `--apns-environment`: the environment of a request to a host that is not Apple's.
    let environment: APNsEnvironment
    /// Client certificates and what authorizes a request.
    let certificates: APNsCertificateAuth

    static let devicePrefix = "/3/device/"

    /// A new random UUID (version 4), lowercase, as APNs generates `apns-id`.
    static func newUUID() -> String { uuidString(high: RandomBits.next(), low: RandomBits.next()) }

    public init(engine: Engine, environment: APNsEnvironment, certificates: APNsCertificateAuth) {
        self.engine = engine
        self.environment = environment
        self.certificates = certificates
    }

    /// Everything under `/3/`.
    public func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        if let answer = answer(r, responder) { responder.send(answer) }
    }

    /// Answers at once, or returns nil after starting a send that answers `responder` once its
    /// rows are committed.
    func answer(_ r: HTTPRequest, _ responder: HTTPResponder) -> HTTPResponse? {
        guard r.isHTTP2 else {
            return HTTPResponse(status: 505, contentType: ContentType.text,
                                body: "APNs speaks HTTP/2 only: send this request over HTTP/2 (h2, or h2c with prior knowledge)\n")
        }
        // The request's id, echoed as Apple does ("the apns-id value from the request"), a
        // malformed one too (refused `BadMessageId`); a new one when there is none.
        let apnsID = r.header("apns-id") ?? Self.newUUID()
        let token: String
        do throws(APNsError) {
            token = try Self.deviceToken(path: r.path)
            guard r.method == "POST" else {
                throw APNsError(.methodNotAllowed, "\(r.method) on \(r.path): the device path takes POST only")
            }
        } catch {
            return Self.response(error, apnsID: apnsID)
        }
        do throws(APNsError) {
            let env = APNsEnvironment.of(host: r.header("host"), fallback: environment)
            // A provider token, or the connection's client certificate (APNsCertificateAuth.swift).
            let auth = try certificates.authorize(r, environment: env)
            // The body's JSON is parsed once, for whichever rule asks first.
            var sent = APNsBody(r.body)
            let headers = try auth.headers(of: r, body: &sent)
            try APNsDeviceToken.check(token)
            let bundle = try auth.app(of: headers, engine: engine)
            // Topic against device: a known token's environment and app; an unknown one is
            // refused unless it can be registered, which waits until the body and size passed.
            let known = engine.device(apnsToken: token)
            if let known { try Self.check(known, environment: env, bundleID: bundle) }
            let project = known == nil ? try Self.registrationProject(engine, bundleID: bundle) : nil
            if r.bodyTooLarge {
                throw APNsError(.payloadTooLarge, "the payload is over the server's body limit")
            }
            let payload = try APNsPayload.check(&sent, pushType: headers.pushType)
            let now = engine.clock.nowMillis()
            let device: Device
            if let known { device = known } else {
                device = try Self.registered(token, in: project, engine: engine, environment: env, bundleID: bundle)
            }
            try Self.checkState(of: device, now: now)
            let fault = engine.requestFault(transport: .apns, path: r.path, senderID: device.senderID,
                                            tokens: [device.token, APNsDeviceToken.lowercased(token)], topic: nil)
            if let f = fault, f.isAnswered { return answer(f, r, device: device, apnsID: apnsID) }
            let delayMillis: Int64? = if case .delay(let ms, _)? = fault { ms } else { nil }
            let uniqueID = env == .sandbox ? Self.newUUID() : nil
            let req = Self.request(to: device, headers: headers, now: now)
            // A body that is no JSON object: no payload, and the body as it came.
            let asSent = payload == nil ? Self.asSent(r.body) : nil
            let recorded = Self.recordedBlock(headers: headers, apnsID: apnsID, uniqueID: uniqueID, payload: payload ?? Self.null,
                                              authorizedBy: auth.recorded, environment: env, asSent: asSent?.member ?? [])
            let lastSeen = device.lastSeenAt
            // The answer is made as the send is decided and kept with its record.
            let exchange = SendExchange(headers: RecordedExchange.headers(r)) { result -> HTTPResponse in
                if let e = result.results.first?.error { return Self.response(Self.refusal(e, lastSeen: lastSeen), apnsID: apnsID) }
                return Self.success(apnsID: apnsID, uniqueID: uniqueID)
            }
            // Apple does not parse the payload: one that is not a JSON object is accepted, and the
            // phone cannot take it (recorded so, undeliverable, with the body as received: the
            // record's `raw_body` when it is text, and its `apns` block's either way).
            var submission = Submission(req, sender: device.senderID, transport: .apns, faultKey: r.path)
            // Records name what the send refused by the reason answered, as the room's own refusals.
            submission.errorNames = { Self.refusal($0, lastSeen: 0).reason.rawValue }
            submission.errorDetails = { Self.refusal($0, lastSeen: 0).detail }
            submission.recordBlock = recorded
            submission.exchange = exchange
            if let asSent {
                if asSent.isText { submission.body = r.body[...] }
                submission.undeliverable = Self.notAnObject
            }
            submission.acceptedAt = now
            // The record's status: 200, as every accepted HTTP send's.
            submission.answeredStatus = 200
            submission.commitNow = !r.inBatch
            engine.submit(submission) { outcome in
                switch outcome {
                case .failure: responder.send(Self.response(APNsError(.internalServerError, "the store failed"), apnsID: apnsID))
                case .success(let result):
                    let answer = result.response as? HTTPResponse
                        ?? Self.response(APNsError(.internalServerError, "the send made no answer"), apnsID: apnsID)
                    if let delayMillis { responder.send(answer, afterMillis: Int(delayMillis)) } else { responder.send(answer) }
                }
            }
            return nil
        } catch {
            return recorded(error, apnsID: apnsID, r, token: token)
        }
    }

    /// The answer to a request fault that answers a send to `device` (`when.transport: "apns"`
    /// or any): a status answers the reason Apple uses for it (`Retry-After` kept), a reason of
    /// Apple's its own status, a dropped connection nothing; each recorded as refused with the
    /// fault.
    func answer(_ f: RequestFault, _ r: HTTPRequest, device: Device, apnsID: String) -> HTTPResponse {
        let status: Int, reason: String, answer: HTTPResponse
        switch f {
        case .status(let code, let retry, _):
            var a = Self.response(APNsError(APNsReason.forStatus(code), ""), apnsID: apnsID)
            a.status = code
            if let retry { a.headers.append(("Retry-After", String(retry))) }
            (status, reason, answer) = (code, APNsReason.forStatus(code).rawValue, a)
        case .protocolError(let name, _):
            let apple = APNsReason(rawValue: name) ?? .internalServerError
            let e = APNsError(apple, "", timestamp: apple == .unregistered ? device.lastSeenAt : nil)
            (status, reason, answer) = (e.status, apple.rawValue, Self.response(e, apnsID: apnsID))
        case .drop, .delay:
            (status, reason, answer) = (0, RequestFault.closedConnection, .dropConnection)
        }
        let detail = status == 0 ? f.detail : RequestFault.status(status, retryAfter: nil, fault: f.fault).detail + " " + reason
        let refused = RejectedRequest(senderID: device.senderID, transport: .apns, answeredStatus: status, error: reason, detail: detail,
                                      fault: f.fault, target: ("token", device.token))
        return engine.refused(refused, answer: answer, headers: Self.refusedHeaders(r))
    }

    /// Apple's answer to a refused send, kept on a record of its own (`status: "rejected"`, the
    /// reason as its `error`, why in the mock's words as its `error_detail`), under the project
    /// of the device the token names when one does. A refusal the store cannot record is
    /// answered all the same.
    func recorded(_ e: APNsError, apnsID: String, _ r: HTTPRequest, token: String) -> HTTPResponse {
        let device = token.isEmpty ? nil : engine.device(apnsToken: token)
        let refused = RejectedRequest(senderID: device?.senderID, transport: .apns, answeredStatus: e.status, error: e.reason.rawValue,
                                      detail: e.detail, raw: String(decoding: r.body.prefix(4096), as: UTF8.self),
                                      target: Self.target(named: token, device: device))
        // Apple's answer names only the reason; the log says why, as for HTTP v1's refusals.
        engine.notice("apns request refused", [("http.path", String(r.path.utf8Prefix(256))), ("status", String(e.status)),
                                               ("reason", e.reason.rawValue), ("detail", e.detail),
                                               ("auth", Log.maskCredential(r.header("authorization")))])
        return engine.refused(refused, answer: Self.response(e, apnsID: apnsID), headers: Self.refusedHeaders(r))
    }

    /// What a refused send's record names as its target: the device the path's token is
    /// (`token`: its FCM token, as an accepted send's record), or, when no device has it, the
    /// token itself as sent (`apns_token`, cut at 256 bytes); none for a path without one.
    static func target(named token: String, device: Device?) -> (kind: String, value: String)? {
        if let device { return ("token", device.token) }
        return token.isEmpty ? nil : ("apns_token", clipped(token))
    }

    /// `s` cut to at most 256 UTF-8 bytes, on a character's boundary: what a refused send's
    /// record keeps of a token or header.
    static func clipped(_ s: String) -> String {
        s.utf8Prefix(256)
    }

    /// The request headers a refused send's record keeps: those every record keeps, then its
    /// `apns-*` headers as they came (a repeated one joined with ", ", names and values each cut at
    /// 256 bytes), as a refused send has no `apns` block to show them.
    static func refusedHeaders(_ r: HTTPRequest) -> String {
        var apns: [(name: String, value: String)] = []
        for h in r.headers where h.name.utf8.count > 5 && hasPrefixIgnoringCase(h.name.utf8, "apns-") {
            let name = h.name.lowercased()
            if let i = apns.firstIndex(where: { $0.name == name }) { apns[i].value += ", " + h.value } else { apns.append((name, h.value)) }
        }
        let kept = RecordedExchange.headers(r)
        guard !apns.isEmpty else { return kept }
        var out = Array(kept.utf8)
        for (name, value) in apns {
            RecordedExchange.appendClean(clipped(name), into: &out)
            out.append(9)
            RecordedExchange.appendClean(clipped(value), into: &out)
            out.append(10)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `device` is one a send to `environment` for `bundleID` may reach: of the other
    /// environment, `BadDeviceToken`; of another app than the topic's, `DeviceTokenNotForTopic`.
    static func check(_ device: Device, environment: APNsEnvironment, bundleID: String) throws(APNsError) {
        guard environment == device.apnsEnvironment else {
            throw APNsError(.badDeviceToken, "the token is a \(device.apnsEnvironment.rawValue) token; this request reached \(environment.rawValue)")
        }
        guard device.app == bundleID else {
            throw APNsError(.deviceTokenNotForTopic, "the device belongs to \(device.app), not \(bundleID)")
        }
    }

    /// The project an unknown token becomes a device of (`--unknown-tokens register` and a project
    /// with the app), or `BadDeviceToken`.
    static func registrationProject(_ engine: Engine, bundleID: String) throws(APNsError) -> String {
        guard let project = engine.unknownTokenProject(app: bundleID, platform: .ios) else {
            throw APNsError(.badDeviceToken, engine.unknownTokens == .register
                ? "no device has this APNs token, and no project has \(bundleID) as an iOS app to register it in"
                : "no device has this APNs token")
        }
        return project
    }

    /// The device an unknown token becomes in `project` (`registrationProject`), checked as a
    /// known one is: the project may have gone, or a send of another app or environment may
    /// have registered the token in the meantime.
    static func registered(_ token: String, in project: String?, engine: Engine, environment: APNsEnvironment,
                           bundleID: String) throws(APNsError) -> Device {
        guard let project else { throw APNsError(.badDeviceToken, "no device has this APNs token") }
        // A new online iOS device of the app in that environment; of two first sends of one token
        // at once, the second finds the device the first made.
        let spec = DeviceSpec(token: nil, senderID: project, app: bundleID, platform: .ios, online: true, apnsToken: token,
                              apnsEnvironment: environment)
        guard let device = (try? engine.createDevice(spec)) ?? engine.device(apnsToken: token) else {
            throw APNsError(.badDeviceToken, "no device has this APNs token")
        }
        try check(device, environment: environment, bundleID: bundleID)
        return device
    }

    /// Why a device that is the send's may not receive it: uninstalled or its token replaced (410
    /// `Unregistered`, with when it was last seen); its APNs token expired by `now` on the mock's
    /// clock (410 `ExpiredToken`).
    static func checkState(of device: Device, now: Int64) throws(APNsError) {
        guard device.state == .registered else {
            throw APNsError(.unregistered, "the device is \(device.state.rawValue)", timestamp: device.lastSeenAt)
        }
        if let expires = device.apnsExpiresAt, expires <= now {
            throw APNsError(.expiredToken, "the device's APNs token expired at \(rfc3339(millis: expires)) on the mock's clock")
        }
    }

    /// The engine's send of an APNs request to `device`: the headers the delivery rules read, as
    /// an HTTP v1 message's `apns` block carries them (so the iOS rules read them as they do for
    /// FCM); the TTL from `apns-expiration` on the mock's clock (30 days without one, 0 for 0 or
    /// a time passed). The payload is not read on the way: what the record keeps of the request,
    /// the payload included, is written apart, straight as text (`recordedBlock`,
    /// APNsRecordBlock.swift), and the inbox reads it from there.
    static func request(to device: Device, headers: APNsHeaders, now: Int64) -> SendRequest {
        var req = SendRequest(format: .json, target: .token(device.token))
        req.options.collapseKey = headers.collapseID
        req.options.priority = headers.priority == 10 ? .high : .normal
        if let e = headers.expiration {
            // 18 digits at most: a time that far ahead is held a century (the engine's longest).
            req.options.timeToLive = e == 0 ? 0 : min(max(0, e - now / 1000), DeliveryOptions.longestTTLSeconds)
        } else {
            req.options.timeToLive = defaultTimeToLive
        }
        // Only the headers the delivery rules read (the collapse id and expiration).
        var h = JSONObject()
        h["apns-expiration"] = .string(String(expirationHeader(headers, now: now)))
        if let c = headers.collapseID { h["apns-collapse-id"] = .string(c) }
        req.platforms = PlatformConfigs(apns: JSONObject([("headers", .object(h))]))
        return req
    }

    /// The payload a record keeps for a body that is not a JSON object: none.
    static let null: [UInt8] = Array("null".utf8)

    /// The `apns-expiration` a send goes with: as given, else `now` (ms) plus the default TTL, in seconds.
    static func expirationHeader(_ headers: APNsHeaders, now: Int64) -> Int64 {
        headers.expiration ?? (now / 1000 + defaultTimeToLive)
    }

    /// Why a payload that is not a JSON object reaches no device.
    static let notAnObject = "undeliverable: payload is not a JSON object"

    /// How long a notification is kept for an offline device without `apns-expiration`.
    static let defaultTimeToLive = APNsHeaders.defaultTimeToLive

    /// The APNs reason for a recipient the engine's send refused.
    static func refusal(_ e: FCMErrorCode, lastSeen: Int64) -> APNsError {
        switch e {
        case .notRegistered: return APNsError(.unregistered, "the device is no longer registered", timestamp: lastSeen)
        case .deviceMessageRateExceeded: return APNsError(.tooManyRequests, "over the per-device rate (--device-rate)")
        default: return APNsError(.internalServerError, "the send failed: \(e.rawValue)")
        }
    }

    /// The token of `/3/device/{token}`; `BadPath` for any other path under `/3/`.
    static func deviceToken(path: String) throws(APNsError) -> String {
        // An ASCII path (every well-formed one) is read as bytes in place: as characters, the
        // scan of a 64-digit token cost more than the rest of the route's rules together. Any
        // other is read as characters (a combining mark after a '/' makes it no '/').
        let device: StaticString = "/3/device/"  // devicePrefix
        let prefix = device.utf8CodeUnitCount
        let bytes = path.utf8.withContiguousStorageIfAvailable { b -> Bool? in
            var devicePath = b.count >= prefix
            for i in 0..<min(prefix, b.count) {
                if b[i] >= 0x80 { return nil }
                if b[i] != device.utf8Start[i] { devicePath = false }
            }
            var i = prefix
            while i < b.count {
                let c = b[i]
                if c >= 0x80 { return nil }
                if c == UInt8(ascii: "/") { devicePath = false }
                i += 1
            }
            return devicePath
        }
        let token: Substring?
        if let bytes, let devicePath = bytes {
            token = devicePath ? Substring(path.utf8.dropFirst(prefix)) : nil
        } else {
            let rest = path.hasPrefix(devicePrefix) ? path.dropFirst(devicePrefix.count) : nil
            token = rest?.contains("/") == false ? rest : nil
        }
        guard let token else { throw APNsError(.badPath, "\(path) is not /3/device/{token}") }
        return String(token)
    }

    /// Apple's answer to a refusal: its status, exactly `{"reason":…}`, and the `apns-id`.
    static func response(_ e: APNsError, apnsID: String) -> HTTPResponse {
        var r = HTTPResponse(status: e.status, contentType: "application/json", body: e.body, headers: [("apns-id", apnsID)])
        r.neverIndexed = idHeaders
        return r
    }

    /// The answer's headers that carry ids, one of a kind each: not indexed by HPACK.
    static let idHeaders = ["apns-id", "apns-unique-id"]

    /// Apple's success: 200, no body, the `apns-id`, and in the sandbox an `apns-unique-id`.
    static func success(apnsID: String, uniqueID: String?) -> HTTPResponse {
        var headers = [("apns-id", apnsID)]
        if let uniqueID { headers.append(("apns-unique-id", uniqueID)) }
        var r = HTTPResponse(status: 200, headers: headers)
        r.neverIndexed = idHeaders
        return r
    }
}

