// Long because: one connection's protocol (hello, register, unregister, ack, nack, ping) and its
// refusals share the session's state; each message's handling is a function of its own.
import FCMCore
import FCMEngine
import FCMModel
import HTTPServer
import RoomKit
import Synchronization

/// One browser's autopush connection: its messages in, its answers and pushes out.
///
/// The handler's calls come on the connection's loop thread; pushes come from the engine on any
/// thread (`write`), so what both touch is under `state`. Pushes decided before the hello's
/// answer is written wait for it (the browser must read the hello first).
final class AutopushSession: WebSocketHandler {
    let room: AutopushRoom
    let target: AutopushTarget
    let userAgent: String?
    private let state = Mutex<State>(State())

    struct State {
        var ws: WebSocketConnection?
        var clientID: String?
        /// The hello's answer is written: pushes go out as they come.
        var greeted = false
        var waiting: [ClientWrite] = []
        var ended = false
    }

    init(room: AutopushRoom, target: AutopushTarget, userAgent: String?) {
        self.room = room
        self.target = target
        self.userAgent = userAgent
    }

    /// The connection's name (`ws3`).
    var connectionID: String? { state.withLock { s in s.ws.map { "ws\($0.id)" } } }

    // MARK: WebSocketHandler

    func opened(_ ws: WebSocketConnection) {
        state.withLock { $0.ws = ws }
        room.byConnection.withLock { $0["ws\(ws.id)"] = self }
        room.open.add(1, ordering: .relaxed)
        room.log.info("autopush connection opened", [("conn", "ws\(ws.id)"), ("remote", ws.remote), ("tls", String(ws.isSecure)),
                                                     ("user_agent", userAgent ?? "")])
    }

    func sawFrame(on ws: WebSocketConnection) {}

    func closed(_ ws: WebSocketConnection, code: UInt16, reason: String) {
        let clientID = state.withLock { s -> String? in
            s.ended = true
            s.waiting = []
            return s.clientID
        }
        room.open.subtract(1, ordering: .relaxed)
        room.byConnection.withLock { _ = $0.removeValue(forKey: "ws\(ws.id)") }
        room.log.info("autopush connection closed", [("conn", "ws\(ws.id)"), ("uaid", clientID ?? ""), ("code", String(code)), ("reason", reason)])
        guard let clientID else {
            return room.engine.unnamedClientClosed(kind: .autopush, connectionID: "ws\(ws.id)", userAgent: userAgent, code: Int(code),
                                                   reason: reason)
        }
        room.release(self, clientID: clientID)
        room.engine.clientClosed(clientID: clientID, connectionID: "ws\(ws.id)", code: Int(code), reason: reason)
    }

    func received(_ text: String, on ws: WebSocketConnection) {
        let message: AutopushMessage.Incoming
        switch AutopushMessage.parse(text) {
        case .failure(let close): return end(ws, close)
        case .success(let m): message = m
        }
        let (clientID, greeted) = state.withLock { ($0.clientID, $0.greeted) }
        guard greeted, let clientID else {
            guard message.type == "hello" else {
                return end(ws, .policy("the first message must be a hello, not \(message.type.map { "a \($0)" } ?? "a ping")"))
            }
            return hello(message, ws)
        }
        let conn = "ws\(ws.id)"
        if message.isPing {
            ws.send(text: "{}")
            room.engine.clientActive(clientID: clientID, connectionID: conn, heartbeat: true)
            return
        }
        room.engine.clientActive(clientID: clientID, connectionID: conn, heartbeat: false)
        switch message.type {
        case "hello":
            ws.send(text: AutopushMessage.refused("hello", channelID: nil, status: 401, reason: "duplicate hello"))
            end(ws, .normal("duplicate hello"))
        case "register": register(message, clientID: clientID, ws)
        case "unregister": unregister(message, clientID: clientID, ws)
        case "ack": ack(message, clientID: clientID, ws)
        case "nack": nack(message, clientID: clientID, ws)
        case "broadcast_subscribe":
            // The mock has no broadcasts (Firefox uses them for Remote Settings).
            break
        case let other?: end(ws, .policy("unknown messageType '\(other)'"))
        case nil: end(ws, .policy("a message without messageType (only {} is a ping)"))
        }
    }

    // MARK: Messages

    private func hello(_ m: AutopushMessage.Incoming, _ ws: WebSocketConnection) {
        guard m.object["use_webpush"]?.boolValue == true else {
            ws.send(text: AutopushMessage.refused("hello", channelID: nil, status: 401, reason: "Simplepush not supported"))
            return end(ws, .normal("Simplepush not supported"))
        }
        let asked = m.string("uaid").flatMap { AutopushMessage.isUAID($0) ? $0 : nil }
        let conn = "ws\(ws.id)"
        let info = ClientConnectionInfo(id: conn, remote: ws.remote, tls: ws.isSecure, userAgent: userAgent)
        let hello: ClientHello
        do {
            // A new uaid is made whenever the one asked for is unknown: never nil.
            guard let h = try room.engine.clientHello(kind: .autopush, id: asked, connection: info, newID: AutopushRoom.newUAID) else {
                return end(ws, .policy("the server could not keep the hello"))
            }
            hello = h
        } catch {
            room.log.warning("autopush hello failed", [("conn", conn), ("error", String(describing: error))])
            return end(ws, .policy("the server could not keep the hello (the store failed)"))
        }
        state.withLock { $0.clientID = hello.clientID }
        // The older connection of this uaid goes; this one took over what it had unacknowledged.
        let older = room.sessions.withLock { s -> AutopushSession? in
            defer { s[hello.clientID] = self }
            return s[hello.clientID]
        }
        if let older, older !== self { older.close(code: 1000, reason: "replaced by a newer connection of this uaid") }
        ws.send(text: AutopushMessage.hello(uaid: hello.clientID))
        room.log.info("autopush", [("dir", "in"), ("conn", conn), ("uaid", hello.clientID), ("messageType", "hello"),
                                   ("status", "200"), ("new_uaid", String(hello.isNew))])
        let waiting = state.withLock { s -> [ClientWrite] in
            s.greeted = true
            defer { s.waiting = [] }
            return s.waiting
        }
        // What waited for the answer has had its fault's delay, if any.
        write(hello.orders, then: waiting, on: ws)
    }

    private func register(_ m: AutopushMessage.Incoming, clientID: String, _ ws: WebSocketConnection) {
        guard let channelID = checkedChannel(m, type: "register", ws) else { return }
        let conn = "ws\(ws.id)"
        let key = m.string("key")
        if m.object["key"] != nil && key == nil {
            return refuse("register", channelID: channelID, status: 400, reason: "invalid key: key must be a string", clientID: clientID, ws)
        }
        // Firefox leaves `key` out when there is none; an empty one, or one in standard base64,
        // is no base64url P-256 point.
        if let key, key.isEmpty || key.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }) {
            return refuse("register", channelID: channelID, status: 400,
                          reason: "invalid key: a P-256 public key is 65 bytes, 0x04 first, in base64url", clientID: clientID, ws)
        }
        do {
            let device = try room.engine.clientRegister(clientID: clientID, channelID: channelID, key: key, senderID: target.senderID,
                                                        app: target.app, endpoint: { target.endpointPrefix + $0 })
            let endpoint = device.client?.endpoint ?? ""
            ws.send(text: AutopushMessage.registered(channelID: channelID, endpoint: endpoint))
            room.log.info("autopush", [("dir", "in"), ("conn", conn), ("uaid", clientID), ("messageType", "register"),
                                       ("channelID", channelID), ("status", "200"), ("token", device.token)])
        } catch {
            switch error {
            case .channelInUse: refuse("register", channelID: channelID, status: 409, reason: "channelID in use", clientID: clientID, ws)
            case .invalidKey(let why): refuse("register", channelID: channelID, status: 400, reason: "invalid key: " + why, clientID: clientID, ws)
            case .unknownClient: end(ws, .normal("the client was forgotten"))
            case .failed(let why): refuse("register", channelID: channelID, status: 500, reason: why, clientID: clientID, ws)
            }
        }
    }

    private func unregister(_ m: AutopushMessage.Incoming, clientID: String, _ ws: WebSocketConnection) {
        guard let channelID = checkedChannel(m, type: "unregister", ws) else { return }
        let code = m.int("code")
        // Without a code, autopush's unregister means 200: the user unsubscribed.
        let device = try? room.engine.clientUnregister(clientID: clientID, channelID: channelID, code: code ?? 200)
        ws.send(text: AutopushMessage.unregistered(channelID: channelID))
        room.log.info("autopush", [("dir", "in"), ("conn", "ws\(ws.id)"), ("uaid", clientID), ("messageType", "unregister"),
                                   ("channelID", channelID), ("code", code.map(String.init) ?? ""), ("status", "200"),
                                   ("token", device?.token ?? "")])
    }

    private func ack(_ m: AutopushMessage.Incoming, clientID: String, _ ws: WebSocketConnection) {
        for update in m.object["updates"]?.arrayValue ?? [] {
            guard let u = update.objectValue, let version = u["version"]?.stringValue else { continue }
            let code = u["code"]?.numberValue?.int64.map(Int.init)
            // An update names its channel: one naming another (or none) is not this version's ack.
            acknowledge(version: version, code: code, nack: false, channelID: u["channelID"]?.stringValue ?? "", clientID: clientID, ws)
        }
    }

    private func nack(_ m: AutopushMessage.Incoming, clientID: String, _ ws: WebSocketConnection) {
        guard let version = m.string("version") else { return }
        // Firefox's nack names no channel.
        acknowledge(version: version, code: m.int("code"), nack: true, channelID: nil, clientID: clientID, ws)
    }

    private func acknowledge(version: String, code: Int?, nack: Bool, channelID: String?, clientID: String, _ ws: WebSocketConnection) {
        let conn = "ws\(ws.id)"
        let type = nack ? "nack" : "ack"
        guard let result = try? room.engine.clientAcknowledged(clientID: clientID, connectionID: conn, versions: [version], code: code,
                                                               nack: nack, channelID: channelID), !result.settled.isEmpty else {
            room.log.info("autopush ignored an acknowledgement of a version this connection did not send on that channel",
                          [("conn", conn), ("uaid", clientID), ("messageType", type), ("channelID", channelID ?? ""), ("version", version)])
            return
        }
        room.log.info("autopush", [("dir", "in"), ("conn", conn), ("uaid", clientID), ("messageType", type), ("channelID", channelID ?? ""),
                                   ("version", version), ("code", code.map(String.init) ?? "100")])
        write(result.orders, on: ws)
    }

    /// The request's channel id, or nil after answering autopush's refusal (the connection stays).
    private func checkedChannel(_ m: AutopushMessage.Incoming, type: String, _ ws: WebSocketConnection) -> String? {
        let clientID = state.withLock { $0.clientID } ?? ""
        guard let channelID = m.string("channelID") else {
            refuse(type, channelID: nil, status: 401, reason: "missing channelID", clientID: clientID, ws)
            return nil
        }
        guard AutopushMessage.isChannelID(channelID) else {
            refuse(type, channelID: channelID, status: 401, reason: "Bad UUID format, use lower case, dashed format", clientID: clientID, ws)
            return nil
        }
        return channelID
    }

    private func refuse(_ type: String, channelID: String?, status: Int, reason: String, clientID: String, _ ws: WebSocketConnection) {
        ws.send(text: AutopushMessage.refused(type, channelID: channelID, status: status, reason: reason))
        room.log.info("autopush", [("dir", "in"), ("conn", "ws\(ws.id)"), ("uaid", clientID), ("messageType", type),
                                   ("channelID", channelID ?? ""), ("status", String(status)), ("reason", reason)])
    }

    /// Closes the connection for a reason of the protocol's (logged with it).
    private func end(_ ws: WebSocketConnection, _ close: AutopushClose) {
        ws.close(code: close.code, reason: close.reason)
    }

    // MARK: Writes

    /// A push the engine decided for this client: written now, or after the hello's answer.
    func write(_ w: ClientWrite) {
        let ws = state.withLock { s -> WebSocketConnection? in
            guard !s.ended, let ws = s.ws, "ws\(ws.id)" == w.connectionID else { return nil }
            guard s.greeted else {
                s.waiting.append(w)
                return nil
            }
            return ws
        }
        if let ws { send(w, on: ws) }
    }

    /// What the engine handed this connection's own message (a hello, an acknowledgement): its
    /// writes now, then `more`, then those a fault delays and the closes through the room.
    private func write(_ orders: ClientOrders, then more: [ClientWrite] = [], on ws: WebSocketConnection) {
        let delayed = { (w: ClientWrite) in (w.delayMillis ?? 0) > 0 }
        for w in orders.writes where !delayed(w) { send(w, on: ws) }
        for w in more { send(w, on: ws) }
        room.deliver(ClientOrders(writes: orders.writes.filter(delayed), close: orders.close))
    }

    private func send(_ w: ClientWrite, on ws: WebSocketConnection) {
        let body: [UInt8]?, fields: [(String, String)]
        if w.device?.kind == .fcm {
            // An FCM registration over this channel: FCM's JSON, encrypted by the mock (`aesgcm`;
            // salt and key without padding, which Firefox refuses).
            guard let relay = room.engine.fcmRelay(for: w) else {
                room.log.warning("autopush could not encrypt an FCM registration's push", [("conn", "ws\(ws.id)"), ("version", w.version)])
                return
            }
            (body, fields) = (relay.body, [("encoding", "aesgcm"), ("encryption", "salt=" + base64URLEncode(relay.salt)),
                                           ("crypto_key", "dh=" + base64URLEncode(relay.dh))])
        } else if let p = w.payload {
            (body, fields) = (p.body, p.fields)
        } else {
            let kept = room.engine.clientRecordPayload(of: w.deliveryID)
            (body, fields) = (kept.body, kept.fields)
        }
        ws.send(text: AutopushMessage.notification(channelID: w.channelID ?? "", version: w.version, body: body, fields: fields))
        // At debug: the sender's access line and the client's ack say it at info.
        room.log.log(.debug, "autopush", [("dir", "out"), ("conn", "ws\(ws.id)"), ("uaid", w.clientID), ("messageType", "notification"),
                                          ("channelID", w.channelID ?? ""), ("version", w.version)])
    }

    /// Closes the connection (`code` 4774: back off).
    func close(code: UInt16, reason: String) {
        let ws = state.withLock { $0.ws }
        ws?.close(code: code, reason: reason)
    }
}
