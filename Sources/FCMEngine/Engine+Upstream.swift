import Platform
public import FCMModel
public import FCMCore
public import FCMStore

extension UpstreamRow {
    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("message_id"); w.value(id)
        w.key("token"); w.value(token)
        w.key("sender_id"); w.value(senderID)
        w.key("category"); w.value(category)
        w.key("data"); w.raw(data)
        w.key("time_to_live"); w.value(timeToLive)
        w.key("created_at"); w.value(rfc3339(millis: createdAt))
        w.key("status"); w.value(status)
        w.key("sent_at"); w.value(sentAt.map { rfc3339(millis: $0) })
        w.key("acked_at"); w.value(ackedAt.map { rfc3339(millis: $0) })
        w.key("connection_id"); w.value(connectionID)
        w.endObject()
        return w.string
    }
}

extension Engine {
    /// `POST /api/v1/devices/{token}/upstream`: the device sends `data` to its app server; it is
    /// queued until a connection of that sender takes it.
    public func createUpstream(token: String, data: JSONObject?, messageID: String?, timeToLive: Int64?) throws(EngineError) -> UpstreamMessage {
        let d = try device(token)
        guard d.state == .registered else { throw .conflict("device '\(token)' is \(d.state.rawValue): it cannot send") }
        let now = clock.nowMillis()
        var rng = SystemRandomNumberGenerator()
        let id = messageID ?? String(rng.next() | (1 << 63), radix: 16)
        let ttl = timeToLive ?? 86_400
        guard (0...SendOptions.defaultTimeToLive).contains(ttl) else { throw .badRequest("time_to_live must be 0 to 2419200") }
        let up = UpstreamMessage(id: id, token: d.token, senderID: d.senderID, category: d.app,
                                 data: JSONValue.object(data ?? JSONObject()).serialized(), timeToLive: ttl, createdAt: now,
                                 status: "queued", sentAt: nil, ackedAt: nil, connectionID: nil)
        let result: Result<Store.Ticket, EngineError> = state.withLock { s in
            if s.upstream[id] != nil { return .failure(.conflict("upstream message '\(id)' already exists")) }
            s.upstream[id] = up
            s.upstreamOrder.append(id)
            return .success(submit([Writes.saveUpstream([up])]))
        }
        try commitControl(try result.get())
        upstreamDispatch.withLock { $0 }?.call(d.senderID)
        // Answer with what happened: `sent` when a connection of the sender took it at once.
        return state.withLock { $0.upstream[id] } ?? up
    }

    /// Upstream messages, oldest first, filtered.
    public func upstreamMessages(senderID: String?, token: String?, status: String?) -> [UpstreamMessage] {
        state.withLock { s in
            s.upstreamOrder.compactMap { s.upstream[$0] }.filter {
                (senderID == nil || $0.senderID == senderID) && (token == nil || $0.token == token) && (status == nil || $0.status == status)
            }
        }
    }

    /// The queued upstream messages of a sender, marked sent on `connection` as they are taken.
    public func takeQueuedUpstream(senderID: String, connection: String) -> [UpstreamMessage] {
        let now = clock.nowMillis()
        return state.withLock { s in
            var taken: [UpstreamMessage] = []
            for id in s.upstreamOrder {
                guard var u = s.upstream[id], u.senderID == senderID, u.status == "queued" else { continue }
                u.status = "sent"
                u.sentAt = now
                u.connectionID = connection
                s.upstream[id] = u
                taken.append(u)
            }
            if !taken.isEmpty {
                let rows = taken
                submit([Writes.saveUpstream(rows)])
            }
            return taken
        }
    }

    /// The app server acked (or nacked) an upstream message; the event goes out once that is
    /// committed (a failed write leaves the message as the store has it).
    public func upstreamAcked(_ id: String, nacked: Bool) {
        let now = clock.nowMillis()
        state.withLock { s in
            guard var u = s.upstream[id] else { return }
            u.status = nacked ? "nacked" : "acked"
            u.ackedAt = now
            s.upstream[id] = u
            let row = u
            submit([Writes.saveUpstream([row])]) { [events] error in
                if error == nil { events.publish([("upstream.acked", row.json)]) }
            }
        }
    }

    /// Sent but unacked messages of a closed connection go back to the queue (redelivered on the
    /// next connection of their sender).
    public func requeueUpstream(_ ids: [String]) {
        state.withLock { s in
            var rows: [UpstreamMessage] = []
            for id in ids {
                guard var u = s.upstream[id], u.status == "sent" else { continue }
                u.status = "queued"
                u.connectionID = nil
                s.upstream[id] = u
                rows.append(u)
            }
            if !rows.isEmpty {
                let r = rows
                submit([Writes.saveUpstream(r)])
            }
        }
    }
}
