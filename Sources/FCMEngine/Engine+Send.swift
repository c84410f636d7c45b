public import FCMModel
import FCMCore
public import FCMStore
import Platform

/// A `deleted_messages` notice: a device discarded everything it held (`total` messages) and
/// gets this when it is next online. Stored as a message of its own with one delivery.
struct Notice: Sendable {
    var id: Int64
    var device: Device
    var total: Int
    var expiresAt: Int64

    /// Its record and its one delivery, as stored.
    func rows(transport: Transport, answeredStatus: Int, now: Int64) -> (MessageRow, DeliveryRow) {
        let m = MessageRow(
            id: id, suffix: messageIDSuffix(senderID: device.senderID), multicastID: nil, senderID: device.senderID,
            transport: transport.rawValue, format: BodyFormat.json.rawValue, acceptedAt: now, targetKind: "deleted_messages",
            targetValue: String(total), collapseKey: nil, timeToLive: SendOptions.defaultTimeToLive, restrictedPackageName: nil,
            flags: 0, data: nil, notification: nil, priority: Priority.normal.rawValue, status: "accepted", error: nil,
            errorDetail: nil, httpStatus: answeredStatus, raw: nil, recipients: 1)
        return (m, DeliveryRow(id: id, message: id, device: device.id, token: nil, status: "pending", error: nil, canonical: nil,
                               deliveredAt: nil, expiresAt: expiresAt))
    }
}

extension Device {
    /// This device as its store row.
    var row: DeviceRow {
        DeviceRow(id: id, token: token, senderID: senderID, app: app, platform: platform.rawValue, state: state.rawValue,
                  canonicalID: canonicalID, online: online, createdAt: createdAt, lastSeenAt: lastSeenAt, fid: fid,
                  apnsToken: givenAPNsToken, apnsEnvironment: platform == .ios ? apnsEnvironment.rawValue : nil,
                  apnsExpiresAt: apnsExpiresAt, client: client?.stored)
    }
}

extension Engine {
    /// Sends `submission`: resolves every recipient against the fake devices, places a delivery
    /// for each by the device rules, queues the message and its deliveries for the store, and
    /// calls `completion` once they are committed (on the store's writer thread; at once for a
    /// dry run, which is validated the same way and stores nothing). Each step is a function
    /// below; all of them run under the state lock, so the store applies sends in the order they
    /// were decided. With an `exchange`, the answer is made from the result as the send is
    /// decided and written with its record; the completion's result carries it as `response`.
    public func submit(_ submission: consuming Submission, completion: @escaping @Sendable (Result<SendResult, StoreError>) -> Void) {
        let req = submission.request, senderID = submission.sender, transport = submission.transport
        let path = submission.faultKey, byFID = submission.byInstallationID, undeliverable = submission.undeliverable
        let requestFault = submission.firedFault, clientMessageID = submission.clientMessageID
        let exchange = submission.exchange, recorded = submission.recordBlock, rules = submission.targetRules
        // The kept body only, not the whole submission, in the closure the record reads it through.
        let body = submission.body
        let now = submission.acceptedAt ?? clock.nowMillis()
        let dryRun = req.options.dryRun
        let tokens: [String]
        switch req.target {
        case .token, .multicast: tokens = req.target.tokens
        case .missing, .topic, .condition: tokens = []
        }
        var ctx = SendContext(req: req, senderID: senderID, transport: transport, path: path, now: now,
                              suffix: messageIDSuffix(senderID: senderID), expiresAt: now + min(req.options.timeToLive, DeliveryOptions.longestTTLSeconds) * 1000,
                              wantEvents: events.hasReaders && !dryRun, tokens: tokens, byFID: byFID, undeliverable: undeliverable,
                              namePrefix: submission.namePrefix, errorNames: submission.errorNames,
                              answeredStatus: submission.answeredStatus ?? 0)
        ctx.relay = submission.relay
        ctx.dryRunNeedsKnownToken = rules.dryRunNeedsKnownToken
        ctx.errorDetails = submission.errorDetails
        // A push whose body would not decrypt is taken and settles `undecryptable`.
        ctx.undecryptable = submission.undecryptable
        let multicastID = newMulticastID()
        // Serialized before taking the lock: the critical section stays the part that needs it.
        let dataJSON = dryRun ? nil : req.data.map { JSONValue.object($0).serialized() }
        let notificationJSON = dryRun ? nil : req.notification.map { JSONValue.object($0).serialized() }
        // `recorded`: the blocks as the caller wrote them (an APNs send's, straight as bytes).
        let platformsJSON = dryRun ? nil : recorded ?? req.platforms.map(Self.platformsJSON)
        // Tokens the room's parser checked (HTTP v1's one token or fid) are well formed.
        let wellFormed = rules.tokensChecked ? ctx.tokens.map { _ in true } : ctx.tokens.map(isWellFormedToken)
        var condition: Condition?
        if case .condition(let text) = req.target {
            // The room's rule where it has one (HTTP v1's: at most five topics).
            condition = Condition.parse(text, maxOperators: rules.maxConditionOperators ?? maxConditionOperators)
        }

        let dryResult: SendResult? = state.withLock { s in
            // One copy of the context for the steps below (passing the captured one to each step
            // would copy it each time).
            var ctx = ctx
            let fan = resolveFanOut(req, senderID: senderID, transport: transport, path: path, condition: condition,
                                   groupsByToken: rules.groupsByToken, now: now, state: &s)
            let count = fan.devices.map { max($0.count, 1) } ?? max(ctx.tokens.count, 1)
            // Stamps are taken under the lock, so id order is acceptance order.
            ctx.firstMid = s.ids.reserve(count, nowMicros: clock.nowMicros())
            var placed = Placement(capacity: count)
            placeDeliveries(fan, wellFormed: wellFormed, ctx, &placed, state: &s)
            // The record's id is its first recipient's message id: formatted once when that one was accepted.
            let first = placed.results.first
            let recordID = !dryRun && first?.deliveryID == ctx.firstMid ? first?.messageID : nil
            var result = SendResult(multicastID: multicastID, results: placed.results,
                                    recordID: recordID ?? MessageID(micros: ctx.firstMid, suffix: ctx.suffix).description)
            result.topicMessageID = ctx.firstMid
            result.topicError = fan.error
            if fan.groupKey != nil { result.group = (fan.devices?.count ?? 0, fan.groupFailed) }
            if dryRun { return result }

            var chunkFull: [Int64] = []
            for r in placed.rows {
                if let d = r.device, s.addToInbox(device: d, id: r.id) { chunkFull.append(d) }
            }
            for n in placed.notices where s.addToInbox(device: n.device.id, id: n.id) { chunkFull.append(n.device.id) }
            var message = messageRow(fan, placed, ctx, multicastID: multicastID, data: dataJSON, notification: notificationJSON,
                                 requestFault: requestFault, clientMessageID: clientMessageID,
                                 raw: { body.map { String(decoding: $0, as: UTF8.self) } })
            roomFields(&message, result, ctx, platforms: platformsJSON)
            result.v1Name = message.v1Name
            s.takenSinceStart[Int(transport.tag)] += 1
            if ctx.undecryptable { s.undecryptableSinceStart += 1 }
            if let exchange {
                let response = exchange.answer(result)
                message.answer = response.storedForm
                // What the sender was answered: a v1 send whose one recipient failed is a 404,
                // a 403, … not the 200 the room expected.
                message.httpStatus = response.answeredStatus
                message.headers = exchange.headers
                result.response = response
            }
            s.stats.count(message, rows: placed.rows)
            writeAndPublish(message, placed, ctx, result: result, state: s, completion: completion)
            if !chunkFull.isEmpty { queueInboxChunks(of: chunkFull, state: &s) }
            return nil
        }
        if let dryResult { return completion(.success(dryResult)) }
        // On this thread, unless a commit is running: a send answered without a thread switch.
        if submission.commitNow { store.commitQueued() }
    }

    /// What a send is, for the steps that place and record it.
    struct SendContext {
        let req: SendRequest
        let senderID: String
        let transport: Transport
        let path: String
        let now: Int64
        let suffix: UInt32
        let expiresAt: Int64
        /// Events are built only while someone listens.
        let wantEvents: Bool
        /// The first message-id stamp: the record's id, and recipient i's is `firstMid + i`.
        var firstMid: Int64 = 0

        /// The tokens addressed one by one (none for topics, conditions and a missing target).
        let tokens: [String]
        /// HTTP v1: the one token is an fid.
        var byFID = false
        /// Why an accepted send reaches no device (its deliveries `dropped`).
        var undeliverable: String?
        /// The start of the record's `name`, before the message's id.
        var namePrefix: String?
        /// The room's names for FCM's errors.
        var errorNames: (@Sendable (FCMErrorCode) -> String)?
        var errorDetails: (@Sendable (FCMErrorCode) -> String?)?
        /// The status the record of an accepted send keeps (0: none).
        var answeredStatus = 0
        /// Web Push: the body would not decrypt in the browser.
        var undecryptable = false
        /// What a real client is sent (a relayed push), kept until it acknowledges it.
        var relay: ClientPayload?
        /// An unknown token fails a dry run even where a send would register it (`TargetRules`).
        var dryRunNeedsKnownToken = false
        var dryRun: Bool { req.options.dryRun }

        /// An error as records and events name it: by the room's names (HTTP v1's FcmError
        /// codes), else FCM's own.
        func errorName(_ e: FCMErrorCode) -> String {
            errorNames?(e) ?? e.rawValue
        }
    }

    /// What a room adds to its records: its record block (an APNs request's headers, payload and
    /// credential as an `apns` block; a Web Push request's headers, VAPID identity and plaintext
    /// as a `webpush` one; an HTTP v1 message's platform blocks), the target kind `fid`, the
    /// `name` answered for an accepted send, and its own name of a refused one's error.
    private func roomFields(_ m: inout MessageRow, _ result: SendResult, _ ctx: SendContext, platforms: String?) {
        m.platforms = platforms
        if ctx.byFID {
            m.targetKind = "fid"
            m.targetValue = ctx.tokens.first
        }
        if ctx.errorNames != nil, let e = m.error, let code = FCMErrorCode(rawValue: e) { m.error = ctx.errorName(code) }
        guard m.status == "accepted", let prefix = ctx.namePrefix else { return }
        m.v1Name = prefix + (ctx.req.target.isTopicOrCondition
            ? String(result.topicMessageID) : result.results.first?.messageID ?? "")
    }

    /// A v1 message's platform blocks as one JSON object (`{"android":…,"apns":…,…}`, only those sent).
    static func platformsJSON(_ p: PlatformConfigs) -> String {
        if p.android == nil && p.apns == nil && p.webpush == nil && p.fcmOptions == nil { return "{}" }
        var w = JSONWriter()
        w.beginObject()
        for (name, block) in [("android", p.android), ("apns", p.apns), ("webpush", p.webpush), ("fcm_options", p.fcmOptions)] {
            if let block { w.key(name); w.raw(JSONValue.object(block).serialized()) }
        }
        w.endObject()
        return w.string
    }

}

extension Engine {
    /// Records a request that was refused as a whole (its body or credential, a status or close
    /// fault), so testers can see why; returns the record's own id.
    public func recordRejected(_ r: RejectedRequest) throws(StoreError) -> Int64 {
        let (senderID, transport, format, target) = (r.senderID, r.transport, r.format, r.target)
        let (httpStatus, error, detail, fault, clientMessageID) = (r.answeredStatus, r.error, r.detail, r.fault, r.clientMessageID)
        let now = clock.nowMillis()
        let suffix = messageIDSuffix(senderID: senderID ?? "")
        let (mid, ticket) = state.withLock { s in
            let mid = s.ids.reserve(1, nowMicros: clock.nowMicros())
            let row = MessageRow(
                id: mid, suffix: suffix, multicastID: nil, senderID: senderID,
                transport: transport.rawValue, format: format.rawValue, acceptedAt: now, targetKind: target?.kind ?? "token",
                targetValue: target?.value,
                collapseKey: nil, timeToLive: SendOptions.defaultTimeToLive, restrictedPackageName: nil, flags: 0,
                data: nil, notification: nil, priority: Priority.normal.rawValue, status: "rejected", error: error,
                errorDetail: detail, httpStatus: httpStatus, raw: r.raw, recipients: 0, fault: fault, clientMessageID: clientMessageID)
            s.stats.count(status: row.status, error: row.error, at: now)
            return (mid, submit([Writes.insertMessage(row)]))
        }
        try commit(ticket)
        if events.hasReaders {
            var w = JSONWriter()
            w.beginObject()
            w.key("message_id"); w.value(MessageID(micros: mid, suffix: suffix).description)
            w.key("sender_id"); w.value(senderID)
            w.key("transport"); w.value(transport.rawValue)
            w.key("format"); w.value(format.rawValue)
            w.key("accepted_at"); w.value(rfc3339(millis: now))
            w.key("status"); w.value("rejected")
            // The shape of every message event: the target the request named when it was read
            // (else null), no recipient reached.
            w.key("target")
            if let target {
                w.beginObject(); w.key("kind"); w.value(target.kind); w.key("value"); w.value(target.value); w.endObject()
            } else {
                w.null()
            }
            w.key("recipients"); w.beginArray(); w.endArray()
            // As on the record: an XMPP message has its client's message_id, no HTTP status.
            if rooms.recordBlocks.form(transport.rawValue).byClientMessageID {
                w.key("xmpp_message_id"); w.value(clientMessageID)
            } else {
                w.key("http_status"); w.value(httpStatus)
            }
            w.key("error"); w.value(error)
            w.key("error_detail"); w.value(detail)
            w.key("fault"); w.value(fault)
            w.endObject()
            events.publish([("message.rejected", w.string)])
        }
        return mid
    }

    /// The payload of `message.accepted` / `message.rejected`: the record's main fields, built
    /// from memory (no read of what was just written).
    static func summaryJSON(_ m: MessageRow, form: RecordForm, rows: [DeliveryRow], results: [RecipientResult], state s: EngineState) -> String {
        var w = JSONWriter()
        w.beginObject()
        Render.recordHead(&w, m, form: form, recipients: rows.count) { rows[0].token ?? rows[0].device.flatMap { s.devices[$0]?.token } }
        w.key("status"); w.value(m.status)
        w.key("error"); w.value(m.error)
        w.key("fault"); w.value(m.fault)
        w.key("recipients"); w.beginArray()
        for (r, res) in zip(rows, results) {
            w.beginObject()
            w.key("token"); w.value(r.device.flatMap { s.devices[$0]?.token } ?? r.token)
            w.key("message_id"); w.value(res.messageID)
            w.key("status"); w.value(r.status)
            w.key("error"); w.value(r.error)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.string
    }

    static func storedTargetValue(_ t: SendTarget) -> String? {
        switch t {
        case .topic, .condition: return t.value
        default: return nil
        }
    }

    static func flags(_ o: SendOptions) -> Int64 {
        var f: Int64 = 0
        if o.contentAvailable { f |= 1 }
        if o.mutableContent { f |= 2 }
        if let d = o.delayWhileIdle { f |= 4 | (d ? 8 : 0) }
        return f
    }
}

extension Engine {
    /// Keeps the answer a record's sender got, and its request headers, on the record. Queued
    /// behind the record's own insert (callers have seen it committed) and not waited for: the
    /// answer goes out at once, and `messageRecord` drains the queue before it reads.
    public func keepAnswer(record id: Int64?, answer: String, headers: String?) {
        guard let id else { return }
        _ = submit([Writes.setAnswer(message: id, answer: answer, headers: headers)])
    }
}
