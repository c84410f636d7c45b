public import RoomKit
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer
import Platform

/// `/api/v1/messages`, `/api/v1/upstream` and `/api/v1/events`: what was sent, both ways, and
/// the stream of it.
extension ControlAPI {
    /// `GET /api/v1/messages`.
    public func messages(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        try q.allowOnly(Self.messageListParameters)
        var f = MessageFilter()
        f.senderID = q["sender_id"]
        f.token = q["token"]
        // A topic by its bare name or as a send addresses it (`/topics/news`).
        f.topic = q["topic"].map(Topics.name)
        f.transport = q["transport"]
        if let t = f.transport, Transport(rawValue: t) == nil { throw .badRequest("transport must be http, http_v1, xmpp, apns or webpush") }
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
        try searchTerms(q, into: &f)
        let (filter, limit, cursor) = (f, try q.limit(), try q.cursor())
        // Answered from a search thread: a filter found in few records walks the whole store
        // (a slice at a time, so sends are not held up), which takes the loop's other
        // connections' time if run on it.
        let responder = c.responder
        searches.run { [self] in
            do throws(ControlError) {
                let page = try engine.messageRecords(filter, limit: limit, before: cursor)
                let list = Render.list(page.items.map(Render.messageRecord), next: page.next)
                guard let total = page.total else { return responder.send(ok(list)) }
                responder.send(ok(Render.withTotal(list, total: total, cap: filter.totalCap ?? MessageFilter.defaultTotalCap)))
            } catch {
                responder.send(Self.errorResponse(error))
            }
        }
        return nil
    }

    static let messageListParameters: Set<String> = {
        let filters = ["sender_id", "token", "topic", "transport", "status", "error", "app", "text"]
        return Set(filters + filters.map { "not_" + $0 } + ["v1_name", "xmpp_message_id", "since", "until", "client_kind", "recipients",
                                                            "recipient_counts", "total", "limit", "cursor"])
    }()

    /// `GET /api/v1/messages/{id}`, with `recipients=N` as on the list.
    public func message(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.messageRecord(try engine.messageRecord(c["id"], recipientsLimit: try recipientsLimit(c.query),
                                                         counts: try Self.flag(c.query, "recipient_counts"))))
    }

    /// `recipients=N` (1-1000): at most the first N recipients of a record, with their total.
    private func recipientsLimit(_ q: Query) throws(ControlError) -> Int? {
        guard let n = try q.int("recipients") else { return nil }
        guard n >= 1 && n <= 1000 else { throw .badRequest("recipients must be between 1 and 1000") }
        return Int(n)
    }

    /// `GET /api/v1/upstream`: what devices sent to their app servers.
    public func upstream(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        if let status = q["status"], !["queued", "sent", "acked"].contains(status) {
            throw .badRequest("status must be queued, sent or acked")
        }
        let list = engine.upstreamMessages(senderID: q["sender_id"], token: q["token"], status: q["status"])
        return try paged(list, q) { $0.json }
    }

    /// `GET /api/v1/events`: server-sent events, open until the reader leaves; 503 `unavailable`
    /// when the most readers the server takes are connected.
    public func events(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let stream = HTTPStream()
        try engine.events.subscribe(stream)
        var answer = HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=UTF-8"),
                                                         ("Cache-Control", "no-cache")])
        answer.stream = stream
        return answer
    }
}

/// The page's search (docs/control-api.md, "Searching messages"): words, `app`, the `not_…`
/// exclusions, and the counts a scanning eye needs.
extension ControlAPI {
    /// The most words or phrases one `text` (or `not_text`) takes, and the longest one.
    static let maxSearchWords = 16
    static let maxSearchBytes = 200

    func searchTerms(_ q: Query, into f: inout MessageFilter) throws(ControlError) {
        if let t = q["text"] { f.text = try Self.words(t, "text") }
        if let a = q["app"] { f.app = a }
        if let k = q["client_kind"] {
            guard k == "any" || ClientKind(rawValue: k) != nil else {
                throw .badRequest("client_kind must be any or one of \(ClientKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            f.clientKind = k
        }
        f.recipientCounts = try Self.flag(q, "recipient_counts")
        // `total=true` counts up to the default cap; `total=N` up to N.
        if let n = Int(q["total"] ?? "") {
            guard (1...MessageFilter.maxTotalCap).contains(n) else { throw .badRequest("total must be true or 1 to \(MessageFilter.maxTotalCap)") }
            f.totalCap = n
        } else if try Self.flag(q, "total") {
            f.totalCap = MessageFilter.defaultTotalCap
        }
        // Each value of a `not_…` parameter (comma-separated; words and phrases for not_text)
        // excludes the records it alone would find.
        func each(_ name: String, _ set: (inout MessageFilter, String) throws(ControlError) -> Void) throws(ControlError) {
            guard let v = q["not_" + name] else { return }
            let values = name == "text" ? try Self.words(v, "not_text") : v.split(separator: ",").map(String.init)
            for value in values where !value.isEmpty {
                var x = MessageFilter()
                try set(&x, value)
                f.excluded.append(x)
            }
        }
        try each("status") { (x: inout MessageFilter, v: String) throws(ControlError) in
            guard ["accepted", "rejected", "failed", "delivered", "pending", "expired", "collapsed", "dropped", "replaced",
                   "undecryptable", "undeliverable", "deleted", "sent", "client_rejected"].contains(v) else {
                throw .badRequest("not_status must list statuses: accepted, rejected, failed, delivered, pending, expired, collapsed, dropped, replaced, undecryptable, undeliverable, deleted, sent, client_rejected")
            }
            x.status = v
        }
        try each("transport") { (x: inout MessageFilter, v: String) throws(ControlError) in
            guard Transport(rawValue: v) != nil else { throw .badRequest("not_transport must list http, http_v1, xmpp, apns or webpush") }
            x.transport = v
        }
        try each("error") { x, v in x.error = v }
        try each("topic") { x, v in x.topic = v }
        try each("token") { x, v in x.token = v }
        try each("app") { x, v in x.app = v }
        try each("sender_id") { x, v in x.senderID = v }
        try each("text") { x, v in x.text = [v] }
        guard f.excluded.count <= Self.maxSearchWords else { throw .badRequest("at most \(Self.maxSearchWords) exclusions") }
    }

    /// `true`, `1` or nothing; anything else is a 400.
    static func flag(_ q: Query, _ name: String) throws(ControlError) -> Bool {
        switch q[name] {
        case nil, "false", "0": return false
        case "true", "1": return true
        default: throw .badRequest("\(name) must be true or false")
        }
    }

    /// Words and "quoted phrases" of a search text (a phrase keeps its spaces).
    static func words(_ text: String, _ name: String) throws(ControlError) -> [String] {
        var out: [String] = []
        var word = ""
        var quoted = false
        for ch in text {
            if ch == "\"" {
                if !word.isEmpty { out.append(word); word = "" }
                quoted.toggle()
            } else if ch == " " && !quoted {
                if !word.isEmpty { out.append(word); word = "" }
            } else {
                word.append(ch)
            }
        }
        if !word.isEmpty { out.append(word) }
        guard out.count <= maxSearchWords, out.allSatisfy({ $0.utf8.count <= maxSearchBytes }) else {
            throw .badRequest("\(name) takes at most \(maxSearchWords) words or phrases of at most \(maxSearchBytes) bytes")
        }
        return out
    }
}
