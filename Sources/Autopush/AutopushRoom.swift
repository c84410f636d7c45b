public import FCMEngine
import FCMModel
public import HTTPServer
public import RoomKit
import FCMCore
import Dispatch
import Synchronization

/// Firefox's push service: Mozilla's autopush WebSocket protocol (docs/real-clients.md), on
/// `GET /autopush` of the plain and HTTPS ports (`ws://`, `wss://`) and on `GET /` when the
/// upgrade offers the subprotocol `push-notification`. Each channel a browser registers is a
/// `web` device of the engine whose pushes are relayed to the browser unread; the browser's
/// acknowledgements are what happened to them.
///
/// The room keeps the open sessions by client (uaid); the engine keeps the clients, their
/// devices and every delivery's state, and tells the room what to write (`deliver`).
public final class AutopushRoom: Sendable {
    let engine: Engine
    let log: Log
    let options: WebSocketOptions
    /// The session that speaks for each client now (one connection per uaid).
    let sessions = Mutex<[String: AutopushSession]>([:])
    /// The open sessions by connection (`ws3`), from the upgrade on: a write decided while a
    /// hello is being recorded names the new connection before the session speaks for its client.
    let byConnection = Mutex<[String: AutopushSession]>([:])
    /// Sessions open, said hello or not.
    let open = Atomic<Int>(0)

    /// The subprotocol Firefox offers.
    static let subprotocol = "push-notification"
    /// Seconds a new connection has to say hello.
    static let helloSeconds = 10
    /// autopush's close code telling a client to back off until it restarts.
    static let backoffCode: UInt16 = 4774

    /// `idleSeconds`: a connection silent this long is closed (1000); twice Firefox's default
    /// ping interval unless configured (`Configuration.autopushIdleSeconds`).
    public init(engine: Engine, log: Log, idleSeconds: Int = 3600) {
        self.engine = engine
        self.log = log
        var o = WebSocketOptions()
        o.maxMessageBytes = 64 * 1024
        o.idleSeconds = idleSeconds
        o.firstMessageSeconds = Self.helloSeconds
        o.firstMessageReason = "no hello within \(Self.helloSeconds) s of the upgrade"
        options = o
        engine.setClientRoom(.autopush) { [weak self] orders in self?.deliver(orders) }
    }

    /// Connections open now.
    public var connections: Int { open.load(ordering: .relaxed) }

    /// Whether `r` is an upgrade to autopush on `GET /` (Firefox's default server URL).
    public static func isAutopushUpgrade(_ r: HTTPRequest) -> Bool {
        WebSocketUpgrade.isUpgrade(r) && WebSocketUpgrade.offeredProtocols(r).contains(subprotocol)
    }

    /// `GET /autopush` (and `GET /` offering `push-notification`): the WebSocket upgrade.
    public func upgrade(_ r: HTTPRequest, _ p: PathParams, _ responder: HTTPResponder) {
        if let refusal = WebSocketUpgrade.refusal(r) { return responder.send(refusal) }
        let target: AutopushTarget
        switch AutopushTarget.of(r, engine: engine) {
        case .failure(let why): return responder.send(HTTPResponse(status: 400, contentType: ContentType.text, body: why.text + "\n"))
        case .success(let t): target = t
        }
        let offered = WebSocketUpgrade.offeredProtocols(r).contains(Self.subprotocol)
        let session = AutopushSession(room: self, target: target, userAgent: r.header("user-agent"))
        responder.send(WebSocketUpgrade.accept(r, subprotocol: offered ? Self.subprotocol : nil, handler: session, options: options))
    }

    // MARK: Orders from the engine

    /// Writes what the engine decided: pushes on their clients' connections, closes.
    func deliver(_ orders: ClientOrders) {
        let now = sessions.withLock { $0 }
        let open = byConnection.withLock { $0 }
        for w in orders.writes {
            // The connection it was decided for (its session writes nothing for another).
            guard let session = open[w.connectionID] ?? now[w.clientID] else { continue }
            if let ms = w.delayMillis, ms > 0 {
                // `sent` from when it is written (the engine says whether it is still wanted).
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(ms))) { [engine] in
                    if engine.delayedWriteDue(w) { session.write(w) }
                }
            } else {
                session.write(w)
            }
        }
        for c in orders.close {
            guard let session = open[c.connectionID] ?? now[c.clientID], session.connectionID == c.connectionID else { continue }
            session.close(code: c.backoff ? Self.backoffCode : 1000, reason: c.reason)
        }
    }

    /// `session` said hello as `clientID`: it speaks for the client from now on.
    func adopt(_ session: AutopushSession, as clientID: String) {
        sessions.withLock { $0[clientID] = session }
    }

    /// `session` ended: it no longer speaks for its client (unless a newer one took over).
    func release(_ session: AutopushSession, clientID: String) {
        sessions.withLock { s in if s[clientID] === session { s[clientID] = nil } }
    }

    /// A new uaid: 32 lowercase hexadecimal digits.
    static func newUAID() -> String {
        var rng = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: (0..<32).map { _ in digits[Int.random(in: 0..<16, using: &rng)] }, as: UTF8.self)
    }
}

/// Where a connection's devices belong and how their endpoints are written, from the upgrade.
struct AutopushTarget: Sendable {
    let senderID: String
    let app: String
    /// The start of each endpoint, its id after it.
    let endpointPrefix: String
    let secure: Bool

    /// Why an upgrade's query is refused (400).
    struct Refusal: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    /// Mozilla's name for its push service: a browser reaching the mock by it is given Mozilla's
    /// endpoint form.
    static let mozillaHost = "push.services.mozilla.com"
    static let mozillaEndpoints = "https://updates.push.services.mozilla.com/wpush/v2/"

    /// The query's `project=`, `app=` and `endpoint_base=`, or why they are refused.
    static func of(_ r: HTTPRequest, engine: Engine) -> Result<AutopushTarget, Refusal> {
        var q: [String: String] = [:]
        for (k, v) in r.rawQuery {
            guard let key = FormBody.percentDecode(k.utf8, plusIsSpace: true),
                  let value = FormBody.percentDecode((v ?? "").utf8, plusIsSpace: true) else { return .failure(Refusal("the query is not valid percent-encoding")) }
            q[key] = value
        }
        let senderID: String
        if let name = q["project"] {
            guard let p = engine.project(named: name) else { return .failure(Refusal("project '\(name)' is not a configured project (a project id or sender id)")) }
            senderID = p.senderID
        } else {
            guard let first = engine.firstProjectID() else { return .failure(Refusal("no project is configured: add one, or name it with ?project=")) }
            senderID = first
        }
        let app = q["app"].flatMap { $0.isEmpty ? nil : $0 } ?? "autopush"
        let prefix: String
        if let base = q["endpoint_base"] {
            guard let origin = Self.origin(base) else {
                return .failure(Refusal("endpoint_base must be an origin: http:// or https://, a host and an optional port, no path"))
            }
            prefix = origin + WebPushEndpoints.path
        } else {
            let host = r.header("host") ?? "127.0.0.1"
            let name = host.split(separator: ":", maxSplits: 1).first.map(String.init)?.lowercased() ?? host
            prefix = name == mozillaHost ? mozillaEndpoints : (r.isSecure ? "https://" : "http://") + host + WebPushEndpoints.path
        }
        return .success(AutopushTarget(senderID: senderID, app: app, endpointPrefix: prefix, secure: r.isSecure))
    }

    /// `s` as an origin (scheme, host, port; a trailing `/` dropped), or nil.
    static func origin(_ s: String) -> String? {
        var text = s
        if text.hasSuffix("/") { text.removeLast() }
        let scheme: String
        if text.hasPrefix("http://") { scheme = "http://" } else if text.hasPrefix("https://") { scheme = "https://" } else { return nil }
        let rest = text.dropFirst(scheme.count)
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#"), !rest.contains("@"),
              rest.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return scheme + rest
    }
}
