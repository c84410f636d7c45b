// Long because: MCS's side of the room: logins checked against checkins, what each write
// becomes as a DataMessageStanza (FCM's data and notification messages, relayed Web Push pushes,
// deleted-messages notices), and acknowledgements by packet number or persistent id, share one
// connection table.
public import FCMEngine
import FCMModel
public import MCSServer
public import RoomKit
import Dispatch
import FCMCore
import Platform
import Synchronization

/// The MCS side of FCM's device side (docs/real-clients.md): a GCM client's logins, and the
/// pushes the engine decides for its registrations, written as `DataMessageStanza`s;
/// acknowledgements (SelectiveAck, a stream id, a login's received ids) settle them.
public final class GCMDelivery: MCSDelegate {
    let engine: Engine
    let log: Log
    /// Per connection: its MCS connection and the versions written by server packet number.
    private let connections = Mutex<[String: Session]>([:])

    struct Session {
        let connection: MCSConnection
        var ledger = PacketLedger()
    }

    public init(engine: Engine, log: Log) {
        self.engine = engine
        self.log = log
        engine.setClientRoom(.gcm) { [weak self] orders in self?.deliver(orders) }
    }

    // MARK: MCSDelegate

    public func nowMillis() -> Int64 { engine.clock.nowMillis() }

    public func login(_ request: LoginRequest, on connection: MCSConnection) -> MCSLoginVerdict {
        // Chromium and firebase-messaging log in with their checkin's android id (auth_service 2).
        guard request.authService == .androidID else {
            log.info("mcs login refused", [("conn", connection.id), ("android_id", request.user), ("remote", connection.remote),
                                           ("reason", "auth_service is not 2")])
            return .refuse(code: 401, message: "auth_service must be 2 (ANDROID_ID)")
        }
        guard engine.gcmAuthenticates(androidID: request.user, securityToken: request.authToken) else {
            log.info("mcs login refused", [("conn", connection.id), ("android_id", request.user), ("remote", connection.remote)])
            return .refuse(code: 401, message: "the android id and security token are no checkin's")
        }
        return .accept
    }

    public func loggedIn(_ connection: MCSConnection) {
        guard let request = connection.loginRequest else { return }
        let info = ClientConnectionInfo(id: connection.id, remote: connection.remote, tls: true, userAgent: nil, clientVersion: request.id)
        // The session first: once the engine has the connection, a send may write on it before
        // clientHello returns, and a write finds its connection here.
        connections.withLock { $0[connection.id] = Session(connection: connection) }
        let hello: ClientHello?
        do {
            hello = try engine.clientHello(kind: .gcm, id: request.user, connection: info, received: request.receivedPersistentIDs, newID: nil)
        } catch {
            return connection.close(sendingClose: true, reason: "the store failed")
        }
        guard let hello else { return connection.close(sendingClose: true, reason: "the client was forgotten") }
        let older = connections.withLock { c in hello.replaced.flatMap { c[$0]?.connection } }
        log.info("mcs", [("dir", "in"), ("conn", connection.id), ("android_id", request.user), ("tag", "LoginRequest"),
                         ("received_persistent_ids", String(request.receivedPersistentIDs.count))])
        older?.close(sendingClose: true, reason: "replaced by a newer login of this android id")
        deliver(hello.orders)
    }

    public func acknowledged(throughServerPacket n: Int, carriedBy tag: MCSTag, ext: Int32?, on connection: MCSConnection) {
        log.log(.debug, "mcs", [("dir", "in"), ("conn", connection.id), ("android_id", connection.user ?? ""), ("tag", tag.protoName),
                                ("last_stream_id_received", String(n))])
        let versions = connections.withLock { c -> [String] in
            guard let i = c.index(forKey: connection.id) else { return [] }
            return c.values[i].ledger.acknowledge(through: n, by: (tag, ext))
        }
        guard !versions.isEmpty else {
            // A frame that settled nothing still shows the client alive (`last_frame_at`); a
            // heartbeat says so itself.
            if tag != .heartbeatPing && tag != .heartbeatAck, let user = connection.user {
                engine.clientActive(clientID: user, connectionID: connection.id, heartbeat: false)
            }
            return
        }
        acknowledge(versions, by: "stream_ack", frame: Self.frame(tag, ext, n), on: connection)
    }

    /// How an acknowledging packet shows in the log line (`tag=IqStanza ext=13 last_stream_id_received=2`).
    static func frame(_ tag: MCSTag, _ ext: Int32?, _ n: Int) -> [(String, String)] {
        var frame = [("tag", tag.protoName)]
        if let ext { frame.append(("ext", String(ext))) }
        frame.append(("last_stream_id_received", String(n)))
        return frame
    }

    public func selectiveAck(ids: [String], on connection: MCSConnection) {
        connections.withLock { c in
            guard let i = c.index(forKey: connection.id) else { return }
            c.values[i].ledger.forget(ids)
        }
        acknowledge(ids, by: "selective_ack", frame: [("tag", "IqStanza"), ("ext", String(Extension.selectiveAck)), ("persistent_ids", ids.joined(separator: ","))],
                    on: connection)
    }

    public func nudged(_ connection: MCSConnection) {
        log.log(.debug, "mcs", [("dir", "out"), ("conn", connection.id), ("android_id", connection.user ?? ""), ("tag", "HeartbeatPing"),
                                ("why", "no packet since a push asked for an immediate ack")])
    }

    public func heartbeat(on connection: MCSConnection) {
        guard let user = connection.user else { return }
        engine.clientActive(clientID: user, connectionID: connection.id, heartbeat: true)
    }

    public func closed(_ connection: MCSConnection, reason: String) {
        connections.withLock { _ = $0.removeValue(forKey: connection.id) }
        log.info("mcs connection closed", [("conn", connection.id), ("android_id", connection.loginRequest?.user ?? ""), ("remote", connection.remote),
                                           ("reason", reason)])
        guard let user = connection.user else {
            return engine.unnamedClientClosed(kind: .gcm, connectionID: connection.id, userAgent: nil, code: 0, reason: reason)
        }
        engine.clientClosed(clientID: user, connectionID: connection.id, code: 0, reason: reason)
    }

    /// Records the acknowledgements one client frame made: one `info` line for the frame (as
    /// docs/real-clients.md shows it: `tag=IqStanza ext=13 last_stream_id_received=2`, with how
    /// many deliveries it settled), one `debug` line for each delivery.
    private func acknowledge(_ versions: [String], by: String, frame: [(String, String)], on connection: MCSConnection) {
        guard let user = connection.user, !versions.isEmpty,
              let r = try? engine.clientAcknowledged(clientID: user, connectionID: connection.id, versions: versions, code: nil, nack: false, by: by)
        else { return }
        let settled = r.settled.count
        for v in r.settled {
            log.log(.debug, "mcs", [("dir", "in"), ("conn", connection.id), ("android_id", user), ("ack", by), ("persistent_id", v)])
        }
        if settled > 0 {
            log.info("mcs", {
                // One array, sized once, for the line's fields.
                var fields = [(String, String)]()
                fields.reserveCapacity(frame.count + 4)
                fields.append(("dir", "in"))
                fields.append(("conn", connection.id))
                fields.append(("android_id", user))
                fields.append(contentsOf: frame)
                fields.append(("delivered", String(settled)))
                return fields
            }())
        }
        deliver(r.orders)
    }

    // MARK: Writes

    /// Connections open now.
    public var openConnections: Int { connections.withLock { $0.count } }

    func deliver(_ orders: ClientOrders) {
        for w in orders.writes {
            if let ms = w.delayMillis, ms > 0 {
                // `sent` from when it is written (the engine says whether it is still wanted).
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(ms))) { [self] in
                    if engine.delayedWriteDue(w) { write(w) }
                }
            } else {
                write(w)
            }
        }
        for close in orders.close {
            let c = connections.withLock { $0[close.connectionID]?.connection }
            c?.close(sendingClose: true, reason: close.reason)
        }
    }

    private func write(_ w: ClientWrite) {
        guard let connection = connections.withLock({ $0[w.connectionID]?.connection }) else { return }
        guard let stanza = stanza(for: w) else {
            log.warning("mcs could not build a delivery", [("conn", w.connectionID), ("persistent_id", w.version)])
            return
        }
        // The packet number is known once queued, and the loop may write the packet and read its
        // acknowledgement before this thread records it: under the one lock, either the
        // acknowledgement finds the record or the record finds the acknowledgement.
        let n = connection.send(stanza)
        guard n > 0 else { return }
        let early = connections.withLock { c -> (tag: MCSTag, ext: Int32?, through: Int)? in
            // One lookup, and the session changed in place (a copy held here would make the
            // insert copy its table).
            guard let i = c.index(forKey: w.connectionID) else { return nil }
            return c.values[i].ledger.record(n, version: w.version)
        }
        log.log(.debug, "mcs", [("dir", "out"), ("conn", w.connectionID), ("android_id", w.clientID), ("tag", "DataMessageStanza"),
                         ("persistent_id", w.version), ("packet", String(n))])
        if let early {
            // Recorded off this thread: a send's write runs within its commit, and what the
            // acknowledgement releases is committed before it is written.
            DispatchQueue.global().async { [self] in
                acknowledge([w.version], by: "stream_ack", frame: Self.frame(early.tag, early.ext, early.through), on: connection)
            }
        }
    }

    /// What a registration receives (docs/real-clients.md, "What a registration receives").
    func stanza(for w: ClientWrite) -> DataMessageStanza? {
        // A send's write carries its entry; one re-sent from held reads it back.
        guard let entry = w.entry ?? (try? engine.inboxEntry(w.deviceToken, messageID: w.version)) else { return nil }
        let registration = w.registration
        let accepted = entry.acceptedAtMillis
        let sender = w.senderID ?? (try? engine.device(w.deviceToken))?.senderID ?? ""
        var s = DataMessageStanza(from: sender, category: registration?.app ?? "")
        s.id = w.version
        s.persistentID = w.version
        s.to = w.token
        // A `deleted_messages` notice never expires; it travels with FCM's default time to live.
        s.ttl = entry.deletedMessages != nil ? Int32(SendOptions.defaultTimeToLive)
            : Int32(clamping: max(0, (entry.expiresAtMillis - accepted) / 1000))
        s.sent = accepted
        s.immediateAck = true
        var data: [AppData] = []
        if let total = entry.deletedMessages {
            // A notice is the service's own: its two pairs alone, the registration's subtype not
            // among them.
            data.append(AppData(key: "message_type", value: "deleted_messages"))
            data.append(AppData(key: "total_deleted", value: String(total)))
            s.appData = data
            return s
        }
        if let subtype = registration?.subtype { data.append(AppData(key: "subtype", value: subtype)) }
        if w.device?.kind == .fcm {
            // An FCM registration over this `wp:` one: FCM's JSON, encrypted by the mock as Google
            // does (`aesgcm`; salt and key padded, as firebase-messaging decodes them).
            guard let relay = engine.fcmRelay(for: w) else { return nil }
            // From the subscription's sender (its VAPID key), as a relayed push: Chromium finds
            // the subscription's keys by it, and decrypts nothing it finds none for
            // (firebase-messaging reads the sender from the payload's `from`).
            s.from = registration?.sender ?? sender
            data.append(AppData(key: "content-encoding", value: "aesgcm"))
            data.append(AppData(key: "encryption", value: "salt=" + Self.padded(relay.salt)))
            data.append(AppData(key: "crypto-key", value: "dh=" + Self.padded(relay.dh)))
            s.rawData = relay.body
        } else if entry.isWebPush {
            // A Web Push push relayed to a `wp:` registration: the body and its coding unchanged.
            s.from = registration?.sender ?? sender
            let p = w.payload ?? ClientPayload(webPushBlock: entry.webPushBlock)
            let (body, fields) = (p.body, p.fields)
            for (k, v) in fields {
                data.append(AppData(key: k == "encoding" ? "content-encoding" : k == "crypto_key" ? "crypto-key" : k, value: v))
            }
            s.rawData = body
        } else if let effective = entry.effective {
            if let key = effective["collapse_key"]?.stringValue { s.token = key }
            for m in effective["data"]?.objectValue?.members ?? [] { data.append(AppData(key: m.key, value: Self.text(m.value))) }
            if let n = effective["notification"]?.objectValue, n.count > 0 {
                data.append(AppData(key: "gcm.n.e", value: "1"))
                for m in n.members { data.append(AppData(key: "gcm.notification." + m.key, value: Self.text(m.value))) }
            }
        }
        s.appData = data
        return s
    }

    /// base64url with `=` padding.
    static func padded(_ bytes: [UInt8]) -> String {
        let text = base64URLEncode(bytes)
        return text + String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
    }

    /// A value as app data carries it: a string as it is, anything else as JSON text.
    static func text(_ v: JSONValue) -> String {
        v.stringValue ?? v.serialized()
    }
}

/// A connection's written, unacknowledged pushes by server packet number, and the highest packet
/// the client acknowledged by number. The loop can write a packet and read the client's
/// acknowledgement of it before the thread that queued it records its number: whichever of the
/// two comes second settles the push (pure; the room keeps one per connection under its lock).
struct PacketLedger {
    /// Server packet number → version, for those not acknowledged yet.
    private(set) var written: [Int: String] = [:]
    /// The highest packet acknowledged by number, and the client packet that did.
    private(set) var ackedThrough = 0
    private(set) var ackedBy: (tag: MCSTag, ext: Int32?) = (.iqStanza, nil)

    /// The client has every server packet through `n`: the versions recorded up to it, in packet
    /// order, taken off the ledger.
    mutating func acknowledge(through n: Int, by: (tag: MCSTag, ext: Int32?)) -> [String] {
        if n > ackedThrough { (ackedThrough, ackedBy) = (n, by) }
        guard written.keys.contains(where: { $0 <= n }) else { return [] }
        return written.keys.filter { $0 <= n }.sorted().compactMap { written.removeValue(forKey: $0) }
    }

    /// Records `version` as written in packet `n`; when that packet was acknowledged already, it
    /// is not kept and what acknowledged it is returned (the push is settled at once).
    mutating func record(_ n: Int, version: String) -> (tag: MCSTag, ext: Int32?, through: Int)? {
        if ackedThrough >= n { return (ackedBy.tag, ackedBy.ext, ackedThrough) }
        written[n] = version
        return nil
    }

    /// Versions a SelectiveAck named: off the ledger.
    mutating func forget(_ ids: [String]) {
        for (n, version) in written where ids.contains(version) { written[n] = nil }
    }
}
