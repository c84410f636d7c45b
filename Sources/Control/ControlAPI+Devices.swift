public import RoomKit
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// `/api/v1/devices`: fake devices, their topics, upstream messages and inboxes.
extension ControlAPI {
    /// `GET /api/v1/devices`.
    public func devices(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        try q.allowOnly(Self.deviceListParameters)
        let state: DeviceState?
        if let s = q["state"] {
            guard let st = DeviceState(rawValue: s) else { throw .badRequest("state must be registered, unregistered or refreshed") }
            state = st
        } else {
            state = nil
        }
        let limit = try q.limit()
        // `?apns_token=`: the one iOS device with that APNs token (docs/apns.md), or none.
        if let apns = q["apns_token"] {
            return ok(Render.list(engine.device(apnsToken: apns).map { [render($0)] } ?? [], next: nil))
        }
        // `?web_push_id=`: the web device whose push subscription has that id (the endpoint's
        // last segment), or none.
        if let id = q["web_push_id"] {
            return ok(Render.list(engine.device(webPushID: id).map { [render($0)] } ?? [], next: nil))
        }
        if let text = q["q"], text.utf8.count > Self.maxSearchBytes {
            throw .badRequest("q must be at most \(Self.maxSearchBytes) bytes")
        }
        let found = engine.devices(senderID: q["sender_id"], app: q["app"], state: state, topic: q["topic"].map(Topics.name),
                                   containing: q["q"], afterID: try q.cursor() ?? 0, limit: limit + 1, client: try Self.clientFilter(q))
        let page = Array(found.items.prefix(limit))
        let next = found.items.count > limit ? page.last?.id : nil
        let list = Render.list(page.map(render), next: next)
        // Devices are counted in memory: the total is exact (10,000 devices: a fraction of a millisecond).
        return ok(try Self.flag(q, "total") ? Render.withTotal(list, total: found.total, cap: Int.max) : list)
    }

    static let deviceListParameters: Set<String> = ["sender_id", "app", "state", "topic", "q", "total", "client_kind", "client_id",
                                                     "connected", "apns_token", "web_push_id", "limit", "cursor"]
    static let inboxParameters: Set<String> = ["status", "wait", "min", "order", "limit", "cursor"]

    /// `?client_kind=`, `?client_id=`, `?connected=`: real clients' devices (docs/real-clients.md;
    /// `client_kind=any`: every real client's, as for messages).
    static func clientFilter(_ q: Query) throws(ControlError) -> ClientFilter? {
        var kind: ClientKind?
        if let k = q["client_kind"], k != "any" {
            guard let known = ClientKind(rawValue: k) else {
                throw .badRequest("client_kind must be any or one of \(ClientKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kind = known
        }
        var connected: Bool?
        switch q["connected"] {
        case nil: break
        case "true": connected = true
        case "false": connected = false
        case let v?: throw .badRequest("connected must be true or false, got '\(v)'")
        }
        guard q["client_kind"] != nil || q["client_id"] != nil || connected != nil else { return nil }
        return ClientFilter(kind: kind, id: q["client_id"], connected: connected)
    }

    /// `POST /api/v1/devices`.
    public func createDevice(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let body = try c.jsonBody()
        if body.object["client"] != nil {
            throw .badRequest("client: a real client's device is made by the client itself (docs/real-clients.md), not through the control API")
        }
        let d = try engine.createDevice(try Self.deviceSpec(body))
        return ok(render(d), status: 201)
    }

    /// `GET /api/v1/devices/{token}`: by token or fid; `?endpoint_base=` shows a web device's
    /// endpoint on that origin instead of the server's own.
    public func device(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let d = try engine.device(tokenOrFID: c["token"])
        if let base = c.query["endpoint_base"] { return ok(engine.renderDevice(d, endpointBase: try Self.endpointBase(base))) }
        return ok(render(d))
    }

    /// `POST /api/v1/devices/{token}/web-push/expire`: ends the web device's subscription.
    public func expireWebPush(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(render(try engine.expireWebPush(c["token"])))
    }

    /// An `endpoint_base`: an `http` or `https` origin (no path, query or fragment); a final `/`
    /// is dropped.
    static func endpointBase(_ given: String) throws(ControlError) -> String {
        var base = given
        while base.hasSuffix("/") { base.removeLast() }
        let lower = base.lowercased()
        let rest = lower.hasPrefix("https://") ? base.dropFirst(8) : lower.hasPrefix("http://") ? base.dropFirst(7) : nil
        guard let rest, !rest.isEmpty, base.utf8.count <= 256,
            !rest.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0 == " " || $0 == "@" })
        else { throw .badRequest("endpoint_base must be an http:// or https:// origin, such as http://127.0.0.1:8080") }
        return base
    }

    /// `PATCH /api/v1/devices/{token}`: `{"online": Bool}` and, for an `ios` device,
    /// `{"expires_at": "RFC 3339" | null}` (when its APNs token expires: `ExpiredToken`).
    public func setOnline(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let body = try c.jsonBody()
        try body.allow(["online", "expires_at"])
        let online = try body.bool("online")
        var device: Device?
        if let value = body.object["expires_at"] {
            var at: Int64?
            if !value.isNull {
                guard let text = value.stringValue, let ms = parseRFC3339(text) else {
                    throw .badRequest("expires_at must be an RFC 3339 time (2030-01-01T00:00:00Z) or null")
                }
                at = ms
            }
            device = try engine.setAPNsExpiry(c["token"], at: at)
        }
        if let online { device = try engine.setOnline(c["token"], online) }
        guard let device else { throw .badRequest("online (true or false) or expires_at is required") }
        return ok(render(device))
    }

    /// `DELETE /api/v1/devices/{token}`.
    public func deleteDevice(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteDevice(c["token"])
        return Self.noContent
    }

    /// `POST /api/v1/devices/{token}:unregister`.
    public func unregister(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(render(try engine.unregister(c["token"])))
    }

    /// `POST /api/v1/devices/{token}:refresh`.
    public func refresh(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(render(try engine.refresh(c["token"])))
    }

    /// `POST /api/v1/devices/{token}/upstream`: a message from the device to its app server.
    public func sendUpstream(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let body = try c.jsonBody()
        try body.allow(["data", "message_id", "time_to_live"])
        var data: JSONObject?
        if let v = body.object["data"], !v.isNull {
            guard let o = v.objectValue else { throw .badRequest("data must be an object") }
            data = o
        }
        let up = try engine.createUpstream(token: c["token"], data: data, messageID: try body.string("message_id"),
                                           timeToLive: try body.int("time_to_live"))
        return ok(up.json, status: 201)
    }

    /// `POST /api/v1/devices/{token}/topics/{topic}`.
    public func subscribe(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(render(try engine.subscribe(c["token"], topic: c["topic"])))
    }

    /// `DELETE /api/v1/devices/{token}/topics/{topic}`.
    public func unsubscribe(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(render(try engine.unsubscribe(c["token"], topic: c["topic"])))
    }

    /// `GET /api/v1/devices/{token}/messages`: the inbox, a long poll with `?wait=`.
    public func inbox(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let q = c.query
        try q.allowOnly(Self.inboxParameters)
        let waitS = try q.double("wait") ?? 0
        guard (0...60).contains(waitS) else { throw .badRequest("wait must be 0 to 60 seconds") }
        let min = try q.int("min") ?? 1
        guard min >= 0 else { throw .badRequest("min must not be negative") }
        let responder = c.responder
        switch q["order"] ?? "oldest" {
        case "oldest": break
        case "newest":
            guard waitS == 0 else { throw .badRequest("wait works with order=oldest only") }
            let page = try engine.inbox(c["token"], status: q["status"], afterID: try q.cursor() ?? 0, limit: try q.limit(),
                                        newestFirst: true)
            return ok(Render.list(page.items.map(Render.inboxEntry), next: page.next))
        default: throw .badRequest("order must be oldest or newest")
        }
        engine.waitForInbox(c["token"], status: q["status"], afterID: try q.cursor() ?? 0, limit: try q.limit(),
                            min: Int(min), waitSeconds: waitS) { result in
            switch result {
            case .success(let page): responder.send(HTTPResponse(status: 200, contentType: ContentType.json,
                                                                 body: Render.list(page.items.map(Render.inboxEntry), next: page.next)))
            case .failure(let e): responder.send(Self.errorResponse(e))
            }
        }
        return nil
    }

    /// `GET /api/v1/devices/{token}/messages/{id}`: one inbox entry, by its message id.
    public func inboxEntry(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.inboxEntry(try engine.inboxEntry(c["token"], messageID: c["id"])))
    }

    /// A device from its JSON form (`POST /api/v1/devices` and fixtures).
    public static func deviceSpec(_ b: Body) throws(ControlError) -> DeviceSpec {
        try b.allow(["token", "sender_id", "app", "platform", "online", "fid", "apns_token", "apns_environment",
                     "application_server_key", "state"])
        guard let sender = try b.string("sender_id") else { throw .badRequest("\(b.path)sender_id is required") }
        var environment: APNsEnvironment?
        if let e = try b.string("apns_environment") {
            guard let known = APNsEnvironment(rawValue: e) else { throw .badRequest("\(b.path)apns_environment must be sandbox or production") }
            environment = known
        }
        var spec = DeviceSpec(token: try b.string("token"), senderID: sender, app: try b.string("app"),
                              platform: try b.platform("platform") ?? .android, online: try b.bool("online") ?? true,
                              fid: try b.string("fid"), apnsToken: try b.string("apns_token"), apnsEnvironment: environment,
                              applicationServerKey: try b.string("application_server_key"))
        if let state = try b.string("state") {
            // A refreshed device needs the device that replaced it: only the control call makes one.
            guard let known = DeviceState(rawValue: state), known != .refreshed else {
                throw .badRequest("\(b.path)state must be registered or unregistered")
            }
            spec.state = known
        }
        return spec
    }

    private func render(_ d: Device) -> String {
        engine.renderDevice(d)
    }
}
