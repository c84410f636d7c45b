import FCMCore
import FCMModel
import RoomKit

/// A fault as the control API reads and shows it (`/api/v1/faults`, docs/control-api.md).
extension Fault {
    /// The fault as the control API shows it.
    var json: String {
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

    /// Reads the body of `POST /api/v1/faults` (errors name the field); its id and time are the
    /// engine's to give (`Engine.addFault`).
    static func parse(_ b: Body, protocolErrors: [FaultErrors]) throws(ControlError) -> Fault {
        try b.allow(["when", "then", "times"])
        var f = Fault(id: "", action: .closeConnection, createdAt: 0)
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
            if let name, protocolErrors.contains(where: { f.path.map($0.covers) == true && $0.names.contains(name) }) {
                f.action = .protocolError(name)
                break
            }
            if let path = f.path, let own = protocolErrors.first(where: { $0.covers(path) }) {
                if own.names.isEmpty {
                    throw .badRequest("then.error does not apply to when.path \(path): it takes then.status, then.delay_ms or then.close_connection")
                }
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
            var named = name
            if let n = name, let own = protocolErrors.first(where: { $0.path == nil && $0.aliases[n] != nil }) {
                // A room's own name for an FCM error (HTTP v1's `UNAVAILABLE`): that error.
                guard f.transport == own.transport else {
                    throw .badRequest("then.error \(n) is \(own.kind): set when.transport to \(own.transport)")
                }
                named = own.aliases[n]
            }
            guard let name = named, let code = FCMErrorCode(rawValue: name) else {
                let others = protocolErrors.filter { $0.path == nil }.map {
                    "or with when.transport \($0.transport) one of \($0.listName) (\(($0.names + $0.aliases.keys.sorted()).joined(separator: ", ")))"
                }
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
}
