/// Everything `fcm-mock serve` can be told, after flags, environment and defaults are merged.
public struct Configuration: Sendable {
    public var host = "127.0.0.1"
    public var httpPort = 8080
    public var xmppPort = 5235
    public var dbPath = "./data/fcm-mock.sqlite"
    /// Fixture files or folders; empty means the bundled `fixtures/default.json`.
    public var fixtures: [String] = []
    public var unknownTokens: UnknownTokenPolicy = .register
    public var acceptAnyKey = false
    public var controlToken: String?
    public var logLevel = "info"
    public var logFormat = "text"
    /// `--device-rate N/PERIOD` and `--topic-rate N/PERIOD` (off when nil).
    public var deviceRate: RateLimit?
    public var topicRate: RateLimit?
    /// Most `&&`/`||` operators in a condition (`--max-condition-operators`; the seeds: 2).
    public var maxConditionOperators = 2
    /// `--xmpp-tls`: the XMPP port speaks TLS from the first byte.
    public var xmppTLS = false
    /// `--http-tls`: the HTTP port speaks HTTPS.
    public var httpTLS = false
    /// `--tls-cert` / `--tls-key` (PEM); absent with TLS asked for: a self-signed pair is made.
    public var tlsCert: String?
    public var tlsKey: String?
    /// Largest request body; bigger ones get 413.
    public var maxBodyBytes = 1 << 20
    /// Most XMPP connections one sender id may hold at once (CCS allowed 1000); no flag sets it,
    /// tests lower it.
    public var xmppConnectionsPerSender = 1000
    /// Seconds an XMPP client has to authenticate and bind before it is disconnected
    /// (`connection-timeout`); no flag sets it, tests lower it.
    public var xmppLoginTimeout = 30
    /// XMPP connections open at once, logged in or not (each holds a thread); no flag sets it,
    /// tests lower it.
    public var xmppMaxConnections = 5000
    /// Milliseconds between keep-alive comments on event streams; no flag sets it, tests lower it.
    public var eventKeepaliveMillis = 15_000

    /// Defaults.
    public init() {}
}

/// A configuration problem: one line for stderr, exit code 2.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension Configuration {
    /// Builds the configuration of `serve` from its arguments and the environment; flags win over
    /// variables, variables over defaults.
    public static func parse(arguments: [String], environment: [String: String]) throws(ConfigurationError) -> Configuration {
        var c = Configuration()
        func port(_ s: String, _ name: String) throws(ConfigurationError) -> Int {
            guard let p = Int(s), (0...65535).contains(p) else { throw ConfigurationError("\(name) must be a port number 0-65535, got '\(s)'") }
            return p
        }
        func bool(_ s: String, _ name: String) throws(ConfigurationError) -> Bool {
            switch s.lowercased() {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off", "": return false
            default: throw ConfigurationError("\(name) must be true or false, got '\(s)'")
            }
        }
        func policy(_ s: String, _ name: String) throws(ConfigurationError) -> UnknownTokenPolicy {
            guard let p = UnknownTokenPolicy(rawValue: s) else { throw ConfigurationError("\(name) must be register or reject, got '\(s)'") }
            return p
        }
        func level(_ s: String, _ name: String) throws(ConfigurationError) -> String {
            guard ["debug", "info", "warning", "error"].contains(s) else { throw ConfigurationError("\(name) must be debug, info, warning or error") }
            return s
        }
        func rate(_ s: String, _ name: String) throws(ConfigurationError) -> RateLimit {
            guard let r = RateLimit.parse(s) else {
                throw ConfigurationError("\(name) must be N/PERIOD, e.g. 240/60s, 10/1s or 1000/1h, got '\(s)'")
            }
            return r
        }
        func operators(_ s: String, _ name: String) throws(ConfigurationError) -> Int {
            guard let n = Int(s), (1...20).contains(n) else { throw ConfigurationError("\(name) must be a number from 1 to 20, got '\(s)'") }
            return n
        }
        let env = environment
        if let v = env["FCM_MOCK_HTTP_PORT"] { c.httpPort = try port(v, "FCM_MOCK_HTTP_PORT") }
        if let v = env["FCM_MOCK_XMPP_PORT"] { c.xmppPort = try port(v, "FCM_MOCK_XMPP_PORT") }
        if let v = env["FCM_MOCK_HOST"], !v.isEmpty { c.host = v }
        if let v = env["FCM_MOCK_HTTP_TLS"], !v.isEmpty { c.httpTLS = try bool(v, "FCM_MOCK_HTTP_TLS") }
        if let v = env["FCM_MOCK_XMPP_TLS"], !v.isEmpty { c.xmppTLS = try bool(v, "FCM_MOCK_XMPP_TLS") }
        if let v = env["FCM_MOCK_TLS_CERT"], !v.isEmpty { c.tlsCert = v }
        if let v = env["FCM_MOCK_TLS_KEY"], !v.isEmpty { c.tlsKey = v }
        if let v = env["FCM_MOCK_DB"], !v.isEmpty { c.dbPath = v }
        if let v = env["FCM_MOCK_FIXTURES"], !v.isEmpty { c.fixtures = v.split(separator: ":").map(String.init) }
        if let v = env["FCM_MOCK_UNKNOWN_TOKENS"], !v.isEmpty { c.unknownTokens = try policy(v, "FCM_MOCK_UNKNOWN_TOKENS") }
        if let v = env["FCM_MOCK_ACCEPT_ANY_KEY"] { c.acceptAnyKey = try bool(v, "FCM_MOCK_ACCEPT_ANY_KEY") }
        if let v = env["FCM_MOCK_CONTROL_TOKEN"], !v.isEmpty { c.controlToken = v }
        if let v = env["FCM_MOCK_LOG_LEVEL"], !v.isEmpty { c.logLevel = try level(v, "FCM_MOCK_LOG_LEVEL") }
        if let v = env["FCM_MOCK_LOG_FORMAT"], !v.isEmpty {
            guard ["text", "json"].contains(v) else { throw ConfigurationError("FCM_MOCK_LOG_FORMAT must be text or json, got '\(v)'") }
            c.logFormat = v
        }
        if let v = env["FCM_MOCK_DEVICE_RATE"], !v.isEmpty { c.deviceRate = try rate(v, "FCM_MOCK_DEVICE_RATE") }
        if let v = env["FCM_MOCK_TOPIC_RATE"], !v.isEmpty { c.topicRate = try rate(v, "FCM_MOCK_TOPIC_RATE") }
        if let v = env["FCM_MOCK_MAX_CONDITION_OPERATORS"], !v.isEmpty { c.maxConditionOperators = try operators(v, "FCM_MOCK_MAX_CONDITION_OPERATORS") }

        var flagFixtures: [String] = []
        var i = 0
        func value(_ flag: String) throws(ConfigurationError) -> String {
            i += 1
            guard i < arguments.count else { throw ConfigurationError("\(flag) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            var arg = arguments[i]
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                inline = String(arg[arg.index(after: eq)...])
                arg = String(arg[..<eq])
            }
            func v() throws(ConfigurationError) -> String {
                if let inline { return inline }
                return try value(arg)
            }
            switch arg {
            case "--http-port": c.httpPort = try port(try v(), arg)
            case "--xmpp-port": c.xmppPort = try port(try v(), arg)
            case "--host": c.host = try v()
            case "--db": c.dbPath = try v()
            case "--fixtures": flagFixtures.append(try v())
            case "--unknown-tokens": c.unknownTokens = try policy(try v(), arg)
            case "--accept-any-key": c.acceptAnyKey = inline.map { (try? bool($0, arg)) ?? true } ?? true
            case "--control-token": c.controlToken = try v()
            case "--device-rate": c.deviceRate = try rate(try v(), arg)
            case "--topic-rate": c.topicRate = try rate(try v(), arg)
            case "--max-condition-operators": c.maxConditionOperators = try operators(try v(), arg)
            case "--log-level": c.logLevel = try level(try v(), arg)
            case "--log-format":
                let f = try v()
                guard ["text", "json"].contains(f) else { throw ConfigurationError("--log-format must be text or json") }
                c.logFormat = f
            case "--xmpp-tls": c.xmppTLS = inline.map { (try? bool($0, arg)) ?? true } ?? true
            case "--tls-cert": c.tlsCert = try v()
            case "--tls-key": c.tlsKey = try v()
            case "--http-tls": c.httpTLS = inline.map { (try? bool($0, arg)) ?? true } ?? true
            default:
                throw ConfigurationError("unknown option '\(arguments[i])' (see fcm-mock --help)")
            }
            i += 1
        }
        if !flagFixtures.isEmpty { c.fixtures = flagFixtures }
        if c.dbPath.isEmpty { throw ConfigurationError("--db must not be empty") }
        if (c.tlsCert == nil) != (c.tlsKey == nil) { throw ConfigurationError("--tls-cert and --tls-key go together") }
        return c
    }
}
