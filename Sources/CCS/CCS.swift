public import FCMModel
public import RoomKit
import FCMStore
public import FCMEngine
import Dispatch
import FCMCore
import Platform
import Synchronization
public import XMPPServer

/// The FCM connection server (CCS) on top of the XMPP listener: app servers authenticate with a
/// sender id and server key, send downstream messages as JSON in `<gcm>` elements, and get acks
/// and nacks. Downstream messages go through the very same send path as HTTP.
public final class CCS: XMPPDelegate {
    /// How XMPP records show: the client's `message_id` where HTTP's show a status.
    public static let recordForm = RecordForm(byClientMessageID: true)
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
    /// How many receipts may wait before those whose delivery ended otherwise (expired,
    /// collapsed, dropped, deleted: no receipt will ever be due) are let go; doubled past what
    /// stays after each pruning, so a pruning's store reads cost a constant share of the sends.
    let awaitingPruneAt = Atomic<Int>(CCS.awaitingPruneFloor)
    static let awaitingPruneFloor = 1024
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

    public init(engine: Engine, log: Log = Log(level: "warning"), connectionsPerSender: Int = 1000) {
        self.engine = engine
        self.log = log
        self.connectionsPerSender = connectionsPerSender
        engine.upstreamDispatch.withLock { $0 = Handler { [weak self] sender in self?.dispatchUpstream(sender) } }
        engine.lateDeliveries.withLock { $0 = Handler { [weak self] ids in self?.delivered(ids) } }
        engine.resetListeners.withLock { $0 = Handler { [weak self] in self?.forgetHistory() ?? {} } }
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
    func stanzaLog(_ direction: String, _ c: XMPPConnection, _ fields: @autoclosure () -> [(String, String)]) {
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

    /// Lets go of awaited receipts whose delivery ended without reaching its device, once there
    /// are `awaitingPruneAt` of them (the engine tells only of deliveries that arrive).
    /// Called in a send's commit completion: the store reads run on a thread of their own, one
    /// pruning at a time, so no commit waits for them.
    func pruneAwaitedIfDue() {
        let due = awaitingDelivery.withLock { $0.count } >= awaitingPruneAt.load(ordering: .relaxed)
        guard due, !pruning.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.global().async { [self] in
            let ids = awaitingDelivery.withLock { Array($0.keys) }
            let ended = engine.deliveriesEndedUndelivered(ids)
            let left = awaitingDelivery.withLock { m in
                for id in ended { m.removeValue(forKey: id) }
                return m.count
            }
            awaitingPruneAt.store(max(Self.awaitingPruneFloor, left * 2), ordering: .relaxed)
            pruning.store(false, ordering: .releasing)
        }
    }

    /// A pruning of awaited receipts is under way.
    private let pruning = Atomic<Bool>(false)

    /// How many delivery receipts wait for their message to reach its device.
    package var awaitedReceiptCount: Int { awaitingDelivery.withLock { $0.count } }

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
    /// connections it drained as the control API shows them, taken before an idle one closes (so
    /// they read `draining: true`).
    @discardableResult
    public func drain(_ id: String?) -> [String] {
        let targets: [XMPPConnection] = links.withLock { ls in
            var out: [XMPPConnection] = []
            for (k, var l) in ls where (id == nil || k == id) && !l.draining {
                l.draining = true
                ls[k] = l
                out.append(l.connection)
            }
            return out
        }
        let shown = targets.map(connectionJSON)
        for c in targets {
            reply(c, [("message_type", .string("control")), ("control_type", .string("CONNECTION_DRAINING"))])
            finishDrainIfIdle(c)
        }
        return shown
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
    static func closable(_ l: Link) -> Bool {
        l.unanswered == 0 && (l.streamEnded || (l.draining && l.outstanding.isEmpty))
    }

    public func streamEnded(_ c: XMPPConnection) -> Bool {
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
    public func authenticate(authzid: String, authcid: String, password: String) -> String? {
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

    public func opened(_ c: XMPPConnection) {
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

    public func closed(_ c: XMPPConnection) {
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

    public func connectionJSON(_ c: XMPPConnection) -> String {
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

extension UpstreamMessage {
    /// The stanza's JSON, as CCS delivered upstream messages.
    var payload: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("data"); w.raw(data)
        w.key("time_to_live"); w.value(timeToLive)
        w.key("from"); w.value(token)
        w.key("message_id"); w.value(id)
        w.key("category"); w.value(category)
        w.endObject()
        return w.string
    }
}
