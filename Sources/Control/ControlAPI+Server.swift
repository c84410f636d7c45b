public import RoomKit
import FCMStore
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer
import Platform

/// The server as a whole: health, reset, the mock's clock.
extension ControlAPI {
    /// `GET /api/v1/health` (open even with a control token): 200 with `"status": "ok"`, or 503
    /// with `"status": "failing"` while the store cannot write (`store` says why). It reads
    /// nothing from the store's connection: the message count is the pruner's running one, the
    /// size the files' (docs/storage.md).
    public func health(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let store = engine.storeHealth
        let failure = store.failure
        var w = JSONWriter()
        w.beginObject()
        w.key("status"); w.value(failure == nil ? "ok" : "failing")
        w.key("store"); w.value(failure.map { "failing: \($0.reason)" } ?? "ok")
        w.key("store_messages"); w.value(store.messages)
        w.key("store_bytes"); w.value(store.bytes)
        w.key("version"); w.value(fcmMockVersion)
        w.key("uptime_s"); w.value(Int64((monotonicNanos() - engine.startedAt) / 1_000_000_000))
        w.key("event_readers"); w.value(engine.events.readerCount)
        w.key("tls_ca")
        if let tlsCA { w.value(tlsCA) } else { w.null() }
        w.key("apns"); apnsHealth(&w)
        let webPush = engine.webPushHealth()
        w.key("webpush"); w.beginObject()
        w.key("endpoint_base"); w.value(webPush.base)
        w.key("subscriptions"); w.value(webPush.subscriptions)
        w.key("expired_subscriptions"); w.value(webPush.expired)
        w.key("pushes"); w.value(webPush.counts.pushes)
        w.key("undecryptable"); w.value(webPush.counts.undecryptable)
        w.endObject()
        // Real receiving clients (docs/real-clients.md).
        let clients = engine.clientCounts()
        w.key("clients"); w.beginObject()
        w.key("autopush_connections"); w.value(clients.connections[.autopush] ?? 0)
        let mcs = mcsStatus()
        w.key("mcs"); w.beginObject()
        w.key("listening"); w.value(mcs.0)
        w.key("connections"); w.value(mcs.1)
        w.endObject()
        w.key("checkins"); w.value(clients.clients[.gcm] ?? 0)
        w.key("uaids"); w.value(clients.clients[.autopush] ?? 0)
        w.key("installations"); w.value(engine.installationCount())
        w.endObject()
        w.endObject()
        return ok(w.string, status: failure == nil ? 200 : 503)
    }

    /// Health's `apns` member: the environment a request to a host that is not Apple's gets,
    /// the environments served (the host picks), how it is served (h2c on the plain port, TLS on
    /// `--https-port`), and how many teams and signing keys there are.
    private func apnsHealth(_ w: inout JSONWriter) {
        w.beginObject()
        w.key("default_environment"); w.value(apnsEnvironment.rawValue)
        w.key("environments"); w.beginArray()
        for e in APNsEnvironment.allCases { w.value(e.rawValue) }
        w.endArray()
        w.key("h2c"); w.value(true)
        w.key("tls"); w.value(apnsTLS)
        w.key("teams"); w.value(engine.apnsTeams().count)
        w.key("keys"); w.value(engine.apnsKeys().count)
        w.endObject()
    }

    /// `GET /readyz` (open even with a control token): 200 `{"status":"ready"}` once every
    /// listener is up and the store can write; 503 `{"status":"starting"|"failing","reason":…}`
    /// before, and while the store is failing. What a container's health check and an
    /// orchestrator's readiness probe ask; it reads nothing from the store.
    public func readyz(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        var w = JSONWriter()
        w.beginObject()
        let ready: Bool
        if !readiness.areListenersUp {
            ready = false
            w.key("status"); w.value("starting")
            w.key("reason"); w.value("the listeners are not all up yet")
        } else if let failure = engine.storeFailure {
            ready = false
            w.key("status"); w.value("failing")
            w.key("reason"); w.value("store failing: \(failure.reason)")
        } else {
            ready = true
            w.key("status"); w.value("ready")
        }
        w.endObject()
        return ok(w.string, status: ready ? 200 : 503)
    }

    /// `GET /livez` (open even with a control token): 200 `{"status":"alive"}` while the process
    /// answers at all, store failing or not (restarting would not mend a full disk).
    public func livez(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(#"{"status":"alive"}"#)
    }

    /// `GET /api/v1/tls/ca.pem`: the local CA of `--https-port`, for clients to trust.
    public func tlsCAFile(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        guard let tlsCA else { throw .notFound("no local CA: the server runs without --https-port, or with --tls-cert") }
        guard let pem = SystemIO.readFile(tlsCA) else { throw .internal("cannot read \(tlsCA)") }
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/x-pem-file")], body: pem)
    }

    /// `POST /api/v1/reset`: back to the state right after start; the fixtures loaded then are
    /// applied again (`?fixtures=false` leaves the store empty but for the projects). Real
    /// clients keep their devices and connections (`?clients=false` forgets them).
    public func reset(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let fixtures: Bool, clients: Bool
        switch c.query["fixtures"] {
        case nil, "true": fixtures = true
        case "false": fixtures = false
        case let v?: throw .badRequest("fixtures must be true or false, got '\(v)'")
        }
        switch c.query["clients"] {
        case nil, "true": clients = true
        case "false": clients = false
        case let v?: throw .badRequest("clients must be true or false, got '\(v)'")
        }
        try Fixtures.reset(fixtures ? engine.startFixtures.withLock { $0 } : [], engine, keepClients: clients)
        return Self.noContent
    }

    /// `GET /api/v1/clock`.
    public func clock(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(clockJSON())
    }

    /// `POST /api/v1/clock`: `{"advance_s": N}` or `{"reset": true}`.
    public func setClock(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let body = try c.jsonBody()
        try body.allow(["advance_s", "reset"])
        if try body.bool("reset") == true, try body.int("advance_s") != nil {
            throw .badRequest("give advance_s or reset: true, not both")
        }
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
    }

    /// How far ahead the mock's clock may run: 100 years (dates stay printable, sums stay in range).
    static let maxClockOffsetSeconds: Int64 = 100 * 36525 * 864

    private func clockJSON() -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("now"); w.value(rfc3339(millis: engine.clock.nowMillis()))
        w.key("offset_s"); w.value(engine.clock.offsetSeconds)
        w.endObject()
        return w.string
    }
}
