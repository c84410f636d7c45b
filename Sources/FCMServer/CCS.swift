import Dispatch
import FCMCore
import Platform
import Synchronization
import XMPPServer

/// The FCM connection server (CCS) on top of the XMPP listener: app servers authenticate with a
/// sender id and server key, send downstream messages as JSON in `<gcm>` elements, and get acks
/// and nacks. Downstream messages go through the very same send path as HTTP.
final class CCS: XMPPDelegate {
    let engine: Engine
    static let namespace = "google:mobile:data"
    /// Most downstream messages a connection may have in flight (sent, not yet acked or nacked).
    static let window = 100

    /// Per-connection state, by connection id.
    struct Link: Sendable {
        var connection: XMPPConnection
        /// When it opened, on the mock's clock.
        var connectedAt: Int64
        /// Downstream messages taken and not yet acked or nacked, as the window counts them (a
        /// slot opens just before the answer goes out).
        var inFlight = 0
        /// The same, but counted down only once the answer is out: what a closing connection
        /// waits for.
        var unanswered = 0
        var draining = false
        /// The client ended its stream: close once its messages are answered (it acks nothing
        /// more, so receipts and upstream messages are not waited for).
        var streamEnded = false
        /// Messages sent to the app server and waiting for its ack, by message id.
        var outstanding: [String: Outbound] = [:]
    }

    /// What a server-to-app-server message was, so its ack can be recorded.
    enum Outbound: Sendable {
        /// An upstream message: its id and the registration token of the device that sent it.
        case upstream(String, token: String)
        /// A receipt, kept whole so it can be sent again on another connection.
        case receipt(Receipt)
    }

    /// A receipt's JSON and its `message_id` (what the app server's ack names).
    struct Receipt: Sendable {
        let id: String
        let json: String
    }

    let links = Locked<[String: Link]>([:])
    /// Receipts by sender, waiting for a connection; and receipts of messages still held by an
    /// offline device, by delivery id.
    let queuedReceipts = Locked<[String: [Receipt]]>([:])
    let awaitingDelivery = Locked<[Int64: PendingReceipt]>([:])
    /// Bumped by every reset (under `links`): a receipt made before one is not sent after it.
    let generation = Atomic<Int>(0)

    /// A receipt to make once an offline device gets the message (stamped with that time).
    struct PendingReceipt {
        var sender: String
        var messageID: String
        var token: String
        var category: String
    }

    /// Access log: one line per stanza in and out (never a password).
    let log: Log

    /// Most connections one sender id may hold at once; one more is closed with `policy-violation`.
    let connectionsPerSender: Int

    init(engine: Engine, log: Log = Log(level: "warning"), connectionsPerSender: Int = 1000) {
        self.engine = engine
        self.log = log
        self.connectionsPerSender = connectionsPerSender
        engine.upstreamDispatch.withLock { $0 = { [weak self] sender in self?.dispatchUpstream(sender) } }
        engine.lateDeliveries.withLock { $0 = { [weak self] ids in self?.delivered(ids) } }
        engine.resetListeners.withLock { $0 = { [weak self] in self?.forgetHistory() ?? {} } }
    }

    /// A receipt (`MESSAGE_SENT_TO_DEVICE`) for a message the app server sent with
    /// `delivery_receipt_requested`, in CCS's form.
    static func receipt(messageID: String, token: String, category: String, at millis: Int64) -> Receipt {
        let id = "dr2:" + messageID
        var w = JSONWriter()
        w.beginObject()
        w.key("message_type"); w.value("receipt")
        w.key("message_id"); w.value(id)
        w.key("from"); w.value("gcm.googleapis.com")
        w.key("category"); w.value(category)
        w.key("data"); w.beginObject()
        w.key("message_status"); w.value("MESSAGE_SENT_TO_DEVICE")
        w.key("original_message_id"); w.value(messageID)
        w.key("device_registration_id"); w.value(token)
        w.key("message_sent_timestamp"); w.value(String(millis))
        w.endObject()
        w.endObject()
        return Receipt(id: id, json: w.string)
    }

    /// The connection of `sender` with the fewest unacked messages that is not draining (ties:
    /// the oldest id), as CCS spread its messages over an app server's connections.
    private static func leastBusy(_ ls: [String: Link], _ sender: String) -> XMPPConnection? {
        ls.values.filter { $0.connection.account == sender && !$0.draining }
            .min { ($0.outstanding.count, $0.connection.id) < ($1.outstanding.count, $1.connection.id) }?.connection
    }

    /// Sends a receipt on a connection of `sender`, or keeps it until one opens; dropped when a
    /// reset came since `generation` (by default: now).
    func sendReceipt(_ receipt: Receipt, sender: String, generation g: Int? = nil) {
        let current = { self.generation.load(ordering: .relaxed) }
        let g = g ?? current()
        let target = links.withLock { ls -> (stale: Bool, on: XMPPConnection?) in
            guard current() == g else { return (true, nil) }
            guard let c = Self.leastBusy(ls, sender) else { return (false, nil) }
            ls[c.id]?.outstanding[receipt.id] = .receipt(receipt)
            return (false, c)
        }
        if target.stale { return }
        guard let c = target.on else {
            queuedReceipts.withLock { q in
                if current() == g { q[sender, default: []].append(receipt) }
            }
            return
        }
        c.send("<message type=\"normal\"><gcm xmlns=\"\(Self.namespace)\">\(xmlEscapeText(receipt.json))</gcm></message>")
        stanzaLog("out", c, [("message_type", "receipt"), ("message_id", receipt.id)])
    }

    /// The access-log line of one stanza (info).
    private func stanzaLog(_ direction: String, _ c: XMPPConnection, _ fields: @autoclosure () -> [(String, String)]) {
        log.log(.info, "xmpp", [("dir", direction), ("conn", c.id), ("sender", c.account ?? "-")] + fields())
    }

    /// After a reset: receipts and upstream messages waiting for a connection or an ack are
    /// forgotten, so the next test does not get the last one's (the connections stay open).
    /// Returns what to do once the engine's lock is released: close the draining connections
    /// that now wait for nothing.
    func forgetHistory() -> @Sendable () -> Void {
        let draining = links.withLock { ls -> [XMPPConnection] in
            generation.add(1, ordering: .relaxed)
            for id in ls.keys { ls[id]?.outstanding.removeAll() }
            return ls.values.filter(\.draining).map(\.connection)
        }
        queuedReceipts.withLock { $0.removeAll() }
        awaitingDelivery.withLock { $0.removeAll() }
        return { [self] in for c in draining { finishDrainIfIdle(c) } }
    }

    /// Messages held by offline devices reached them: send the receipts that wait for them.
    func delivered(_ ids: [Int64]) {
        let due = awaitingDelivery.withLock { m in ids.compactMap { m.removeValue(forKey: $0) } }
        let now = engine.clock.nowMillis()
        for d in due {
            sendReceipt(Self.receipt(messageID: d.messageID, token: d.token, category: d.category, at: now), sender: d.sender)
        }
    }

    /// Receipts kept while the sender had no connection.
    func flushReceipts(_ sender: String) {
        let waiting = queuedReceipts.withLock { $0.removeValue(forKey: sender) ?? [] }
        for r in waiting { sendReceipt(r, sender: sender) }
    }

    /// Sends a sender's queued upstream messages on one of its connections (the least busy one
    /// that is not draining), as CCS spread them over an app server's connections.
    func dispatchUpstream(_ sender: String) {
        guard let c = links.withLock({ Self.leastBusy($0, sender) }) else { return }
        let batch = engine.takeQueuedUpstream(senderID: sender, connection: c.id)
        guard !batch.isEmpty else { return }
        links.withLock { ls in
            for u in batch { ls[c.id]?.outstanding[u.id] = .upstream(u.id, token: u.token) }
        }
        for u in batch {
            stanzaLog("out", c, [("message_type", "upstream"), ("message_id", u.id)])
            c.send("<message to=\"\(xmlEscape(sender))@fcm.googleapis.com\" from=\"devices@gcm.googleapis.com\" type=\"normal\">"
                + "<gcm xmlns=\"\(Self.namespace)\">\(xmlEscapeText(u.payload))</gcm></message>")
        }
        engine.events.publish(batch.map { u in
            var sent = u
            sent.status = "sent"
            return ("upstream.sent", sent.json)
        })
    }

    /// The link of a connection, for reading.
    func link(_ id: String) -> Link? { links.withLock { $0[id] } }

    /// Sends CONNECTION_DRAINING to one connection (or all when `id` is nil); afterwards they take
    /// no new downstream messages, still take acks, and close once nothing is pending. Returns the
    /// connections it drained.
    @discardableResult
    func drain(_ id: String?) -> [XMPPConnection] {
        let targets: [XMPPConnection] = links.withLock { ls in
            var out: [XMPPConnection] = []
            for (k, var l) in ls where (id == nil || k == id) && !l.draining {
                l.draining = true
                ls[k] = l
                out.append(l.connection)
            }
            return out
        }
        for c in targets {
            reply(c, [("message_type", .string("control")), ("control_type", .string("CONNECTION_DRAINING"))])
            finishDrainIfIdle(c)
        }
        return targets
    }

    /// A draining connection with nothing in flight and nothing awaiting an ack is closed.
    func finishDrainIfIdle(_ c: XMPPConnection) {
        let idle = links.withLock { ls -> Bool in
            guard let l = ls[c.id] else { return false }
            return Self.closable(l)
        }
        if idle { c.close() }
    }

    /// Whether a connection may close now: draining with nothing pending, or ended by the client
    /// with every message answered.
    private static func closable(_ l: Link) -> Bool {
        l.unanswered == 0 && (l.streamEnded || (l.draining && l.outstanding.isEmpty))
    }

    func streamEnded(_ c: XMPPConnection) -> Bool {
        let known = links.withLock { ls -> Bool in
            guard var l = ls[c.id] else { return false }
            l.streamEnded = true
            ls[c.id] = l
            return true
        }
        if known { finishDrainIfIdle(c) }
        return known
    }

    /// SASL PLAIN: `SENDER@fcm.googleapis.com`, `SENDER@gcm.googleapis.com` or the bare sender
    /// id, in the authzid or the authcid; the password is a server key of that sender.
    func authenticate(authzid: String, authcid: String, password: String) -> String? {
        func bare(_ s: String) -> String {
            for suffix in ["@fcm.googleapis.com", "@gcm.googleapis.com"] where s.hasSuffix(suffix) {
                return String(s.dropLast(suffix.count))
            }
            return s
        }
        let claimed = bare(authcid.isEmpty ? authzid : authcid)
        let ok = !claimed.isEmpty && !claimed.contains("@") && engine.senderID(forServerKey: password) == claimed
            && (authzid.isEmpty || bare(authzid) == claimed)
        log.log(.info, "xmpp", [("dir", "in"), ("stanza", "auth"), ("user", claimed.isEmpty ? "-" : claimed),
                                ("result", ok ? "success" : "not-authorized"), ("password", password.isEmpty ? "-" : Log.maskSecret(Substring(password)))])
        return ok ? claimed : nil
    }

    func opened(_ c: XMPPConnection) {
        let now = engine.clock.nowMillis()
        let limit = connectionsPerSender
        let admitted = links.withLock { ls -> Bool in
            if let sender = c.account, ls.values.lazy.filter({ $0.connection.account == sender }).count >= limit { return false }
            ls[c.id] = Link(connection: c, connectedAt: now)
            return true
        }
        guard admitted else {
            log.log(.warning, "xmpp", [("conn", c.id), ("sender", c.account ?? "-"), ("refused", "connection limit \(limit)")])
            return c.close(error: "policy-violation", text: "this sender id already holds \(limit) connections, the most CCS allows")
        }
        engine.events.publish([("xmpp.connected", connectionJSON(c))])
        if let sender = c.account {
            dispatchUpstream(sender)
            flushReceipts(sender)
        }
    }

    func closed(_ c: XMPPConnection) {
        let json = connectionJSON(c)
        let (removed, generationThen) = links.withLock { ls in (ls.removeValue(forKey: c.id), generation.load(ordering: .relaxed)) }
        guard let link = removed else { return }  // refused at opening
        engine.events.publish([("xmpp.closed", json)])
        // What the app server never acked goes to its next connection.
        let unacked = link.outstanding.values.compactMap { o -> String? in
            if case .upstream(let id, _) = o { return id }
            return nil
        }
        if !unacked.isEmpty {
            engine.requeueUpstream(unacked)
            if let sender = c.account { dispatchUpstream(sender) }
        }
        // Unacked receipts are sent again on the sender's next connection.
        let receipts = link.outstanding.values.compactMap { o -> Receipt? in
            if case .receipt(let r) = o { return r }
            return nil
        }
        if let sender = c.account {
            for r in receipts { sendReceipt(r, sender: sender, generation: generationThen) }
        }
    }

    func received(_ message: XMLElement, on c: XMPPConnection) {
        guard let sender = c.account else { return }
        guard let gcm = message.child("gcm") else {
            stanzaLog("in", c, [("stanza", "message"), ("ignored", "no gcm element")])
            return
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(gcm.text)
        } catch {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : \(error.message)")
        }
        guard let o = value.objectValue else {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : the payload is not a JSON object")
        }
        guard let messageID = o["message_id"]?.stringValue, !messageID.isEmpty else {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id")
        }
        if let type = o["message_type"]?.stringValue, type == "ack" || type == "nack" {
            // No answer goes back, so the stanza is logged here; a downstream message is logged
            // once, with its ack or nack, in `reply`.
            stanzaLog("in", c, [("message_type", type), ("message_id", messageID)])
            // The app server answers an upstream message or a receipt.
            // An upstream message's ack names the device that sent it in `to` (seeds Table 6); a
            // wrong or missing one is a BAD_ACK and the message still waits for its ack.
            let to = o["to"]?.stringValue
            let taken = links.withLock { ls -> (Outbound?, String?) in
                guard let known = ls[c.id]?.outstanding[messageID] else {
                    return (nil, "no upstream message or receipt with this message_id is waiting for an ack")
                }
                if case .upstream(_, let token) = known, to != token {
                    return (nil, to == nil ? "the ack of an upstream message needs to: the registration token of the device that sent it"
                        : "to is not the registration token of the device that sent this upstream message")
                }
                ls[c.id]?.outstanding[messageID] = nil
                return (known, nil)
            }
            guard let known = taken.0 else {
                return reply(c, ["message_type": .string("nack"), "from": .optionalString(to), "message_id": .string(messageID),
                                 "error": .string("BAD_ACK"), "error_description": .string(taken.1 ?? "")])
            }
            if case .upstream(let id, _) = known { engine.upstreamAcked(id, nacked: type == "nack") }
            finishDrainIfIdle(c)
            return
        }
        // Every nack names the message's `to` when it has one (seeds: `from` is required).
        let to = o["to"]?.stringValue
        // Flow control and draining: a refused message is nacked, never silently dropped.
        enum Admission { case taken, draining, windowFull, noLink }
        let admission = links.withLock { ls -> Admission in
            guard var l = ls[c.id] else { return .noLink }
            if l.draining { return .draining }
            if l.inFlight >= Self.window { return .windowFull }
            l.inFlight += 1
            l.unanswered += 1
            ls[c.id] = l
            return .taken
        }
        switch admission {
        case .taken:
            break
        case .noLink:
            // Refused at opening (over the per-sender limit) and closing: what it sent
            // meanwhile is not taken.
            return
        case .draining:
            return refuse(c, messageID, raw: gcm.text, from: to, code: "CONNECTION_DRAINING",
                          description: "the connection is draining: open another")
        case .windowFull:
            return refuse(c, messageID, raw: gcm.text, from: to, code: "SERVICE_UNAVAILABLE",
                          description: "more than \(Self.window) messages waiting for an ack on this connection")
        }
        var settled = false
        defer {
            if !settled {
                release(c)
                answered(c)
            }
        }
        if o["registration_ids"] != nil {
            return refuse(c, messageID, raw: gcm.text, from: to, code: "INVALID_JSON", description: "registration_ids is not supported over XMPP: use to")
        }
        let outcome = SendParser.parseJSON(value, extraFields: ["message_id", "delivery_receipt_requested", "message_type"])
        let req: SendRequest
        switch outcome {
        case .badRequest(let reason):
            return refuse(c, messageID, raw: gcm.text, from: to, code: "INVALID_JSON", description: reason)
        case .invalidParameters(let detail):
            return refuse(c, messageID, raw: gcm.text, from: to, code: "INVALID_JSON", description: detail)
        case .request(let r):
            req = r
        }
        if let reason = req.target.invalidReason(maxConditionOperators: engine.maxConditionOperators) {
            return refuse(c, messageID, raw: gcm.text, from: to, code: "INVALID_JSON", description: reason)
        }
        let target = req.target.value
        if let v = o["delivery_receipt_requested"], v.boolValue == nil {
            return refuse(c, messageID, raw: gcm.text, from: target, code: "INVALID_JSON", description: "delivery_receipt_requested must be true or false")
        }
        let wantsReceipt = o["delivery_receipt_requested"]?.boolValue ?? false
        var lateBy: Int64 = 0
        var delayFault: String?
        if let f = engine.fireRequestFault(transport: .xmpp, path: "", senderID: sender, tokens: req.target.tokens, topic: req.target.topicName) {
            switch f.action {
            case .status:
                return refuse(c, messageID, raw: gcm.text, from: target, code: "SERVICE_UNAVAILABLE", description: "fault \(f.id)", fault: f.id)
            case .closeConnection:
                refuse(c, messageID, raw: gcm.text, from: target, code: "ConnectionClosed",
                       description: "fault \(f.id) closed the connection without an answer", fault: f.id, answer: false)
                return c.drop()
            case .delay(let ms):
                lateBy = ms
                delayFault = f.id
            case .error:
                break
            }
        }
        let delayMs = lateBy
        settled = true
        engine.send(req, senderID: sender, transport: .xmpp, path: "", requestFault: delayFault, clientMessageID: messageID) { [self] result in
            let answer: @Sendable () -> Void
            switch result {
            case .failure:
                answer = { self.nack(c, messageID, from: target, code: "INTERNAL_SERVER_ERROR", description: "the store failed") }
            case .success(let r):
                if let e = r.topicError {
                    answer = { self.nack(c, messageID, from: target, code: e.xmppCode, description: e.rawValue) }
                } else if r.group != nil || r.results.isEmpty {
                    answer = { self.reply(c, ["message_type": .string("ack"), "from": .optionalString(target), "message_id": .string(messageID)]) }
                } else if let e = r.results[0].error {
                    let code = e == .missingRegistration ? "INVALID_JSON" : e.xmppCode
                    answer = { self.nack(c, messageID, from: target, code: code, description: e.rawValue) }
                } else {
                    var fields: [(String, JSONValue)] = [("message_type", .string("ack")), ("from", .optionalString(target)),
                                                         ("message_id", .string(messageID))]
                    if let canonical = r.results[0].canonicalToken { fields.append(("registration_id", .string(canonical))) }
                    let ack = fields
                    let first = r.results[0]
                    let receipt: Receipt?
                    if wantsReceipt, let token = first.deliveredTo, let deliveryID = first.deliveryID, !req.options.dryRun {
                        let category = (try? engine.device(token).app) ?? "unknown.app"
                        if first.deliveryStatus == "delivered" {
                            receipt = Self.receipt(messageID: messageID, token: token, category: category, at: engine.clock.nowMillis())
                        } else {
                            if first.deliveryStatus == "pending" {
                                let later = PendingReceipt(sender: sender, messageID: messageID, token: token, category: category)
                                awaitingDelivery.withLock { $0[deliveryID] = later }
                            }
                            receipt = nil
                        }
                    } else {
                        receipt = nil
                    }
                    answer = {
                        self.reply(c, ack)
                        if let receipt { self.sendReceipt(receipt, sender: sender) }
                    }
                }
            }
            // The window opens before the answer leaves: a client that sends its next message
            // the moment it reads this ack must find room for it.
            if delayMs > 0 {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(delayMs))) {
                    self.release(c)
                    answer()
                    self.answered(c)
                }
            } else {
                release(c)
                answer()
                answered(c)
            }
        }
    }

    /// One downstream message of `c` is about to be answered: its slot in the window opens.
    private func release(_ c: XMPPConnection) {
        links.withLock { ls in
            if var l = ls[c.id] {
                l.inFlight = max(0, l.inFlight - 1)
                ls[c.id] = l
            }
        }
    }

    /// One downstream message of `c` has been answered: a draining or ended connection may close.
    private func answered(_ c: XMPPConnection) {
        let idle = links.withLock { ls -> Bool in
            guard var l = ls[c.id] else { return false }
            l.unanswered = max(0, l.unanswered - 1)
            ls[c.id] = l
            return Self.closable(l)
        }
        if idle { c.close() }
    }

    /// A downstream message refused before it reached the send path: kept as a rejected record
    /// (with the fault that refused it, if one did), as over HTTP, then nacked unless `answer` is
    /// false (a connection closed on purpose).
    private func refuse(_ c: XMPPConnection, _ messageID: String, raw: String, from: String?, code: String, description: String,
                        fault: String? = nil, answer: Bool = true) {
        _ = try? engine.recordRejected(senderID: c.account, transport: .xmpp, format: .json, httpStatus: 0, error: code,
                                       detail: description, raw: String(raw.prefix(4096)), fault: fault,
                                       clientMessageID: messageID)
        if answer { nack(c, messageID, from: from, code: code, description: description) }
    }

    private func nack(_ c: XMPPConnection, _ messageID: String, from: String?, code: String, description: String) {
        reply(c, [("message_type", .string("nack")), ("from", .optionalString(from)), ("message_id", .string(messageID)),
                  ("error", .string(code)), ("error_description", .string(description))])
    }

    private func reply(_ c: XMPPConnection, _ fields: KeyValuePairs<String, JSONValue>) {
        reply(c, fields.map { ($0.key, $0.value) })
    }

    /// `<message><data:gcm xmlns:data="google:mobile:data">{…}</data:gcm></message>`, without the
    /// fields that are null.
    private func reply(_ c: XMPPConnection, _ fields: [(String, JSONValue)]) {
        let json = JSONValue.object(JSONObject(fields.filter { !$0.1.isNull })).serialized()
        stanzaLog("in", c, Self.answerLog(fields))
        c.send("<message><data:gcm xmlns:data=\"\(Self.namespace)\">\(xmlEscapeText(json))</data:gcm></message>")
    }

    /// The log fields of a downstream message answered with `fields` (an ack, a nack, or a
    /// control message).
    private static func answerLog(_ fields: [(String, JSONValue)]) -> [(String, String)] {
        func field(_ k: String) -> String? { fields.first { $0.0 == k }?.1.stringValue }
        let type = field("message_type") ?? "-"
        guard type == "ack" || type == "nack" else { return [("message_type", type), ("control_type", field("control_type") ?? "-")] }
        var out = [("message_type", "downstream"), ("message_id", field("message_id") ?? "-"), ("to", field("from") ?? "-"), ("result", type)]
        if let e = field("error") { out.append(("error", e)) }
        return out
    }

    /// A stanza that cannot be answered by message id: echoed with `type="error"`.
    private func errorEcho(_ message: XMLElement, _ c: XMPPConnection, _ text: String) {
        var echo = message
        echo.attributes["type"] = "error"
        echo.children.append(XMLElement(name: "error", attributes: ["code": "400", "type": "modify"], children: [
            XMLElement(name: "bad-request", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"]),
            XMLElement(name: "text", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"], text: text),
        ]))
        stanzaLog("out", c, [("stanza", "message"), ("type", "error"), ("text", text)])
        c.send(echo.xml)
    }

    func connectionJSON(_ c: XMPPConnection) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.value(c.id)
        w.key("sender_id"); w.value(c.account)
        w.key("resource"); w.value(c.resource)
        let l = link(c.id)
        w.key("connected_at"); w.value(rfc3339(millis: l?.connectedAt ?? engine.clock.nowMillis()))
        w.key("unacked"); w.value(l?.outstanding.count ?? 0)
        w.key("draining"); w.value(l?.draining ?? false)
        w.key("tls"); w.value(c.isTLS)
        w.endObject()
        return w.string
    }
}

extension JSONValue {
    /// `.string` for a value, `.null` for nil.
    static func optionalString(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
}
