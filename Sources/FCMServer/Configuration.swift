import RoomKit
import FCMEngine
public import FCMModel
public import FCMCore
/// Everything `fcm-mock serve` can be told, after flags, environment and defaults are merged.
public struct Configuration: Sendable {
    public var host = "127.0.0.1"
    public var httpPort = 8080
    public var xmppPort = 5235
    /// `--xmpp-port` (or its variable) was given: the port is the caller's, never another.
    public var xmppPortGiven = false
    public var dbPath = "./data/fcm-mock.sqlite"
    /// `--store-max-pages`: the store file may hold at most this many pages (a test aid that
    /// fills the store like a full disk); nil: no cap.
    public var storeMaxPages: Int?
    /// `--max-messages`: the most message records the store keeps (the oldest go first).
    public var maxMessages: MessageLimit = .storeDefault
    /// `--max-age`: records accepted longer ago than this many seconds (on the mock's clock) go;
    /// nil: no age limit.
    public var maxAgeSeconds: Int64?
    /// Fixture files or folders; empty means the bundled `fixtures/default.json`.
    public var fixtures: [String] = []
    public var unknownTokens: UnknownTokenPolicy = .register
    public var acceptAnyKey = false
    /// `--apns-environment`: the APNs environment of a request to a host that is not Apple's.
    public var apnsEnvironment: APNsEnvironment = .sandbox
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
    /// `--http-loops`: the threads serving HTTP/1.1 (both ports); nil: one per core the process
    /// may use.
    public var httpLoops: Int?
    /// `--https-port`: a TLS port (ALPN h2 and http/1.1) for every HTTP path; nil: none.
    public var httpsPort: Int?
    /// `--mcs-port`: Google's MCS (mtalk) for real GCM clients, TLS from the first byte; nil: none.
    public var mcsPort: Int?
    /// Seconds an MCS connection may stay silent (no byte) before it is closed. No flag: tests set it.
    public var mcsIdleSeconds = 3600
    /// `--tls-dir`: where the local CA of `--https-port` lives (nil: beside the store, see
    /// `tlsDirectory`).
    public var tlsDir: String?
    /// `--tls-cert` / `--tls-key` (PEM); absent with TLS asked for: a self-signed pair is made.
    public var tlsCert: String?
    public var tlsKey: String?
    /// `--web-push-origin`: the origin of every Web Push endpoint (`https://fcm.googleapis.com`
    /// for a library that must post to Google's host); nil: the mock's own origin, so a test
    /// posting to a subscription never leaves the machine unless told to (see
    /// `Application.webPushEndpointBase`).
    public var webPushOrigin: String?
    /// Largest request body; bigger ones get 413.
    public var maxBodyBytes = 1 << 20
    /// Most XMPP connections one sender id may hold at once (CCS allowed 1000); no flag sets it,
    /// tests lower it.
    public var xmppConnectionsPerSender = 1000
    /// Seconds an XMPP client has to authenticate and bind before it is disconnected
    /// (`connection-timeout`); no flag sets it, tests lower it.
    public var xmppLoginTimeout = 30
    /// Seconds an XMPP stanza has from its first byte to its last (no flag; tests lower it).
    public var xmppStanzaTimeout = 30
    /// XMPP connections open at once, logged in or not (each holds a thread); no flag sets it,
    /// tests lower it.
    public var xmppMaxConnections = 5000
    /// Milliseconds between keep-alive comments on event streams; no flag sets it, tests lower it.
    public var eventKeepaliveMillis = 15_000
    /// Seconds an HTTP/2 connection may stay idle (real time) before GOAWAY with Apple's
    /// `{"reason":"IdleTimeout"}` (Apple: one hour); no flag sets it, tests lower it.
    public var http2IdleSeconds = 3600
    /// Seconds an autopush connection may stay silent before it is closed (1000): twice
    /// Firefox's default ping interval. No flag: tests set it.
    public var autopushIdleSeconds = 3600

    /// Defaults.
    public init() {}
}

/// What `--max-messages` says.
public enum MessageLimit: Sendable, Equatable {
    /// Not given: 100,000 for a `:memory:` store (it lives in RAM), no limit for a file.
    case storeDefault
    /// `none`: no limit, even for `:memory:`.
    case unlimited
    case count(Int)
}

extension Configuration {
    /// The limit a `:memory:` store gets when `--max-messages` is not given.
    public static let memoryStoreMaxMessages = 100_000
    /// The longest `--max-age`: 100 years (the mock's clock runs at most that far ahead).
    static let maxAgeLimitSeconds: Int64 = 100 * 36525 * 864

    /// The limits the store is kept within, `--max-messages`'s default resolved for `--db`.
    public var storageLimits: StorageLimits {
        let count: Int?
        switch maxMessages {
        case .storeDefault: count = dbPath == ":memory:" ? Self.memoryStoreMaxMessages : nil
        case .unlimited: count = nil
        case .count(let n): count = n
        }
        return StorageLimits(maxMessages: count, maxAgeSeconds: maxAgeSeconds)
    }

    /// Parses a duration of `--max-age`: a whole number of seconds, or one with a unit, `30s`,
    /// `15m`, `12h`, `7d` (the units of `--device-rate` periods, and days); at least a second, at
    /// most 100 years. Nil for anything else.
    public static func durationSeconds(_ text: String) -> Int64? {
        let (digits, size) = splitUnit(Substring(text), [("s", 1), ("m", 60), ("h", 3600), ("d", 86400)])
        let unit = size ?? 1
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits.count <= 12,
              let n = Int64(digits), n >= 1 else { return nil }
        let total = n * unit
        return total <= maxAgeLimitSeconds ? total : nil
    }
}

/// A configuration problem: one line for stderr, exit code 2.
/// One `serve` option: the flag, the environment variable that sets it too, the default and
/// the help line, and how a value sets the configuration. `Configuration.parse` and `serve`'s
/// help both read `Configuration.options`, so neither can forget a flag the other knows.
public struct ServeOption: Sendable {
    /// `--http-port`.
    public let flag: String
    /// The value's placeholder in help (`PORT`); nil for a switch (`--http-tls`, or `--http-tls=false`).
    public let value: String?
    /// `FCM_MOCK_HTTP_PORT`; nil when only the flag exists.
    public let environment: String?
    /// The default as help shows it.
    public let defaultText: String
    public let help: String
    /// Sets the value; `name` is the flag or variable, for the error message.
    let apply: @Sendable (inout Configuration, _ value: String, _ name: String) throws(ConfigurationError) -> Void
}

extension Configuration {
    /// Every option of `serve`, in the order help lists them.
    public static let options: [ServeOption] = [
        ServeOption(flag: "--http-port", value: "PORT", environment: "FCM_MOCK_HTTP_PORT", defaultText: "8080",
                    help: "HTTP port: FCM, Instance ID, control API, web page (0 picks a free port)") { c, v, n throws(ConfigurationError) in
            c.httpPort = try port(v, n)
        },
        ServeOption(flag: "--xmpp-port", value: "PORT", environment: "FCM_MOCK_XMPP_PORT", defaultText: "5235",
                    help: "XMPP (CCS) port (0 picks a free port; not given while another port is 0: a free one when 5235 is taken)") { c, v, n throws(ConfigurationError) in
            c.xmppPort = try port(v, n)
            c.xmppPortGiven = true
        },
        ServeOption(flag: "--host", value: "ADDRESS", environment: "FCM_MOCK_HOST", defaultText: "127.0.0.1",
                    help: "address both listeners bind (0.0.0.0 for every interface)") { c, v, _ throws(ConfigurationError) in
            c.host = v
        },
        ServeOption(flag: "--db", value: "FILE|:memory:", environment: "FCM_MOCK_DB", defaultText: "./data/fcm-mock.sqlite",
                    help: "the SQLite store (one server per file); :memory: keeps nothing") { c, v, n throws(ConfigurationError) in
            guard !v.isEmpty else { throw ConfigurationError("\(n) must not be empty") }
            c.dbPath = v
        },
        ServeOption(flag: "--store-max-pages", value: "N", environment: "FCM_MOCK_STORE_MAX_PAGES", defaultText: "no cap",
                    help: "test aid: the store file grows to at most N pages (2 KiB each; 4 KiB in a store made by an older version), then writes fail as on a full disk") {
            c, v, n throws(ConfigurationError) in
            guard let k = Int(v), k >= 1 else { throw ConfigurationError("\(n) must be a number of pages >= 1, got '\(v)'") }
            c.storeMaxPages = k
        },
        ServeOption(flag: "--max-messages", value: "N|none", environment: "FCM_MOCK_MAX_MESSAGES",
                    defaultText: "100000 for :memory:, none for a file",
                    help: "keep at most N message records: the oldest go first, in the background; one a device still holds waits for its TTL") {
            c, v, n throws(ConfigurationError) in
            if v == "none" {
                c.maxMessages = .unlimited
                return
            }
            guard v.allSatisfy({ $0.isASCII && $0.isNumber }), v.count <= 12, let k = Int(v), k >= 1 else {
                throw ConfigurationError("\(n) must be a number of messages >= 1, or none, got '\(v)'")
            }
            c.maxMessages = .count(k)
        },
        ServeOption(flag: "--max-age", value: "DURATION|none", environment: "FCM_MOCK_MAX_AGE", defaultText: "none",
                    help: "message records older than DURATION (30s, 15m, 12h, 7d; on the mock's clock) go, in the background") {
            c, v, n throws(ConfigurationError) in
            if v == "none" {
                c.maxAgeSeconds = nil
                return
            }
            guard let seconds = durationSeconds(v) else {
                throw ConfigurationError("\(n) must be a duration such as 30s, 15m, 12h or 7d (1 second to 100 years), or none, got '\(v)'")
            }
            c.maxAgeSeconds = seconds
        },
        ServeOption(flag: "--fixtures", value: "FILE_OR_DIR", environment: "FCM_MOCK_FIXTURES",
                    defaultText: "the built-in demo fixture",
                    help: "projects, devices, subscriptions, groups to load (repeatable; the variable is colon-separated; a folder means its *.json in name order); reset re-applies them") {
            c, v, n throws(ConfigurationError) in
            if n.hasPrefix("--") { c.fixtures.append(v) } else { c.fixtures = v.split(separator: ":").map(String.init) }
        },
        ServeOption(flag: "--unknown-tokens", value: "register|reject", environment: "FCM_MOCK_UNKNOWN_TOKENS", defaultText: "register",
                    help: "a well-formed unknown token becomes a new device, or gets NotRegistered") { c, v, n throws(ConfigurationError) in
            guard let p = UnknownTokenPolicy(rawValue: v) else { throw ConfigurationError("\(n) must be register or reject, got '\(v)'") }
            c.unknownTokens = p
        },
        ServeOption(flag: "--auto-register", value: nil, environment: "FCM_MOCK_AUTO_REGISTER", defaultText: "true",
                    help: "the same as --unknown-tokens register (true, the default) or reject (false): the name the contracts use") {
            c, v, n throws(ConfigurationError) in
            c.unknownTokens = try bool(v, n) ? .register : .reject
        },
        ServeOption(flag: "--apns-environment", value: "sandbox|production", environment: "FCM_MOCK_APNS_ENVIRONMENT", defaultText: "sandbox",
                    help: "the APNs environment of a request whose host is not one of Apple's (api.push.apple.com is production, the others sandbox)") {
            c, v, n throws(ConfigurationError) in
            guard let e = APNsEnvironment(rawValue: v) else { throw ConfigurationError("\(n) must be sandbox or production, got '\(v)'") }
            c.apnsEnvironment = e
        },
        ServeOption(flag: "--accept-any-key", value: nil, environment: "FCM_MOCK_ACCEPT_ANY_KEY", defaultText: "false",
                    help: "a server key no project owns counts as the first project's; so do any Bearer token and an RS256 assertion of an unknown key (v1: the path's project)") { c, v, n throws(ConfigurationError) in
            c.acceptAnyKey = try bool(v, n)
        },
        ServeOption(flag: "--control-token", value: "SECRET", environment: "FCM_MOCK_CONTROL_TOKEN", defaultText: "none (open)",
                    help: "every /api/v1 call but health needs Authorization: Bearer SECRET") { c, v, n throws(ConfigurationError) in
            // An empty one could never be sent: the control API would be closed for good.
            guard !v.isEmpty else { throw ConfigurationError("\(n) must not be empty (leave it out for an open control API)") }
            c.controlToken = v
        },
        ServeOption(flag: "--device-rate", value: "N/PERIOD", environment: "FCM_MOCK_DEVICE_RATE", defaultText: "off",
                    help: "at most N messages per device per PERIOD (500ms, 10s, 1m, 1h), then DeviceMessageRateExceeded") {
            c, v, n throws(ConfigurationError) in
            c.deviceRate = try rate(v, n)
        },
        ServeOption(flag: "--topic-rate", value: "N/PERIOD", environment: "FCM_MOCK_TOPIC_RATE", defaultText: "off",
                    help: "at most N messages per project and topic per PERIOD, then TopicsMessageRateExceeded") {
            c, v, n throws(ConfigurationError) in
            c.topicRate = try rate(v, n)
        },
        ServeOption(flag: "--max-condition-operators", value: "N", environment: "FCM_MOCK_MAX_CONDITION_OPERATORS", defaultText: "2",
                    help: "most && and || operators in a condition (1-20)") { c, v, n throws(ConfigurationError) in
            guard let k = Int(v), (1...20).contains(k) else { throw ConfigurationError("\(n) must be a number from 1 to 20, got '\(v)'") }
            c.maxConditionOperators = k
        },
        ServeOption(flag: "--https-port", value: "PORT", environment: "FCM_MOCK_HTTPS_PORT", defaultText: "off",
                    help: "TLS port for every HTTP path, HTTP/2 and HTTP/1.1 by ALPN (0 picks a free port)") { c, v, n throws(ConfigurationError) in
            c.httpsPort = try port(v, n)
        },
        ServeOption(flag: "--mcs-port", value: "PORT", environment: "FCM_MOCK_MCS_PORT", defaultText: "off",
                    help: "TLS port of Google's MCS (mtalk.google.com:5228) for real clients: Chromium, firebase-messaging (0 picks a free port)") {
            c, v, n throws(ConfigurationError) in
            c.mcsPort = try port(v, n)
        },
        ServeOption(flag: "--tls-dir", value: "DIR", environment: "FCM_MOCK_TLS_DIR",
                    defaultText: "tls/ beside --db (a temporary folder for :memory:)",
                    help: "where --https-port keeps its local CA (ca.pem, made once, reused) when no --tls-cert is given") {
            c, v, n throws(ConfigurationError) in
            guard !v.isEmpty else { throw ConfigurationError("\(n) must not be empty") }
            c.tlsDir = v
        },
        ServeOption(flag: "--tls-cert", value: "PEM", environment: "FCM_MOCK_TLS_CERT", defaultText: "a self-signed one, made at start",
                    help: "certificate for --https-port, --http-tls and --xmpp-tls (with --tls-key)") { c, v, _ throws(ConfigurationError) in
            c.tlsCert = v
        },
        ServeOption(flag: "--tls-key", value: "PEM", environment: "FCM_MOCK_TLS_KEY", defaultText: "none",
                    help: "the private key of --tls-cert") { c, v, _ throws(ConfigurationError) in
            c.tlsKey = v
        },
        ServeOption(flag: "--web-push-origin", value: "ORIGIN", environment: "FCM_MOCK_WEB_PUSH_ORIGIN",
                    defaultText: "the mock's own: http://HOST:HTTP_PORT (https://HOST:PORT when only HTTPS is served)",
                    help: "origin of Web Push subscriptions' endpoints, such as https://fcm.googleapis.com (Google's push service, reached through the local CA of --https-port); an http:// or https:// origin, no path") {
            c, v, n throws(ConfigurationError) in
            c.webPushOrigin = try origin(v, n)
        },
        ServeOption(flag: "--http-tls", value: nil, environment: "FCM_MOCK_HTTP_TLS", defaultText: "false",
                    help: "the HTTP port speaks HTTPS") { c, v, n throws(ConfigurationError) in
            c.httpTLS = try bool(v, n)
        },
        ServeOption(flag: "--http-loops", value: "N", environment: "FCM_MOCK_HTTP_LOOPS", defaultText: "one per core the process may use",
                    help: "threads serving HTTP/1.1 on both ports (1-256); each connection stays on one") { c, v, n throws(ConfigurationError) in
            guard let k = Int(v), (1...256).contains(k) else { throw ConfigurationError("\(n) must be a number from 1 to 256, got '\(v)'") }
            c.httpLoops = k
        },
        ServeOption(flag: "--xmpp-tls", value: nil, environment: "FCM_MOCK_XMPP_TLS", defaultText: "false",
                    help: "the XMPP port speaks TLS from the first byte, as Google's port 5235 did") { c, v, n throws(ConfigurationError) in
            c.xmppTLS = try bool(v, n)
        },
        ServeOption(flag: "--log-level", value: "debug|info|warning|error", environment: "FCM_MOCK_LOG_LEVEL", defaultText: "info",
                    help: "least level logged on stderr (info logs one line per request and stanza)") { c, v, n throws(ConfigurationError) in
            guard ["debug", "info", "warning", "error"].contains(v) else {
                throw ConfigurationError("\(n) must be debug, info, warning or error, got '\(v)'")
            }
            c.logLevel = v
        },
        ServeOption(flag: "--log-format", value: "text|json", environment: "FCM_MOCK_LOG_FORMAT", defaultText: "text",
                    help: "log lines as text or one JSON object each") { c, v, n throws(ConfigurationError) in
            guard ["text", "json"].contains(v) else { throw ConfigurationError("\(n) must be text or json, got '\(v)'") }
            c.logFormat = v
        },
    ]

    /// Builds the configuration of `serve` from its arguments and the environment; flags win over
    /// variables, variables over defaults.
    public static func parse(arguments: [String], environment: [String: String]) throws(ConfigurationError) -> Configuration {
        var c = Configuration()
        // A flag given on the command line wins over its variable, a variable it would refuse too
        // (and over the variable of a flag that sets the same thing).
        let given = givenFlags(arguments)
        for o in options where !given.contains(o.flag) {
            guard let name = o.environment, let v = environment[name] else { continue }
            // An empty variable means "not set", except for switches, where it means false.
            if v.isEmpty && o.value != nil { continue }
            try o.apply(&c, v, name)
        }
        // --fixtures flags replace the variable's list rather than adding to it.
        if arguments.contains(where: { $0 == "--fixtures" || $0.hasPrefix("--fixtures=") }) { c.fixtures = [] }
        var i = 0
        while i < arguments.count {
            var flag = arguments[i]
            var inline: String?
            if flag.hasPrefix("--"), let eq = flag.firstIndex(of: "=") {
                inline = String(flag[flag.index(after: eq)...])
                flag = String(flag[..<eq])
            }
            guard let o = options.first(where: { $0.flag == flag }) else {
                throw ConfigurationError("unknown option '\(arguments[i])' (see fcm-mock serve --help)")
            }
            if o.value == nil {
                try o.apply(&c, inline ?? "true", flag)
            } else if let inline {
                try o.apply(&c, inline, flag)
            } else {
                i += 1
                guard i < arguments.count else { throw ConfigurationError("\(flag) needs a value (\(o.value!))") }
                try o.apply(&c, arguments[i], flag)
            }
            i += 1
        }
        if (c.tlsCert == nil) != (c.tlsKey == nil) { throw ConfigurationError("--tls-cert and --tls-key go together") }
        return c
    }

    /// Flags that set the same thing: giving one stands for giving the others.
    static let sameSetting: [[String]] = [["--unknown-tokens", "--auto-register"]]

    /// The flags `arguments` gives, read as the parser reads them (a flag's value is no flag),
    /// with the flags that set the same thing as one of them.
    public static func givenFlags(_ arguments: [String]) -> Set<String> {
        var given = Set<String>()
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            let flag = a.hasPrefix("--") ? String(a.split(separator: "=", maxSplits: 1)[0]) : a
            if let o = options.first(where: { $0.flag == flag }) {
                given.insert(flag)
                if o.value != nil && !a.contains("=") { i += 1 }
            }
            i += 1
        }
        for group in sameSetting where !given.isDisjoint(with: group) { given.formUnion(group) }
        return given
    }

    /// Where the local CA of `--https-port` lives: `--tls-dir`, else `tls/` in the store's
    /// folder (`./data/tls` for the default `--db`); nil for a `:memory:` store without
    /// `--tls-dir` (the server then makes a temporary folder: nothing else is kept either).
    public var tlsDirectory: String? {
        if let tlsDir { return tlsDir }
        guard dbPath != ":memory:" else { return nil }
        guard let slash = dbPath.lastIndex(of: "/") else { return "tls" }
        let folder = dbPath[..<slash]
        return (folder.isEmpty ? "" : String(folder)) + "/tls"
    }

    private static func port(_ s: String, _ name: String) throws(ConfigurationError) -> Int {
        guard let p = Int(s), (0...65535).contains(p) else { throw ConfigurationError("\(name) must be a port number 0-65535, got '\(s)'") }
        return p
    }

    /// An absolute `http` or `https` origin (`--web-push-origin`): a host name or IP literal,
    /// perhaps a port, nothing after it (a final `/` is dropped). Endpoints are `{origin}/wp/{id}`,
    /// so a path would make them point elsewhere than the push endpoint.
    static func origin(_ s: String, _ name: String) throws(ConfigurationError) -> String {
        let refusal = ConfigurationError("\(name) must be an http:// or https:// origin with no path, such as "
                                         + "https://fcm.googleapis.com or http://127.0.0.1:8080, got '\(s)'")
        var o = s
        if o.hasSuffix("/") { o.removeLast() }
        let lower = o.lowercased()
        guard o.utf8.count <= 256, let scheme = ["https://", "http://"].first(where: { lower.hasPrefix($0) }) else { throw refusal }
        let authority = o.dropFirst(scheme.count)
        // The host, and what follows it: nothing, or `:` and a port.
        let host: Substring, rest: Substring
        if authority.hasPrefix("[") {
            // An IPv6 literal: [::1] or [::1]:8443.
            guard let close = authority.firstIndex(of: "]") else { throw refusal }
            host = authority[authority.index(after: authority.startIndex)..<close]
            rest = authority[authority.index(after: close)...]
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { throw refusal }
        } else {
            let colon = authority.firstIndex(of: ":") ?? authority.endIndex
            host = authority[..<colon]
            rest = authority[colon...]
            guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else { throw refusal }
        }
        if !rest.isEmpty {
            let port = rest.dropFirst()
            guard rest.hasPrefix(":"), (1...5).contains(port.count), port.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let n = Int(port), n <= 65535 else { throw refusal }
        }
        return scheme + authority
    }

    private static func bool(_ s: String, _ name: String) throws(ConfigurationError) -> Bool {
        switch s.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default: throw ConfigurationError("\(name) must be true or false, got '\(s)'")
        }
    }

    private static func rate(_ s: String, _ name: String) throws(ConfigurationError) -> RateLimit {
        guard let r = RateLimit.parse(s) else {
            throw ConfigurationError("\(name) must be N/PERIOD, e.g. 240/60s, 10/1s or 1000/1h, got '\(s)'")
        }
        return r
    }
}
