import FCMModel
import Platform
import FCMCore
import FCMStore
import Synchronization

// The steps of a send (Engine+Send.swift): who it reaches, what each recipient gets, the record, the write.
extension Engine {
    /// Who a topic, condition or device-group send reaches (`devices` nil for a send to tokens).
    struct FanOut {
        var devices: [Device]?
        /// The error answered instead of a message id (topic, condition), or of the whole group.
        var error: FCMErrorCode?
        var fault: String?
        var groupKey: String?
        /// Members of the group that could not be reached (uninstalled).
        var groupFailed: [String] = []
    }

    /// Step 1: the recipients of a topic, condition or device-group send, or nil for tokens.
    func resolveFanOut(_ req: SendRequest, senderID: String, transport: Transport, path: String, condition: Condition?,
                       groupsByToken: Bool, now: Int64, state s: inout EngineState) -> FanOut {
        var fan = FanOut()
        switch req.target {
        // (Not where the room's protocol has no device groups, as HTTP v1.)
        case .token(let t) where groupsByToken && !s.groups.isEmpty && s.groups[t]?.senderID == senderID:
            // `to` a notification key of this project: every member of the group.
            fan.groupKey = t
            fan.devices = []
            if let err = req.messageError {
                fan.error = err
            } else {
                for m in s.groups[t]?.members ?? [] {
                    if let d = s.devices[m], d.state == .registered {
                        fan.devices?.append(d)
                    } else if let d = s.devices[m] {
                        fan.groupFailed.append(d.token)
                    }
                }
            }
        case .topic, .condition:
            let topic = req.target.topicName
            fan.devices = []
            if let err = req.messageError {
                fan.error = err
            } else if let f = s.faults.fireRecipientFault(transport: transport, path: path, senderID: senderID, token: "",
                                                          topic: topic), case .error(let err) = f.action {
                fan.error = err
                fan.fault = f.id
            } else if let name = topic, let limit = topicRate, !req.options.dryRun,
                !s.topicWindows.admit(senderID + "/" + Topics.key(name), now: now, limit: limit)
            {
                fan.error = .topicsMessageRateExceeded
            } else if let name = topic {
                fan.devices = subscribers(of: s.topicSubscribers[Topics.key(name)] ?? [], req: req, senderID: senderID, state: s)
            } else if let condition {
                let ids = condition.evaluate { s.topicSubscribers[$0] ?? [] }
                fan.devices = subscribers(of: ids, req: req, senderID: senderID, state: s)
            }
        default:
            break
        }
        return fan
    }

    /// What placing a send's deliveries produced.
    struct Placement {
        var results: [RecipientResult] = []
        var rows: [DeliveryRow] = []
        var newDevices: [Device] = []
        var changes: [StatusChange] = []
        var notices: [Notice] = []
        /// Held notices whose total a purge raised: notice id, new total.
        var noticeTotals: [(Int64, Int)] = []
        var events: [(String, String)] = []
        /// Writes to real clients' connections, made once the send is committed.
        var clientOrders = ClientOrders()
        /// Why a recipient failed where the error's name does not say it (a browser's Web Push
        /// subscription named as a token), for the record's `error_detail`.
        var errorDetail: String?

        init(capacity: Int) {
            results.reserveCapacity(capacity)
            rows.reserveCapacity(capacity)
        }
    }

    /// Step 2: a delivery row (and a result, for tokens) per recipient, by the device rules.
    func placeDeliveries(_ fan: FanOut, wellFormed: [Bool], _ ctx: SendContext, _ p: inout Placement,
                                 state s: inout EngineState) {
        let tokens = ctx.tokens
        // Each platform's collapse key and TTL (the same on all for a legacy send).
        let options = PlatformDelivery(ctx.req, acceptedAtMillis: ctx.now)
        if fan.devices == nil && tokens.isEmpty {
            // No recipient at all: one result carrying the message's error.
            let err = ctx.req.messageError ?? .missingRegistration
            p.results.append(RecipientResult(error: err))
            p.rows.append(DeliveryRow(id: ctx.firstMid, message: ctx.firstMid, device: nil, token: nil, status: "failed", error: ctx.errorName(err),
                                      canonical: nil, deliveredAt: nil, expiresAt: ctx.expiresAt))
        }
        for (i, token) in (fan.groupKey == nil ? tokens : []).enumerated() {
            let mid = ctx.firstMid + Int64(i)
            var row = DeliveryRow(id: mid, message: ctx.firstMid, device: nil, token: nil, status: "failed", error: nil,
                                  canonical: nil, deliveredAt: nil, expiresAt: ctx.expiresAt)
            var result = RecipientResult()
            let outcome = resolveRecipient(token, wellFormed: wellFormed[i], req: ctx.req, senderID: ctx.senderID,
                                           transport: ctx.transport, path: ctx.path, state: &s, newDevices: &p.newDevices,
                                           now: ctx.now, dryRun: ctx.dryRun, registersUnknown: !(ctx.dryRun && ctx.dryRunNeedsKnownToken),
                                           byFID: ctx.byFID)
            switch outcome {
            case .failed(let err, let deviceID, let fault):
                result.error = err
                if err == .invalidRegistration, let id = deviceID, s.devices[id]?.isWebPushSubscription == true {
                    p.errorDetail = "a Web Push subscription: reach it through its endpoint"
                } else if err == .deviceMessageRateExceeded, let limit = deviceRate, fault == nil {
                    p.errorDetail = "over the per-device rate: at most \(limit.count) message\(limit.count == 1 ? "" : "s") a device in \(limit.periodMillis) ms"
                }
                row.error = ctx.errorName(err)
                row.fault = fault
                row.device = deviceID
                if deviceID == nil { row.token = token }
            case .accepted(let target, let canonical):
                row.device = target.id
                if canonical {
                    result.canonicalToken = target.token
                    row.canonical = target.id
                    // The token the sender named (a refreshed one's old token): the record shows
                    // it, and `?token=` finds the send by it.
                    row.token = token
                }
                result.messageID = ctx.dryRun ? "fake_message_id" : MessageID(micros: mid, suffix: ctx.suffix).description
                place(target, mid, &row, options[target.platform], differs: options.differs, ctx, &p, state: &s)
                result.deliveryID = mid
                result.deliveryStatus = row.status
                result.deliveredTo = target.token
            }
            if ctx.wantEvents, row.error == nil, let name = EventJSON.name(forStatus: row.status) {
                p.events.append((name, placedEvent(mid, status: row.status, token: row.device.flatMap { s.devices[$0]?.token }, ctx, state: s)))
            }
            p.results.append(result)
            p.rows.append(row)
        }
        for (i, target) in (fan.devices ?? []).enumerated() {
            let mid = ctx.firstMid + Int64(i)
            var row = DeliveryRow(id: mid, message: ctx.firstMid, device: target.id, token: nil, status: "failed", error: nil,
                                  canonical: nil, deliveredAt: nil, expiresAt: ctx.expiresAt)
            place(target, mid, &row, options[target.platform], differs: options.differs, ctx, &p, state: &s)
            if ctx.wantEvents, let name = EventJSON.name(forStatus: row.status) {
                p.events.append((name, placedEvent(mid, status: row.status, token: target.token, ctx, state: s)))
            }
            p.rows.append(row)
        }
    }

    /// A placed delivery's event: a push written to a real client (`message.sent`) carries its
    /// `client_delivery` (connection, persistent id, first write), as its later writes' events do.
    func placedEvent(_ mid: Int64, status: String, token: String?, _ ctx: SendContext, state s: EngineState) -> String {
        let id = MessageID(micros: mid, suffix: ctx.suffix).description
        if status == "sent", let cd = s.clientDeliveries[mid] {
            return EventJSON.clientDelivery(messageID: id, token: token, status: status, at: ctx.now, clientDelivery: cd.json())
        }
        return EventJSON.delivery(messageID: id, token: token, status: status, at: ctx.now)
    }

    /// Delivers to an accepted device: at once when online, else by FCM's storage rules (Apple's
    /// for a send through APNs), under the collapse key and TTL of the device's platform
    /// (`differs`: not the send's own).
    private func place(_ target: Device, _ mid: Int64, _ row: inout DeliveryRow, _ options: DeliveryOptions, differs: Bool,
                       _ ctx: SendContext, _ p: inout Placement, state s: inout EngineState) {
        let now = ctx.now
        if differs { row.expiresAt = now + options.ttlSeconds * 1000 }
        if ctx.undecryptable {
            // The browser would drop it: nothing reaches the service worker, online or not.
            row.status = "undecryptable"
            return
        }
        if ctx.undeliverable != nil {
            // Accepted, but the device cannot take it (Apple cannot tell the sender; the record
            // and the inbox can).
            row.status = "undeliverable"
            return
        }
        if target.client != nil {
            if !ctx.dryRun, let via = s.fakeSubscription(carrying: target) {
                // An FCM registration over a fake web device's subscription: handed to that
                // subscription's push service at once, the mock's own, which takes it there as any
                // push (its TTL, its device online or not; the Web Push room decrypts it).
                row.status = "delivered"
                row.deliveredAt = now
                p.clientOrders.writes.append(ClientWrite(transport: .fcm, clientID: "", connectionID: "", deliveryID: mid,
                                                         version: MessageID(micros: mid, suffix: ctx.suffix).description,
                                                         token: via.device.token, channelID: via.subscriptionID, device: target.client,
                                                         deviceToken: target.token))
                return
            }
            // A real client: written on its connection at once when it can take it, else held.
            if !ctx.dryRun, let payload = ctx.relay { s.clientPayloads[mid] = payload }
            if !ctx.dryRun, target.online, let carrier = s.carrier(of: target), let conn = carrier.connection,
               conn.unacked.count < maxUnackedPerConnection, s.stored[target.id]?.isEmpty ?? true {
                let fired = faultsArmed.load(ordering: .relaxed)
                    ? s.faults.fireClientFault(transport: carrier.kind.faultTransport, senderID: target.senderID, token: target.token)
                    : nil
                let fault = fired?.action
                // On the record as every fault that fired (its recipient's and the message's `fault`).
                if let fired { row.fault = fired.id }
                if fault == .closeConnection {
                    // The fault closes the connection instead: the push stays held for the next one.
                    p.clientOrders.close.append(ClientClose(transport: carrier.kind, clientID: carrier.row.id, connectionID: conn.info.id,
                                                            reason: "a fault (close_connection)"))
                } else {
                    let entry = StoredEntry(deliveryID: mid, collapseKey: options.collapseKey, expiresAt: row.expiresAt,
                                            source: ctx.transport.tag)
                    var delay: Int64?
                    if case .delay(let ms)? = fault, ms > 0 { delay = ms }
                    let (write, update) = markSent(entry, device: target, connection: conn.info.id, clientID: carrier.row.id, now: now,
                                                   delay: delay, state: &s)
                    p.clientOrders.writes.append(write)
                    // One a fault delays stays `pending` until it is written (`delayedWriteDue`).
                    guard let update else {
                        row.status = "pending"
                        return
                    }
                    row.status = "sent"
                    row.clientDelivery = update.stored
                    return
                }
            } else if target.online, options.ttlSeconds > 0, s.carrier(of: target)?.connection != nil {
                // Connected, neither held nor offline: it waits only for room on the connection
                // (behind what waits already), in order and kept whole. The storage rules
                // (collapse, the 100 rule) are for a device held or disconnected.
                row.status = "pending"
                guard !ctx.dryRun else { return }
                s.stored[target.id, default: []].append(StoredEntry(deliveryID: mid, collapseKey: options.collapseKey, expiresAt: row.expiresAt,
                                                                    source: ctx.transport.tag))
                return
            }
        } else if target.online {
            row.status = "delivered"
            row.deliveredAt = now
            if !ctx.dryRun, let collapseID = ctx.req.options.collapseKey, rooms.holding[ctx.transport]?.replacesOnScreen == true {
                show(mid, on: target, collapseID: collapseID, ctx, &p, state: &s)
            }
            return
        }
        if options.ttlSeconds == 0 {
            // Now or never: an offline device never sees a TTL-0 message.
            row.status = "expired"
            return
        }
        // Offline: FCM's storage rules decide what the device keeps, or its protocol's own
        // (Apple's, sent through APNs).
        var entries = s.stored[target.id] ?? []
        let own = rooms.holding[ctx.transport]
        let new = StoredEntry(deliveryID: mid, collapseKey: options.collapseKey, expiresAt: row.expiresAt, ownRules: own != nil,
                              source: ctx.transport.tag)
        let stored = (own ?? .fcm).hold(new, &entries, now)
        row.status = stored.newDropped ? "dropped" : "pending"
        if ctx.wantEvents {
            for ch in stored.changes {
                if let name = EventJSON.name(forStatus: ch.status) {
                    p.events.append((name, EventJSON.delivery(
                        messageID: MessageID(micros: ch.deliveryID, suffix: ctx.suffix).description,
                        token: target.token, status: ch.status, at: now)))
                }
            }
        }
        guard !ctx.dryRun else { return }
        p.changes += stored.changes
        if stored.purged > 0 {
            if let i = entries.firstIndex(where: { $0.isNotice && s.clientDeliveries[$0.deliveryID] == nil }) {
                // One notice of all a device lost while away (the app hears of it once); one a
                // real client was written keeps its bytes: a new notice tells of what came after.
                entries[i].noticeTotal = Int32(clamping: Int(entries[i].noticeTotal) + stored.purged)
                p.noticeTotals.append((entries[i].deliveryID, Int(entries[i].noticeTotal)))
            } else {
                // The notice waits for the device however long it stays away (the engine's longest
                // time to live): it is the service's word that messages were lost, not a message.
                let notice = Notice(id: s.ids.reserve(1, nowMicros: clock.nowMicros()), device: target,
                                    total: stored.purged, expiresAt: now + DeliveryOptions.longestTTLSeconds * 1000)
                p.notices.append(notice)
                entries.append(StoredEntry(deliveryID: notice.id, collapseKey: nil, expiresAt: notice.expiresAt, isNotice: true,
                                           noticeTotal: Int32(clamping: stored.purged)))
            }
        }
        s.stored[target.id] = entries
    }

    /// Step 3: the message record.
    func messageRow(_ fan: FanOut, _ p: Placement, _ ctx: SendContext, multicastID: Int64, data: String?, notification: String?,
                        requestFault: String?, clientMessageID: String?, raw: () -> String?) -> MessageRow {
        let req = ctx.req
        let accepted = fan.devices != nil ? fan.error == nil : p.results.contains { $0.error == nil }
        // The record's error: the recipients' one error when they all failed alike.
        let firstError = fan.devices != nil ? fan.error : p.results.first?.error
        let sameError = fan.devices != nil ? fan.error != nil : firstError != nil && p.results.allSatisfy { $0.error == firstError }
        return MessageRow(
            id: ctx.firstMid, suffix: ctx.suffix, multicastID: multicastID, senderID: ctx.senderID,
            transport: ctx.transport.rawValue, format: req.format.rawValue, acceptedAt: ctx.now,
            targetKind: fan.groupKey != nil ? "group" : req.target.kind,
            targetValue: fan.groupKey ?? Self.storedTargetValue(req.target), collapseKey: req.options.collapseKey,
            timeToLive: req.options.timeToLive, restrictedPackageName: req.options.restrictedPackageName,
            flags: Self.flags(req.options), data: data, notification: notification,
            priority: req.effectivePriority.rawValue, status: accepted ? "accepted" : "rejected",
            error: sameError ? firstError?.rawValue : nil,
            errorDetail: req.messageErrorDetail ?? ctx.undeliverable
                ?? (sameError ? p.errorDetail ?? firstError.flatMap { e in ctx.errorDetails?(e) } : nil),
            // A plain-text body is kept even when accepted (the form fields are the request as
            // sent), and so is one the device cannot read.
            httpStatus: ctx.answeredStatus, raw: accepted && req.format != .plain && ctx.undeliverable == nil ? nil : raw(), recipients: p.rows.count,
            fault: requestFault ?? fan.fault ?? p.rows.lazy.compactMap(\.fault).first, clientMessageID: clientMessageID)
    }

    /// Step 4: queues the rows for the store; once committed, publishes the events and answers.
    func writeAndPublish(_ message: MessageRow, _ p: Placement, _ ctx: SendContext, result: SendResult, state s: EngineState,
                                 completion: @escaping @Sendable (Result<SendResult, StoreError>) -> Void) {
        let ops = [Writes.send(newDevices: p.newDevices.map(\.row), message: message, deliveries: p.rows,
                               notices: p.notices.map { $0.rows(transport: ctx.transport, answeredStatus: ctx.answeredStatus, now: ctx.now) },
                               statusChanges: p.changes.map { ($0.deliveryID, $0.status) }, changedAt: ctx.now)]
            + p.noticeTotals.map { Writes.setNoticeTotal(notice: $0.0, total: $0.1) }
        var published: [(String, String)] = []
        if ctx.wantEvents {
            for d in p.newDevices { published.append(("device.created", s.render(d, now: ctx.now))) }
            published.append((message.status == "accepted" ? "message.accepted" : "message.rejected",
                              Self.summaryJSON(message, form: rooms.recordBlocks.form(message.transport), rows: p.rows, results: p.results, state: s)))
            published += p.events
        }
        let eventsToPublish = published
        // Committed by the sender once it leaves the state lock (`Engine.submit`).
        var carried = p.clientOrders
        if !carried.writes.isEmpty { carryEntries(&carried, message, p.rows, state: s) }
        let orders = carried
        let rows = p.rows
        submit(ops, wakeWriter: false) { [self] error in
            if error == nil { events.publish(eventsToPublish) }
            // Only the recipients' inboxes changed (a failed commit changed none).
            notifyChanged(devices: rows.lazy.compactMap(\.device))
            // The sender's answer is made before the writes go out, so what it keeps for a
            // delivery (the XMPP room's awaited receipts) is there before a client acknowledges it.
            completion(error.map { .failure($0) } ?? .success(result))
            if error == nil { dispatch(orders) }
        }
    }

    /// Gives each write the entry its delivery is, from the send's own rows: the room builds what
    /// it writes without reading the entry back from the store. Rows and writes both come in
    /// placement order (ascending ids), so one walk pairs them; a write left without its entry
    /// reads it back, and so does one a fault delays (what it goes out with is what the store
    /// holds then: the device may be gone, or the store reset).
    private func carryEntries(_ orders: inout ClientOrders, _ message: MessageRow, _ rows: [DeliveryRow], state s: EngineState) {
        var j = 0
        for i in orders.writes.indices {
            let id = orders.writes[i].deliveryID
            guard (orders.writes[i].delayMillis ?? 0) == 0 else { continue }
            while j < rows.count && rows[j].id < id { j += 1 }
            guard j < rows.count, rows[j].id == id, let platform = rows[j].device.flatMap({ s.devices[$0] })?.platform else { continue }
            let r = rows[j]
            orders.writes[i] = orders.writes[i].carrying(
                entry: InboxEntry(row: InboxRow(message: message, delivery: r), status: r.status, platform: platform, blocks: rooms.recordBlocks),
                senderID: message.senderID)
        }
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
                                  newDevices: inout [Device], now: Int64, dryRun: Bool, registersUnknown: Bool = true,
                                  byFID: Bool = false) -> RecipientOutcome {
        if let err = req.messageError { return .failed(err, s.tokenIndex[token], nil) }
        var device: Device
        if byFID {
            // An installation id: its device, never one registered on first use.
            guard let d = s.fidIndex[token].flatMap({ s.devices[$0] }) else { return .failed(.notRegistered, nil, nil) }
            device = d
        } else if !wellFormed {
            return .failed(.invalidRegistration, nil, nil)
        } else if !s.groups.isEmpty, let g = s.groups[token] {
            // A notification key where a token belongs: another project's is MismatchSenderId;
            // this project's (in `registration_ids`, which takes registration tokens only; `to`
            // sends to the group) is not a registration token.
            return .failed(g.senderID == senderID ? .invalidRegistration : .mismatchSenderId, nil, nil)
        } else if let d = s.device(token: token) {
            device = d
        } else {
            // The key of a deleted group is no token, nor is a deleted real client's: never
            // registered on first use; nor is one an HTTP v1 `validate_only` names.
            guard unknownTokens == .register, registersUnknown, !s.retiredTokens.contains(token) else {
                return .failed(.notRegistered, nil, nil)
            }
            // A well-formed unknown token becomes a new online device of the sending project.
            device = Device(id: s.nextDeviceID, token: token, fid: s.newInstallationID(), senderID: senderID,
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
        // An fid names the installation, whose token is the current one: nothing canonical.
        let canonical = device.id != addressedID && !byFID
        if device.state == .unregistered { return .failed(.notRegistered, addressedID, nil) }
        // A browser's Web Push subscription (an autopush channel, a `wp:` registration) is no
        // FCM registration: only its endpoint reaches it.
        if transport != .webpush, device.isWebPushSubscription { return .failed(.invalidRegistration, addressedID, nil) }
        if device.senderID != senderID { return .failed(.mismatchSenderId, addressedID, nil) }
        if let pkg = req.options.restrictedPackageName, pkg != device.app { return .failed(.invalidPackageName, addressedID, nil) }
        if device.platform == .ios, req.goesThroughAPNs, let app = s.projects[device.senderID]?.app(named: device.app),
            app.apnsCredential != "valid"
        {
            return .failed(.invalidApnsCredential, addressedID, nil)
        }
        if let f = s.faults.fireRecipientFault(transport: transport, path: path, senderID: senderID,
                                               token: byFID ? device.token : token, topic: nil),
            case .error(let err) = f.action
        {
            return .failed(err, addressedID, f.id)
        }
        if let limit = deviceRate, !dryRun, !s.deviceWindows.admit(String(device.id), now: now, limit: limit) {
            return .failed(.deviceMessageRateExceeded, addressedID, nil)
        }
        return .accepted(device, canonical: canonical)
    }
}
