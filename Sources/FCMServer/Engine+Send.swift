import Dispatch
import FCMCore
import FCMStore
import Platform

/// The outcome for one recipient of a send (one entry of `results`).
public struct RecipientResult: Sendable, Equatable {
    /// The message id when accepted (`fake_message_id` in a dry run).
    public var messageID: String?
    public var error: FCMErrorCode?
    /// The token to use from now on, when the addressed one was refreshed.
    public var canonicalToken: String?
    /// The delivery row (its message-id stamp) and what happened to it: `delivered`, `pending`, …
    public var deliveryID: Int64?
    public var deliveryStatus: String?
    /// The token the message went to (the canonical one for a refreshed token).
    public var deliveredTo: String?
}

/// The outcome of a send to tokens.
public struct SendResult: Sendable {
    public var multicastID: Int64
    public var results: [RecipientResult]
    /// The record's id in the control API (`GET /api/v1/messages/{id}`).
    public var recordID: String
    /// For topic and condition sends: the message id FCM answered as a number.
    public var topicMessageID: Int64 = 0
    /// For topic and condition sends: the error answered instead of a message id.
    public var topicError: FCMErrorCode?
    /// For device-group sends: how many members were reached and the tokens that failed.
    public var group: (success: Int, failedTokens: [String])?

    public var success: Int { results.count(where: { $0.error == nil }) }
    public var failure: Int { results.count(where: { $0.error != nil }) }
    public var canonicalIDs: Int { results.count(where: { $0.canonicalToken != nil }) }
}

/// One `messages` row. Its id is the first recipient's message-id stamp.
struct MessageRow: Sendable {
    var id: Int64
    var suffix: UInt32
    var multicastID: Int64?
    var senderID: String?
    var transport: Transport
    var format: BodyFormat
    var acceptedAt: Int64
    var targetKind: String
    /// Only for topic and condition targets; a token target's value is its recipient's token.
    var targetValue: String?
    var collapseKey: String?
    var timeToLive: Int64
    var restrictedPackageName: String?
    var flags: Int64
    var data: String?
    var notification: String?
    var priority: Priority
    var status: String
    var error: String?
    var errorDetail: String?
    var httpStatus: Int
    var raw: String?
    /// Its deliveries are the rows `id ..< id + recipients`.
    var recipients: Int
    /// The fault that fired on the whole request, if one did.
    var fault: String? = nil
    /// The `message_id` an XMPP client gave the message.
    var clientMessageID: String? = nil

    static let insertSQL = """
        INSERT INTO messages(id, suffix, multicast_id, sender_id, transport, format, accepted_at, target_kind,
          target_value, collapse_key, time_to_live, restricted_package_name, flags, data, notification, priority,
          status, error, error_detail, http_status, raw, recipients, fault, client_message_id)
        VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
        """

    var values: [SQLValue] {
        [.int(id), .int(Int64(suffix)), .optional(multicastID), .optional(senderID), .text(transport.rawValue),
         .text(format.rawValue), .int(acceptedAt), .text(targetKind), .optional(targetValue), .optional(collapseKey),
         .int(timeToLive), .optional(restrictedPackageName), .int(flags),
         .optional(data), .optional(notification), .text(priority.rawValue), .text(status), .optional(error),
         .optional(errorDetail), .int(Int64(httpStatus)), .optional(raw), .int(Int64(recipients)), .optional(fault),
         .optional(clientMessageID)]
    }
}

/// One `deliveries` row: a message meeting one recipient. Its id is that recipient's message-id
/// stamp.
struct DeliveryRow: Sendable {
    var id: Int64
    var device: Int64?
    /// Only for recipients that are no device (malformed or rejected unknown tokens).
    var token: String?
    var status: String
    var error: String?
    var canonical: Int64?
    var deliveredAt: Int64?
    var expiresAt: Int64
    /// The error fault that failed this recipient, if one did.
    var fault: String? = nil

    static let insertSQL = """
        INSERT INTO deliveries(id, message, device, token, status, error, canonical, delivered_at, expires_at, fault)
        VALUES (?,?,?,?,?,?,?,?,?,?)
        """
}

/// A `deleted_messages` notice: a device discarded everything it held (`total` messages) and
/// gets this when it is next online. Stored as a message of its own with one delivery.
struct Notice: Sendable {
    var id: Int64
    var device: Device
    var total: Int
    var expiresAt: Int64

    func insert(_ c: SQLiteConnection, transport: Transport, now: Int64) throws {
        let m = MessageRow(
            id: id, suffix: messageIDSuffix(senderID: device.senderID), multicastID: nil, senderID: device.senderID,
            transport: transport, format: .json, acceptedAt: now, targetKind: "deleted_messages", targetValue: String(total),
            collapseKey: nil, timeToLive: SendOptions.defaultTimeToLive, restrictedPackageName: nil, flags: 0, data: nil,
            notification: nil, priority: .normal, status: "accepted", error: nil, errorDetail: nil, httpStatus: 200,
            raw: nil, recipients: 1)
        try c.run(MessageRow.insertSQL, m.values)
        try c.run(DeliveryRow.insertSQL, [.int(id), .int(id), .int(device.id), .null, .text("pending"), .null, .null, .null,
                                          .int(expiresAt), .null])
    }
}

extension Device {
    static let insertSQL = """
        INSERT INTO devices(id, token, sender_id, app, platform, state, canonical_id, online, created_at, last_seen_at)
        VALUES (?,?,?,?,?,?,?,?,?,?)
        """

    var insertValues: [SQLValue] {
        [.int(id), .text(token), .text(senderID), .text(app), .text(platform.rawValue), .text(state.rawValue),
         .optional(canonicalID), .int(online ? 1 : 0), .int(createdAt), .int(lastSeenAt)]
    }
}

extension Engine {
    /// `send` for callers that may block: returns once the send is committed.
    public func send(_ req: SendRequest, senderID: String, transport: Transport, path: String = "/fcm/send",
                     raw: () -> String? = { nil }) throws(StoreError) -> SendResult {
        let box = Locked<Result<SendResult, StoreError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        send(req, senderID: senderID, transport: transport, path: path, raw: raw) { r in
            box.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try box.withLock { $0! }.get()
    }

    /// Sends `req` (token, multicast or missing target) as `senderID`: resolves every recipient
    /// against the fake devices, queues the message and its deliveries for the store, and calls
    /// `completion` once they are committed (on the store's writer thread; at once for a dry run,
    /// which is validated the same way and stores nothing).
    ///
    /// `path` is what error faults match on; `requestFault` is the id of a request-level fault
    /// (a delay) that already fired for this request, kept on the record.
    public func send(_ req: SendRequest, senderID: String, transport: Transport, path: String = "/fcm/send",
                     requestFault: String? = nil, clientMessageID: String? = nil, raw: () -> String? = { nil },
                     completion: @escaping @Sendable (Result<SendResult, StoreError>) -> Void) {
        let tokens: [String]
        switch req.target {
        case .token, .multicast: tokens = req.target.tokens
        case .missing, .topic, .condition: tokens = []
        }
        let now = clock.nowMillis()
        let multicastID = newMulticastID()
        let suffix = messageIDSuffix(senderID: senderID)
        let expiresAt = now + req.options.timeToLive * 1000
        let dryRun = req.options.dryRun
        // Serialized before taking the lock: the critical section stays the part that needs it.
        let dataJSON = dryRun ? nil : req.data.map { JSONValue.object($0).serialized() }
        let notificationJSON = dryRun ? nil : req.notification.map { JSONValue.object($0).serialized() }
        let wellFormed = tokens.map(isWellFormedToken)
        var condition: Condition?
        if case .condition(let text) = req.target { condition = Condition.parse(text, maxOperators: maxConditionOperators) }

        let dryResult: SendResult? = state.withLock { s in
            // Topic and condition sends reach every matching subscriber of this project.
            var fanOut: [Device]?
            var topicError: FCMErrorCode? = nil
            var topicFault: String? = nil
            var groupKey: String? = nil
            var groupFailed: [String] = []
            switch req.target {
            case .token(let t) where !s.groups.isEmpty && s.groups[t]?.senderID == senderID:
                // `to` a notification key of this project: every member of the group.
                groupKey = t
                fanOut = []
                if let err = req.messageError {
                    topicError = err
                } else {
                    for m in s.groups[t]?.members ?? [] {
                        if let d = s.devices[m], d.state == .registered {
                            fanOut?.append(d)
                        } else if let d = s.devices[m] {
                            groupFailed.append(d.token)
                        }
                    }
                }
            case .topic, .condition:
                let topic = req.target.topicName
                fanOut = []
                if let err = req.messageError {
                    topicError = err
                } else if let f = s.faults.fireRecipientFault(transport: transport, path: path, senderID: senderID, token: "",
                                                              topic: topic), case .error(let err) = f.action {
                    topicError = err
                    topicFault = f.id
                } else if let name = topic, let limit = topicRate, !dryRun,
                    !s.topicWindows.admit(senderID + "/" + Topics.key(name), now: now, limit: limit)
                {
                    topicError = .topicsMessageRateExceeded
                } else if let name = topic {
                    fanOut = subscribers(of: s.topicSubscribers[Topics.key(name)] ?? [], req: req, senderID: senderID, state: s)
                } else if let condition {
                    let ids = condition.evaluate { s.topicSubscribers[$0] ?? [] }
                    fanOut = subscribers(of: ids, req: req, senderID: senderID, state: s)
                }
            default:
                break
            }
            let count = fanOut.map { max($0.count, 1) } ?? max(tokens.count, 1)
            // Stamps are taken under the lock, so id order is acceptance order.
            let firstMid = s.ids.reserve(count, nowMicros: clock.nowMicros())
            var results: [RecipientResult] = []
            results.reserveCapacity(count)
            var rows: [DeliveryRow] = []
            rows.reserveCapacity(count)
            var newDevices: [Device] = []
            var changes: [StatusChange] = []
            var notices: [Notice] = []
            // Events are built only while someone listens.
            let wantEvents = events.hasReaders && !dryRun
            var deliveryEvents: [(String, String)] = []

            if fanOut == nil && tokens.isEmpty {
                // No recipient at all: one result carrying the message's error.
                let err = req.messageError ?? .missingRegistration
                results.append(RecipientResult(error: err))
                rows.append(DeliveryRow(id: firstMid, device: nil, token: nil, status: "failed", error: err.rawValue,
                                        canonical: nil, deliveredAt: nil, expiresAt: expiresAt))
            }
            for (i, token) in (groupKey == nil ? tokens : []).enumerated() {
                let mid = firstMid + Int64(i)
                var row = DeliveryRow(id: mid, device: nil, token: nil, status: "failed", error: nil,
                                      canonical: nil, deliveredAt: nil, expiresAt: expiresAt)
                var result = RecipientResult()
                let outcome = resolveRecipient(token, wellFormed: wellFormed[i], req: req, senderID: senderID,
                                               transport: transport, path: path, state: &s, newDevices: &newDevices,
                                               now: now, dryRun: dryRun)
                switch outcome {
                case .failed(let err, let deviceID, let fault):
                    result.error = err
                    row.error = err.rawValue
                    row.fault = fault
                    row.device = deviceID
                    if deviceID == nil { row.token = token }
                case .accepted(let target, let canonical):
                    row.device = target.id
                    if canonical {
                        result.canonicalToken = target.token
                        row.canonical = target.id
                    }
                    result.messageID = dryRun ? "fake_message_id" : MessageID(micros: mid, suffix: suffix).description
                    place(target, mid, &row)
                    result.deliveryID = mid
                    result.deliveryStatus = row.status
                    result.deliveredTo = target.token
                }
                if wantEvents, row.error == nil, let name = EventJSON.name(forStatus: row.status) {
                    deliveryEvents.append((name, EventJSON.delivery(
                        messageID: MessageID(micros: mid, suffix: suffix).description,
                        token: row.device.flatMap { s.devices[$0]?.token }, status: row.status, at: now)))
                }
                results.append(result)
                rows.append(row)
            }
            for (i, target) in (fanOut ?? []).enumerated() {
                let mid = firstMid + Int64(i)
                var row = DeliveryRow(id: mid, device: target.id, token: nil, status: "failed", error: nil,
                                      canonical: nil, deliveredAt: nil, expiresAt: expiresAt)
                place(target, mid, &row)
                if wantEvents, let name = EventJSON.name(forStatus: row.status) {
                    deliveryEvents.append((name, EventJSON.delivery(
                        messageID: MessageID(micros: mid, suffix: suffix).description, token: target.token,
                        status: row.status, at: now)))
                }
                rows.append(row)
            }

            /// Delivers to an accepted device: at once when online, else by FCM's storage rules.
            func place(_ target: Device, _ mid: Int64, _ row: inout DeliveryRow) {
                    if target.online {
                        row.status = "delivered"
                        row.deliveredAt = now
                    } else if req.options.timeToLive == 0 {
                        // Now or never: an offline device never sees a TTL-0 message.
                        row.status = "expired"
                    } else {
                        // Offline: FCM's storage rules decide what the device keeps.
                        var entries = s.stored[target.id] ?? []
                        let stored = DeviceStorage.store(
                            StoredEntry(deliveryID: mid, collapseKey: req.options.collapseKey, expiresAt: expiresAt),
                            in: &entries, now: now)
                        row.status = stored.newDropped ? "dropped" : "pending"
                        if wantEvents {
                            for ch in stored.changes {
                                if let name = EventJSON.name(forStatus: ch.status) {
                                    deliveryEvents.append((name, EventJSON.delivery(
                                        messageID: MessageID(micros: ch.deliveryID, suffix: suffix).description,
                                        token: target.token, status: ch.status, at: now)))
                                }
                            }
                        }
                        if !dryRun {
                            changes += stored.changes
                            if stored.purged > 0 {
                                let notice = Notice(id: s.ids.reserve(1, nowMicros: clock.nowMicros()), device: target,
                                                    total: stored.purged, expiresAt: now + SendOptions.defaultTimeToLive * 1000)
                                notices.append(notice)
                                entries.append(StoredEntry(deliveryID: notice.id, collapseKey: nil, expiresAt: notice.expiresAt,
                                                           isNotice: true))
                            }
                            s.stored[target.id] = entries
                        }
                    }
            }
            var result = SendResult(multicastID: multicastID, results: results,
                                    recordID: MessageID(micros: firstMid, suffix: suffix).description)
            result.topicMessageID = firstMid
            result.topicError = topicError
            if groupKey != nil { result.group = (fanOut?.count ?? 0, groupFailed) }
            if dryRun { return result }

            for r in rows {
                if let d = r.device { s.inbox[d, default: []].append(r.id) }
            }
            for n in notices { s.inbox[n.device.id, default: []].append(n.id) }
            let accepted = fanOut != nil ? topicError == nil : results.contains { $0.error == nil }
            // The record's error: the recipients' one error when they all failed alike.
            let firstError = fanOut != nil ? topicError : results.first?.error
            let sameError = fanOut != nil ? topicError != nil : firstError != nil && results.allSatisfy { $0.error == firstError }
            let message = MessageRow(
                id: firstMid, suffix: suffix, multicastID: multicastID, senderID: senderID,
                transport: transport, format: req.format, acceptedAt: now, targetKind: groupKey != nil ? "group" : req.target.kind,
                targetValue: groupKey ?? Self.storedTargetValue(req.target), collapseKey: req.options.collapseKey,
                timeToLive: req.options.timeToLive, restrictedPackageName: req.options.restrictedPackageName,
                flags: Self.flags(req.options), data: dataJSON, notification: notificationJSON,
                priority: req.effectivePriority, status: accepted ? "accepted" : "rejected",
                error: sameError ? firstError?.rawValue : nil, errorDetail: req.messageErrorDetail,
                httpStatus: 200, raw: accepted ? nil : raw(), recipients: rows.count,
                fault: requestFault ?? topicFault ?? rows.lazy.compactMap(\.fault).first, clientMessageID: clientMessageID)
            let (createdDevices, deliveryRows, statusChanges, noticeRows) = (newDevices, rows, changes, notices)
            let ops: [WriteOp] = [{ (c: SQLiteConnection) throws in
                for d in createdDevices { try c.run(Device.insertSQL, d.insertValues) }
                try c.run(MessageRow.insertSQL, message.values)
                let stmt = try c.statement(DeliveryRow.insertSQL)
                for r in deliveryRows {
                    try stmt.bind([.int(r.id), .int(message.id), .optional(r.device), .optional(r.token),
                                   .text(r.status), .optional(r.error), .optional(r.canonical),
                                   .optional(r.deliveredAt), .int(r.expiresAt), .optional(r.fault)])
                    while try stmt.step() {}
                    try c.reset(stmt)
                }
                for n in noticeRows { try n.insert(c, transport: transport, now: now) }
                try Self.apply(statusChanges, c)
            }]
            var published: [(String, String)] = []
            if wantEvents {
                for d in newDevices { published.append(("device.created", s.render(d, now: now))) }
                published.append((accepted ? "message.accepted" : "message.rejected",
                                  Self.summaryJSON(message, rows: rows, results: results, state: s)))
                published += deliveryEvents
            }
            let eventsToPublish = published
            let answer = result
            submit(ops) { [self] error in
                if error == nil { events.publish(eventsToPublish) }
                notifyChanged()
                completion(error.map { .failure($0) } ?? .success(answer))
            }
            return nil
        }
        if let dryResult { completion(.success(dryResult)) }
    }

    /// The devices a topic or condition send reaches: registered subscribers of this project that
    /// the options allow (a restricted package, a valid APNs credential), oldest first.
    private func subscribers(of ids: Set<Int64>, req: SendRequest, senderID: String, state s: EngineState) -> [Device] {
        var out: [Device] = []
        out.reserveCapacity(ids.count)
        for id in ids {
            guard let d = s.devices[id], d.state == .registered, d.senderID == senderID else { continue }
            if let pkg = req.options.restrictedPackageName, pkg != d.app { continue }
            if d.platform == .ios, req.goesThroughAPNs, let app = s.projects[d.senderID]?.app(named: d.app),
                app.apnsCredential != "valid"
            { continue }
            out.append(d)
        }
        out.sort { $0.id < $1.id }
        return out
    }

    enum RecipientOutcome {
        /// The error, the device addressed (when it is one), the fault that caused it (if any).
        case failed(FCMErrorCode, Int64?, String?)
        /// Deliver to `target`; `canonical` when it replaced the addressed token.
        case accepted(Device, canonical: Bool)
    }

    /// The rules of seeds Table 9 for one token, in the order the mock checks them.
    private func resolveRecipient(_ token: String, wellFormed: Bool, req: SendRequest, senderID: String,
                                  transport: Transport, path: String, state s: inout EngineState,
                                  newDevices: inout [Device], now: Int64, dryRun: Bool) -> RecipientOutcome {
        if let err = req.messageError { return .failed(err, s.tokenIndex[token], nil) }
        guard wellFormed else { return .failed(.invalidRegistration, nil, nil) }
        // A notification key where a token belongs: another project's is MismatchSenderId; this
        // project's (in `registration_ids`, which takes registration tokens only; `to` sends to
        // the group) is not a registration token.
        if !s.groups.isEmpty, let g = s.groups[token] {
            return .failed(g.senderID == senderID ? .invalidRegistration : .mismatchSenderId, nil, nil)
        }
        var device: Device
        if let d = s.device(token: token) {
            device = d
        } else {
            // The key of a deleted group is no token: never registered on first use.
            guard unknownTokens == .register, !s.retiredGroupKeys.contains(token) else { return .failed(.notRegistered, nil, nil) }
            // A well-formed unknown token becomes a new online device of the sending project.
            device = Device(id: s.nextDeviceID, token: token, senderID: senderID,
                            app: req.options.restrictedPackageName ?? "unknown.app", platform: .android,
                            state: .registered, canonicalID: nil, online: true, createdAt: now, lastSeenAt: now)
            if !dryRun {
                s.nextDeviceID += 1
                s.insert(device)
                newDevices.append(device)
            }
        }
        let addressedID = device.id
        device = s.current(device)
        let canonical = device.id != addressedID
        if device.state == .unregistered { return .failed(.notRegistered, addressedID, nil) }
        if device.senderID != senderID { return .failed(.mismatchSenderId, addressedID, nil) }
        if let pkg = req.options.restrictedPackageName, pkg != device.app { return .failed(.invalidPackageName, addressedID, nil) }
        if device.platform == .ios, req.goesThroughAPNs, let app = s.projects[device.senderID]?.app(named: device.app),
            app.apnsCredential != "valid"
        {
            return .failed(.invalidApnsCredential, addressedID, nil)
        }
        if let f = s.faults.fireRecipientFault(transport: transport, path: path, senderID: senderID, token: token, topic: nil),
            case .error(let err) = f.action
        {
            return .failed(err, addressedID, f.id)
        }
        if let limit = deviceRate, !dryRun, !s.deviceWindows.admit(String(device.id), now: now, limit: limit) {
            return .failed(.deviceMessageRateExceeded, addressedID, nil)
        }
        return .accepted(device, canonical: canonical)
    }

    /// Records a send that was refused as a whole (HTTP 400 or 401, a status or close fault), so
    /// testers can see why.
    @discardableResult
    public func recordRejected(senderID: String?, transport: Transport, format: BodyFormat, httpStatus: Int,
                               error: String, detail: String, raw: String?, fault: String? = nil,
                               clientMessageID: String? = nil) throws(StoreError) -> String {
        let now = clock.nowMillis()
        let suffix = messageIDSuffix(senderID: senderID ?? "")
        let (mid, ticket) = state.withLock { s in
            let mid = s.ids.reserve(1, nowMicros: clock.nowMicros())
            let row = MessageRow(
                id: mid, suffix: suffix, multicastID: nil, senderID: senderID,
                transport: transport, format: format, acceptedAt: now, targetKind: "token", targetValue: nil,
                collapseKey: nil, timeToLive: SendOptions.defaultTimeToLive, restrictedPackageName: nil, flags: 0,
                data: nil, notification: nil, priority: .normal, status: "rejected", error: error,
                errorDetail: detail, httpStatus: httpStatus, raw: raw, recipients: 0, fault: fault, clientMessageID: clientMessageID)
            return (mid, submit([{ (c: SQLiteConnection) throws in try c.run(MessageRow.insertSQL, row.values) }]))
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
            // The shape of every message event: no target was read, no recipient reached.
            w.key("target"); w.null()
            w.key("recipients"); w.beginArray(); w.endArray()
            // As on the record: an XMPP message has its client's message_id, no HTTP status.
            if transport == .xmpp {
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
        return MessageID(micros: mid, suffix: suffix).description
    }

    /// The payload of `message.accepted` / `message.rejected`: the record's main fields, built
    /// from memory (no read of what was just written).
    static func summaryJSON(_ m: MessageRow, rows: [DeliveryRow], results: [RecipientResult], state s: EngineState) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("message_id"); w.value(MessageID(micros: m.id, suffix: m.suffix).description)
        w.key("multicast_id"); if let v = m.multicastID { w.value(v) } else { w.null() }
        w.key("sender_id"); w.value(m.senderID)
        w.key("transport"); w.value(m.transport.rawValue)
        w.key("format"); w.value(m.format.rawValue)
        w.key("accepted_at"); w.value(rfc3339(millis: m.acceptedAt))
        w.key("target"); w.beginObject()
        w.key("kind"); w.value(m.targetKind)
        w.key("value"); w.value(m.targetValue ?? (rows.count == 1 ? (rows[0].device.flatMap { s.devices[$0]?.token } ?? rows[0].token) : "\(rows.count) tokens"))
        w.endObject()
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

    /// Applies storage-rule status changes to delivery rows.
    static func apply(_ changes: [StatusChange], _ c: SQLiteConnection) throws {
        for ch in changes { try c.run("UPDATE deliveries SET status = ? WHERE id = ?", [.text(ch.status), .int(ch.deliveryID)]) }
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
