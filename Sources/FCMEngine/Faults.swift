import FCMModel
import FCMCore

/// A fault injected through `POST /api/v1/faults`: FCM misbehaving on purpose.
public struct Fault: Sendable {
    /// What a fault does when it fires.
    enum Action: Sendable, Equatable {
        /// Answer the whole request with this HTTP status (and `Retry-After` when given).
        case status(Int, retryAfter: Int64?)
        /// Fail the matching recipients with this error inside a normal answer.
        case error(FCMErrorCode)
        /// Answer with this error of the room's own (an APNs reason: `FaultErrors`).
        case protocolError(String)
        /// Answer normally, this many milliseconds late.
        case delay(Int64)
        /// Drop the connection without an answer.
        case closeConnection
    }

    var id: String
    var transport: String?
    var path: String?
    var senderID: String?
    var token: String?
    var topic: String?
    var action: Action
    /// How many more times it fires; nil: until deleted.
    var remaining: Int64?
    var fired: Int64 = 0
    var createdAt: Int64

    /// The request-level part of `when`: transport, path, sender and topic (the token is checked
    /// per recipient, or against any recipient for request-level actions).
    func matches(transport t: Transport, path p: String, senderID s: String?, topic: String?) -> Bool {
        if let transport, transport != "any", transport != t.rawValue { return false }
        if let path, path != p { return false }
        if let senderID, senderID != s { return false }
        // Topic names match without regard to case, as sends match subscribers.
        if let want = self.topic, Topics.key(want) != topic.map(Topics.key) { return false }
        return true
    }

    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.value(id)
        w.key("when"); w.beginObject()
        w.key("transport"); w.value(transport ?? "any")
        w.key("path"); w.value(path)
        w.key("sender_id"); w.value(senderID)
        w.key("token"); w.value(token)
        w.key("topic"); w.value(topic)
        w.endObject()
        w.key("then"); w.beginObject()
        switch action {
        case .status(let code, let retry):
            w.key("status"); w.value(code)
            if let retry { w.key("retry_after_s"); w.value(retry) }
        case .error(let e): w.key("error"); w.value(e.rawValue)
        case .protocolError(let name): w.key("error"); w.value(name)
        case .delay(let ms): w.key("delay_ms"); w.value(ms)
        case .closeConnection: w.key("close_connection"); w.value(true)
        }
        w.endObject()
        w.key("times"); if let remaining { w.value(remaining) } else { w.null() }
        w.key("fired"); w.value(fired)
        w.key("created_at"); w.value(rfc3339(millis: createdAt))
        w.endObject()
        return w.string
    }

    /// Parses the body of `POST /api/v1/faults`; errors name the field.
    static func parse(_ b: Body, id: String, now: Int64, protocolErrors: [FaultErrors]) throws(EngineError) -> Fault {
        try b.allow(["when", "then", "times"])
        var f = Fault(id: id, action: .closeConnection, createdAt: now)
        if let v = b.object["when"], !v.isNull {
            guard let o = v.objectValue else { throw .badRequest("when must be an object") }
            let w = Body(o, path: "when.")
            try w.allow(["transport", "path", "sender_id", "token", "topic"])
            f.transport = try w.string("transport")
            // Every transport a room added, and `any`.
            let names = Transport.allCases.map(\.rawValue)
            if let t = f.transport, t != "any", !names.contains(t) {
                throw .badRequest("when.transport must be " + names.joined(separator: ", ") + " or any")
            }
            f.path = try w.string("path")
            f.senderID = try w.string("sender_id")
            f.token = try w.string("token")
            f.topic = try w.string("topic").map(Topics.name)
        }
        guard let thenValue = b.object["then"], let thenObject = thenValue.objectValue else {
            throw .badRequest("then is required: {\"status\":503,\"retry_after_s\":10} | {\"error\":\"Unavailable\"} | {\"delay_ms\":1500} | {\"close_connection\":true}")
        }
        let t = Body(thenObject, path: "then.")
        try t.allow(["status", "retry_after_s", "error", "delay_ms", "close_connection"])
        let kinds = ["status", "error", "delay_ms", "close_connection"].filter { thenObject[$0] != nil }
        guard kinds.count == 1 else {
            throw .badRequest("then needs exactly one of status, error, delay_ms, close_connection")
        }
        switch kinds[0] {
        case "status":
            guard let code = try t.int("status"), (400...599).contains(code) else {
                throw .badRequest("then.status must be an HTTP status from 400 to 599")
            }
            let retry = try t.int("retry_after_s")
            if let retry, retry < 0 { throw .badRequest("then.retry_after_s must not be negative") }
            f.action = .status(Int(code), retryAfter: retry)
        case "error":
            let name = try t.string("error")
            // A room's own errors are answered as the room does (Apple's reasons over APNs,
            // InternalServerError, a name both have, included); another FCM error name keeps its
            // meaning and its room's mapping.
            if let name, let own = protocolErrors.first(where: { $0.path != nil && $0.path == f.path && $0.names.contains(name) }) {
                f.action = .protocolError(name)
                _ = own
                break
            }
            if let path = f.path, let own = protocolErrors.first(where: { $0.path == path }) {
                throw .badRequest("then.error with when.path \(path) must be one of \(own.listName) (\(own.names.joined(separator: ", ")))")
            }
            if let name, let own = protocolErrors.first(where: { $0.path == nil && $0.names.contains(name) }),
                f.transport == own.transport || FCMErrorCode(rawValue: name) == nil {
                guard f.transport == own.transport else {
                    throw .badRequest("then.error \(name) is \(own.kind): set when.transport to \(own.transport)")
                }
                f.action = .protocolError(name)
                break
            }
            guard let name, let code = FCMErrorCode(rawValue: name) else {
                let others = protocolErrors.filter { $0.path == nil }.map { "or with when.transport \($0.transport) one of \($0.listName) (\($0.names.joined(separator: ", ")))" }
                throw .badRequest((["then.error must be one of \(FCMErrorCode.allCases.map(\.rawValue).joined(separator: ", "))"] + others)
                    .joined(separator: ", "))
            }
            if code.isXMPPOnly && f.transport != "xmpp" {
                throw .badRequest("then.error \(name) exists only over XMPP: set when.transport to xmpp")
            }
            f.action = .error(code)
        case "delay_ms":
            guard let ms = try t.int("delay_ms"), (0...600_000).contains(ms) else {
                throw .badRequest("then.delay_ms must be 0 to 600000")
            }
            f.action = .delay(ms)
        default:
            guard try t.bool("close_connection") == true else { throw .badRequest("then.close_connection must be true") }
            f.action = .closeConnection
        }
        if let t = f.transport, t == Transport.autopush.rawValue || t == Transport.mcs.rawValue {
            switch f.action {
            case .closeConnection, .delay: break
            default: throw .badRequest("a fault with when.transport \(t) takes then.close_connection or then.delay_ms (it acts on the write to the client, not on a sender's answer)")
            }
        }
        if retryOnlyWithStatus(thenObject) { throw .badRequest("then.retry_after_s goes with then.status") }
        if let times = try b.int("times") {
            guard times >= 1 else { throw .badRequest("times must be 1 or more (leave it out for a fault that stays)") }
            f.remaining = times
        }
        return f
    }

    private static func retryOnlyWithStatus(_ o: JSONObject) -> Bool {
        o["retry_after_s"] != nil && o["status"] == nil
    }

    init(id: String, action: Action, createdAt: Int64) {
        self.id = id
        self.action = action
        self.createdAt = createdAt
    }
}

/// The faults in force, with their countdowns. Part of the engine's state.
struct FaultTable: Sendable {
    var faults: [Fault] = []
    var nextID = 1

    /// The first request-level fault (status, delay, close) matching this request, fired.
    mutating func fireRequestFault(transport: Transport, path: String, senderID: String?, tokens: [String], topic: String?) -> Fault? {
        for i in faults.indices {
            let f = faults[i]
            switch f.action {
            case .error: continue
            default: break
            }
            guard f.matches(transport: transport, path: path, senderID: senderID, topic: topic) else { continue }
            if let t = f.token, !tokens.contains(t) { continue }
            return fire(i)
        }
        return nil
    }

    /// The first fault on the writes to a real client (`when.transport` naming the client's
    /// protocol exactly; `any` is for senders' requests) matching this device, fired.
    mutating func fireClientFault(transport: Transport, senderID: String, token: String) -> Fault? {
        for i in faults.indices where faults[i].transport == transport.rawValue {
            let f = faults[i]
            if let s = f.senderID, s != senderID { continue }
            if let t = f.token, t != token { continue }
            return fire(i)
        }
        return nil
    }

    /// The first error fault matching this recipient, fired.
    mutating func fireRecipientFault(transport: Transport, path: String, senderID: String, token: String, topic: String?) -> Fault? {
        for i in faults.indices {
            guard case .error = faults[i].action else { continue }
            let f = faults[i]
            guard f.matches(transport: transport, path: path, senderID: senderID, topic: topic) else { continue }
            if let t = f.token, t != token { continue }
            return fire(i)
        }
        return nil
    }

    mutating func fire(_ i: Int) -> Fault {
        faults[i].fired += 1
        let f = faults[i]
        if let r = faults[i].remaining {
            if r <= 1 { faults.remove(at: i) } else { faults[i].remaining = r - 1 }
        }
        return f
    }
}
