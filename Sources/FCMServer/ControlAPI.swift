import FCMCore
import HTTPServer
import Platform

/// The version `health` reports.
public let fcmMockVersion = "0.1.0"

/// `/api/v1/...`: the mock's own surface for setting up fake devices and inspecting deliveries
/// (control-api.md).
struct ControlAPI: Sendable {
    let engine: Engine
    let controlToken: String?
    /// The open XMPP connections, as JSON objects.
    let xmppConnections: @Sendable () -> [String]
    /// Drains one connection (or all for nil); the JSON of those drained.
    let xmppDrain: @Sendable (String?) -> [String]

    func handle(_ r: HTTPRequest, segments: [Substring], _ responder: HTTPResponder) {
        do throws(ControlError) {
            if r.bodyTooLarge { throw ControlError(code: "payload_too_large", message: "request body is too large") }
            let isHealth = segments.count == 1 && segments[0] == "health"
            if let controlToken, !isHealth, !Self.authorized(r, controlToken) {
                throw ControlError(code: "unauthorized", message: "this server needs Authorization: Bearer <control token>")
            }
            if let answer = try route(r, segments, responder) { responder.send(answer) }
        } catch {
            responder.send(Self.errorResponse(error))
        }
    }

    /// `Authorization: Bearer SECRET`, or `?access_token=SECRET` (what a browser's EventSource and
    /// the web page's address can carry).
    /// The web page itself takes `?token=SECRET` (`queryName`).
    static func authorized(_ r: HTTPRequest, _ token: String, queryName: String = "access_token") -> Bool {
        if r.header("authorization") == "Bearer " + token { return true }
        return (try? Query(r.rawQuery))?[queryName] == token
    }

    static func errorResponse(_ error: ControlError) -> HTTPResponse {
        HTTPResponse(status: error.status, contentType: ContentType.json, body: Render.error(error))
    }

    /// The answer, or nil when `responder` will be answered later (long polls).
    private func route(_ r: HTTPRequest, _ seg: [Substring], _ responder: HTTPResponder) throws(ControlError) -> HTTPResponse? {
        let q = try Query(r.rawQuery)
        switch (r.method, seg.count, seg.first ?? "") {
        case ("GET", 1, "health"):
            var w = JSONWriter()
            w.beginObject()
            w.key("status"); w.value("ok")
            w.key("version"); w.value(fcmMockVersion)
            w.key("uptime_s"); w.value(Int64((monotonicNanos() - engine.startedAt) / 1_000_000_000))
            w.key("event_readers"); w.value(engine.events.readerCount)
            w.endObject()
            return ok(w.string)
        case ("POST", 1, "reset"):
            // Back to the state right after start: the fixtures loaded then are applied again
            // (`?fixtures=false` leaves the store empty but for the projects).
            let fixtures: Bool
            switch q["fixtures"] {
            case nil, "true": fixtures = true
            case "false": fixtures = false
            case let v?: throw .badRequest("fixtures must be true or false, got '\(v)'")
            }
            try Fixtures.reset(fixtures ? engine.startFixtures.withLock { $0 } : [], engine)
            return HTTPResponse(status: 204)
        case (_, _, "projects"):
            return try projects(r, seg, q)
        case (_, _, "devices"):
            return try devices(r, seg, q, responder)
        case ("GET", 1, "messages"):
            var f = MessageFilter()
            f.senderID = q["sender_id"]
            f.token = q["token"]
            f.topic = q["topic"]
            f.transport = q["transport"]
            f.status = q["status"]
            f.xmppMessageID = q["xmpp_message_id"]
            if let n = try q.int("recipients") {
                guard n >= 1 && n <= 1000 else { throw .badRequest("recipients must be between 1 and 1000") }
                f.recipientsLimit = Int(n)
            }
            if let s = q["since"] {
                guard let ms = parseRFC3339(s) else { throw .badRequest("since must be an RFC 3339 timestamp") }
                f.sinceMillis = ms
            }
            let page = try engine.messageRecords(f, limit: try q.limit(), before: try q.cursor())
            return ok(Render.list(page.items, next: page.next))
        case ("GET", 2, "messages"):
            return ok(try engine.messageRecord(try decode(seg[1])))
        case ("GET", 1, "events"):
            let stream = HTTPStream()
            engine.events.subscribe(stream)
            var answer = HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream; charset=UTF-8"),
                                                             ("Cache-Control", "no-cache")])
            answer.stream = stream
            return answer
        case ("POST", 1, "faults"):
            return ok(try engine.addFault(try jsonBody(r)).json, status: 201)
        case ("GET", 1, "faults"):
            return try paged(engine.faults(), q) { $0.json }
        case ("DELETE", 1, "faults"):
            try engine.deleteFault(nil)
            return HTTPResponse(status: 204)
        case ("DELETE", 2, "faults"):
            try engine.deleteFault(try decode(seg[1]))
            return HTTPResponse(status: 204)
        case ("GET", 2, "xmpp") where seg[1] == "connections":
            return try paged(xmppConnections(), q) { $0 }
        case ("POST", 1, "xmpp:drain"):
            return ok(Render.list(xmppDrain(nil), next: nil))
        case ("POST", 3, "xmpp") where seg[1] == "connections" && seg[2].hasSuffix(":drain"):
            let id = try decode(seg[2].dropLast(":drain".count))
            let drained = xmppDrain(id)
            guard let first = drained.first else {
                throw .notFound("no open connection '\(id)' that is not draining already")
            }
            return ok(first)
        case ("GET", 1, "upstream"):
            let list = engine.upstreamMessages(senderID: q["sender_id"], token: q["token"], status: q["status"])
            return try paged(list, q) { $0.json }
        case ("GET", 1, "groups"):
            return try paged(engine.groups(), q) { $0 }
        case ("GET", 2, "groups"):
            return ok(try engine.group(try decode(seg[1])))
        case ("GET", 1, "topics"):
            return try paged(engine.allTopics(), q) { Self.topicJSON($0.name, $0.subscribers) }
        case ("GET", 2, "topics"):
            let name = try decode(seg[1])
            let t = try engine.topic(name.hasPrefix("/topics/") ? String(name.dropFirst(8)) : name)
            return ok(Self.topicJSON(t.name, t.subscribers))
        case ("GET", 1, "clock"):
            return ok(clockJSON())
        case ("POST", 1, "clock"):
            let body = try jsonBody(r)
            try body.allow(["advance_s", "reset"])
            if try body.bool("reset") == true {
                engine.resetClock()
            } else if let n = try body.int("advance_s") {
                guard n >= 0 else { throw .badRequest("advance_s must not be negative: the clock only moves forward") }
                guard n <= Self.maxClockOffsetSeconds - engine.clock.offsetSeconds else {
                    throw .badRequest("the clock may run at most \(Self.maxClockOffsetSeconds) s (100 years) ahead of real time")
                }
                engine.clock.advance(seconds: n)
                // Every held message past its TTL expires at once, not at the next read.
                try engine.expireDue()
                engine.notifyChanged()
            } else {
                throw .badRequest("give advance_s (seconds, >= 0) or reset: true")
            }
            return ok(clockJSON())
        default:
            throw .notFound("no such call: \(r.method) \(r.path)")
        }
    }

    static func topicJSON(_ name: String, _ subscribers: [String]) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("name"); w.value(name)
        w.key("subscribers"); w.beginArray()
        for t in subscribers { w.value(t) }
        w.endArray()
        w.key("count"); w.value(subscribers.count)
        w.endObject()
        return w.string
    }

    private func clockJSON() -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("now"); w.value(rfc3339(millis: engine.clock.nowMillis()))
        w.key("offset_s"); w.value(engine.clock.offsetSeconds)
        w.endObject()
        return w.string
    }

    // MARK: Projects

    private func projects(_ r: HTTPRequest, _ seg: [Substring], _ q: Query) throws(ControlError) -> HTTPResponse {
        switch (r.method, seg.count) {
        case ("GET", 1):
            return try paged(engine.projects(), q, Render.project)
        case ("POST", 1):
            let p = try Self.projectSpec(try jsonBody(r), now: engine.clock.nowMillis())
            return ok(Render.project(try engine.createProject(p)), status: 201)
        case ("GET", 2):
            return ok(Render.project(try engine.project(try decode(seg[1]))))
        case ("DELETE", 2):
            try engine.deleteProject(try decode(seg[1]))
            return HTTPResponse(status: 204)
        default:
            throw .notFound("no such call: \(r.method) \(r.path)")
        }
    }

    /// A project from its JSON form (`POST /api/v1/projects` and fixtures).
    static func projectSpec(_ o: Body, now: Int64) throws(ControlError) -> Project {
        try o.allow(["sender_id", "server_keys", "apps"])
        guard let sender = try o.string("sender_id"), !sender.isEmpty, !sender.contains("/"), !sender.contains(" ") else {
            throw .badRequest("sender_id is required: a non-empty string without spaces or slashes")
        }
        let keys = try o.stringArray("server_keys") ?? []
        if keys.contains(where: { $0.isEmpty }) { throw .badRequest("server_keys must not contain an empty key") }
        var apps: [AppConfig] = []
        for (i, v) in (try o.array("apps") ?? []).enumerated() {
            guard let obj = v.objectValue else { throw .badRequest("apps[\(i)] must be an object") }
            let a = Body(obj, path: "apps[\(i)].")
            try a.allow(["app", "platform", "apns_credential"])
            guard let name = try a.string("app"), !name.isEmpty else { throw .badRequest("apps[\(i)].app is required") }
            let platform = try a.platform("platform") ?? .android
            let cred = try a.string("apns_credential") ?? "valid"
            guard ["valid", "missing", "expired"].contains(cred) else {
                throw .badRequest("apps[\(i)].apns_credential must be valid, missing or expired")
            }
            apps.append(AppConfig(app: name, platform: platform, apnsCredential: cred))
        }
        return Project(senderID: sender, serverKeys: keys, apps: apps, createdAt: now)
    }

    // MARK: Devices

    private func devices(_ r: HTTPRequest, _ seg: [Substring], _ q: Query, _ responder: HTTPResponder) throws(ControlError) -> HTTPResponse? {
        if seg.count == 1 {
            switch r.method {
            case "GET":
                let state: DeviceState?
                if let s = q["state"] {
                    guard let st = DeviceState(rawValue: s) else { throw .badRequest("state must be registered, unregistered or refreshed") }
                    state = st
                } else {
                    state = nil
                }
                let limit = try q.limit()
                let list = engine.devices(senderID: q["sender_id"], app: q["app"], state: state, topic: q["topic"],
                                          afterID: try q.cursor() ?? 0, limit: limit + 1)
                let page = Array(list.prefix(limit))
                let next = list.count > limit ? page.last?.id : nil
                return ok(Render.list(page.map(render), next: next))
            case "POST":
                let d = try engine.createDevice(try Self.deviceSpec(try jsonBody(r)))
                return ok(render(d), status: 201)
            default:
                throw .notFound("no such call: \(r.method) \(r.path)")
            }
        }
        // `/devices/{token}:verb`: the verb follows the last (unencoded) colon, and only known
        // verbs count, since real tokens contain a colon themselves.
        let raw = seg[1]
        if seg.count == 2, r.method == "POST", let colon = raw.lastIndex(of: ":") {
            let verb = raw[raw.index(after: colon)...]
            let token = try decode(raw[..<colon])
            switch verb {
            case "unregister": return ok(render(try engine.unregister(token)))
            case "refresh": return ok(render(try engine.refresh(token)))
            default: break
            }
        }
        let token = try decode(raw)
        switch (r.method, seg.count) {
        case ("GET", 2):
            return ok(render(try engine.device(token)))
        case ("PATCH", 2):
            let body = try jsonBody(r)
            try body.allow(["online"])
            guard let online = try body.bool("online") else { throw .badRequest("online (true or false) is required") }
            return ok(render(try engine.setOnline(token, online)))
        case ("DELETE", 2):
            try engine.deleteDevice(token)
            return HTTPResponse(status: 204)
        case ("POST", 3) where seg[2] == "upstream":
            let body = try jsonBody(r)
            try body.allow(["data", "message_id", "time_to_live"])
            var data: JSONObject?
            if let v = body.object["data"], !v.isNull {
                guard let o = v.objectValue else { throw .badRequest("data must be an object") }
                data = o
            }
            let up = try engine.createUpstream(token: token, data: data, messageID: try body.string("message_id"),
                                               timeToLive: try body.int("time_to_live"))
            return ok(up.json, status: 201)
        case ("POST", 4) where seg[2] == "topics":
            return ok(render(try engine.subscribe(token, topic: try decode(seg[3]))))
        case ("DELETE", 4) where seg[2] == "topics":
            return ok(render(try engine.unsubscribe(token, topic: try decode(seg[3]))))
        case ("GET", 3) where seg[2] == "messages":
            let waitS = try q.double("wait") ?? 0
            guard (0...60).contains(waitS) else { throw .badRequest("wait must be 0 to 60 seconds") }
            let min = try q.int("min") ?? 1
            guard min >= 0 else { throw .badRequest("min must not be negative") }
            engine.waitForInbox(token, status: q["status"], afterID: try q.cursor() ?? 0, limit: try q.limit(),
                                min: Int(min), waitSeconds: waitS) { result in
                switch result {
                case .success(let page): responder.send(HTTPResponse(status: 200, contentType: ContentType.json,
                                                                     body: Render.list(page.items, next: page.next)))
                case .failure(let e): responder.send(Self.errorResponse(e))
                }
            }
            return nil
        default:
            throw .notFound("no such call: \(r.method) \(r.path)")
        }
    }

    /// A device from its JSON form (`POST /api/v1/devices` and fixtures).
    static func deviceSpec(_ b: Body) throws(ControlError) -> DeviceSpec {
        try b.allow(["token", "sender_id", "app", "platform", "online"])
        guard let sender = try b.string("sender_id") else { throw .badRequest("\(b.path)sender_id is required") }
        return DeviceSpec(token: try b.string("token"), senderID: sender, app: try b.string("app"),
                          platform: try b.platform("platform") ?? .android, online: try b.bool("online") ?? true)
    }

    private func render(_ d: Device) -> String {
        engine.renderDevice(d)
    }

    /// How far ahead the mock's clock may run: 100 years (dates stay printable, sums stay in range).
    static let maxClockOffsetSeconds: Int64 = 100 * 36525 * 864

    /// A list the engine holds in memory, paged like every list (`limit`, `cursor`): the cursor
    /// is the position where the next page starts.
    /// Only the page is rendered.
    private func paged<T>(_ items: [T], _ q: Query, _ render: (T) -> String) throws(ControlError) -> HTTPResponse {
        let limit = try q.limit()
        let start = min(Int(try q.cursor() ?? 0), items.count)
        let end = min(items.count, start + limit)
        return ok(Render.list(items[start..<end].map(render), next: end < items.count ? Int64(end) : nil))
    }

    private func ok(_ json: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: ContentType.json, body: json)
    }

    private func jsonBody(_ r: HTTPRequest) throws(ControlError) -> Body {
        let v: JSONValue
        do {
            v = try JSONParser.parse(r.body.isEmpty ? Array("{}".utf8) : r.body)
        } catch {
            throw .badRequest("invalid JSON body: \(error.message)")
        }
        guard let o = v.objectValue else { throw .badRequest("the body must be a JSON object") }
        return Body(o, path: "")
    }
}

/// A JSON object body with typed accessors whose errors name the field.
struct Body {
    let object: JSONObject
    let path: String

    init(_ object: JSONObject, path: String) {
        self.object = object
        self.path = path
    }

    func allow(_ fields: Set<String>) throws(ControlError) {
        for k in object.keys where !fields.contains(k) {
            throw .badRequest("unknown field \"\(path)\(k)\"; allowed: \(fields.sorted().joined(separator: ", "))")
        }
    }

    func string(_ k: String) throws(ControlError) -> String? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw .badRequest("\(path)\(k) must be a string") }
        return s
    }

    func bool(_ k: String) throws(ControlError) -> Bool? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let b = v.boolValue else { throw .badRequest("\(path)\(k) must be true or false") }
        return b
    }

    func int(_ k: String) throws(ControlError) -> Int64? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let n = v.numberValue, n.isInteger, let i = n.int64 else { throw .badRequest("\(path)\(k) must be an integer") }
        return i
    }

    func array(_ k: String) throws(ControlError) -> [JSONValue]? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let a = v.arrayValue else { throw .badRequest("\(path)\(k) must be an array") }
        return a
    }

    func stringArray(_ k: String) throws(ControlError) -> [String]? {
        guard let a = try array(k) else { return nil }
        var out: [String] = []
        for (i, v) in a.enumerated() {
            guard let s = v.stringValue else { throw .badRequest("\(path)\(k)[\(i)] must be a string") }
            out.append(s)
        }
        return out
    }

    func platform(_ k: String) throws(ControlError) -> Platform? {
        guard let s = try string(k) else { return nil }
        guard let p = Platform(rawValue: s) else { throw .badRequest("\(path)\(k) must be android, ios or web") }
        return p
    }
}

/// Decoded query arguments with the list conventions (`limit`, `cursor`).
struct Query {
    private var values: [String: String] = [:]

    init(_ raw: [(String, String?)]) throws(ControlError) {
        for (k, v) in raw {
            guard let key = FormBody.percentDecode(k.utf8, plusIsSpace: true),
                let value = FormBody.percentDecode((v ?? "").utf8, plusIsSpace: true)
            else { throw .badRequest("bad percent-encoding in the query string") }
            values[key] = value
        }
    }

    /// Whether `?name=true` (or a bare `?name`) is in the raw query.
    static func flag(_ raw: [(String, String?)], _ name: String) -> Bool {
        raw.contains { $0.0 == name && ($0.1 == nil || $0.1 == "true" || $0.1 == "1") }
    }

    subscript(_ k: String) -> String? {
        guard let v = values[k], !v.isEmpty else { return nil }
        return v
    }

    func int(_ k: String) throws(ControlError) -> Int64? {
        guard let s = self[k] else { return nil }
        guard let v = Int64(s) else { throw .badRequest("\(k) must be an integer") }
        return v
    }

    func double(_ k: String) throws(ControlError) -> Double? {
        guard let s = self[k] else { return nil }
        guard let v = Double(s), v.isFinite else { throw .badRequest("\(k) must be a number") }
        return v
    }

    /// `limit`: default 100, at most 1000.
    func limit() throws(ControlError) -> Int {
        guard let v = try int("limit") else { return 100 }
        guard (1...1000).contains(v) else { throw .badRequest("limit must be 1 to 1000") }
        return Int(v)
    }

    func cursor() throws(ControlError) -> Int64? {
        guard let s = self["cursor"] else { return nil }
        guard let v = Int64(s), v >= 0 else { throw .badRequest("cursor is not one this server gave out") }
        return v
    }
}

/// One percent-encoded segment of a request path, decoded (`+` stays a plus).
func decode<S: StringProtocol>(_ s: S) throws(ControlError) -> String {
    guard let v = FormBody.percentDecode(s.utf8, plusIsSpace: false) else { throw .badRequest("bad percent-encoding in path") }
    return v
}
