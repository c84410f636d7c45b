import FCMEngine
import FCMCore
import HTTPServer

/// `/api/v1/messages`, `/api/v1/upstream` and `/api/v1/events`: what was sent, both ways, and
/// the stream of it.
extension ControlAPI {
    /// `GET /api/v1/messages`.
    func messages(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        var f = MessageFilter()
        f.senderID = q["sender_id"]
        f.token = q["token"]
        f.topic = q["topic"]
        f.transport = q["transport"]
        if let t = f.transport, Transport(rawValue: t) == nil { throw .badRequest("transport must be http, http_v1 or xmpp") }
        f.v1Name = q["v1_name"]
        f.status = q["status"]
        f.xmppMessageID = q["xmpp_message_id"]
        f.recipientsLimit = try recipientsLimit(q)
        if let s = q["since"] {
            guard let ms = parseRFC3339(s) else { throw .badRequest("since must be an RFC 3339 timestamp") }
            f.sinceMillis = ms
        }
        if let s = q["until"] {
            guard let ms = parseRFC3339(s) else { throw .badRequest("until must be an RFC 3339 timestamp") }
            f.untilMillis = ms
        }
        if let e = q["error"] {
            guard !e.isEmpty && e.utf8.count <= 200 else { throw .badRequest("error must be an error code of at most 200 bytes") }
            f.error = e
        }
        let page = try engine.messageRecords(f, limit: try q.limit(), before: try q.cursor())
        return ok(Render.list(page.items.map(Render.messageRecord), next: page.next))
    }

    /// `GET /api/v1/messages/{id}`, with `recipients=N` as on the list.
    func message(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.messageRecord(try engine.messageRecord(c["id"], recipientsLimit: try recipientsLimit(c.query))))
    }

    /// `recipients=N` (1-1000): at most the first N recipients of a record, with their total.
    private func recipientsLimit(_ q: Query) throws(ControlError) -> Int? {
        guard let n = try q.int("recipients") else { return nil }
        guard n >= 1 && n <= 1000 else { throw .badRequest("recipients must be between 1 and 1000") }
        return Int(n)
    }

    /// `GET /api/v1/upstream`: what devices sent to their app servers.
    func upstream(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        let list = engine.upstreamMessages(senderID: q["sender_id"], token: q["token"], status: q["status"])
        return try paged(list, q) { $0.json }
    }

    /// `GET /api/v1/events`: server-sent events, open until the reader leaves.
    func events(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let stream = HTTPStream()
        engine.events.subscribe(stream)
        var answer = HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=UTF-8"),
                                                         ("Cache-Control", "no-cache")])
        answer.stream = stream
        return answer
    }
}
