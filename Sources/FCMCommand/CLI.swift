import FCMServer
import FCMCore
import HTTPServer
import Platform
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// The client subcommands (`health`, `devices`, `messages`, `send`): they talk to a running
/// server's control API, print a table for people or JSON for scripts, and exit 0 on success,
/// 1 when the server is unhealthy or unreachable, 2 for bad arguments (`health`: 1 for those too).
public enum CLI {
    /// The client subcommands, with what each does (for help).
    public static let commands: [(name: String, summary: String)] = [
        ("health", "asks the server whether it is healthy: one line; exit 0 healthy, 1 not (bad arguments included)"),
        ("devices", "lists every device: TOKEN SENDER APP PLATFORM STATE ONLINE PENDING TOPICS"),
        ("messages", "lists the latest message records, or one device's inbox with --token"),
        ("send", "sends a quick legacy message with the first project's server key (or --key)"),
        ("service-account", "makes a service account of a project and writes its JSON (private key included) for an SDK"),
        ("apns-key", "makes an APNs signing key of a team and writes its .p8 (private key included) for a provider-token client"),
        ("apns-cert", "makes an APNs client certificate for an app and writes it with its key as one PEM, for a certificate client"),
    ]

    /// Every option of the client subcommands, with the commands that take it: parsing and help
    /// both read this table.
    public static let options: [ClientOption] = [
        ClientOption("--server", "URL", environment: "FCM_MOCK_URL",
                     defaultText: "http://127.0.0.1:$FCM_MOCK_HTTP_PORT (https with FCM_MOCK_HTTP_TLS), else http://127.0.0.1:8080",
                     help: "the running server"),
        ClientOption("--cacert", "PEM", environment: "FCM_MOCK_CACERT", defaultText: "the system's trust store",
                     help: "the CA that https:// servers are verified against"),
        ClientOption("--control-token", "SECRET", environment: "FCM_MOCK_CONTROL_TOKEN", defaultText: "none",
                     help: "the server's --control-token"),
        ClientOption("--json", nil, defaultText: "a table", help: "print the API's JSON instead of a table"),
        ClientOption("--token", "TOKEN", commands: ["messages"], defaultText: "all messages", help: "that device's inbox instead of the message records"),
        ClientOption("--wait", "SECONDS", commands: ["messages"], defaultText: "0", help: "with --token: wait up to SECONDS (max 60) for an entry"),
        ClientOption("--status", "STATUS", commands: ["messages"], defaultText: "any",
                     help: "only this status (accepted, rejected, delivered, pending, ...)"),
        ClientOption("--limit", "N", commands: ["messages"], defaultText: "100 (1000 with --token)", help: "at most N entries (max 1000)"),
        ClientOption("--to", "TOKEN|/topics/NAME", commands: ["send"], defaultText: "required", help: "the target"),
        ClientOption("--data", "KEY=VALUE", commands: ["send"], defaultText: "none", help: "a data entry (repeatable)"),
        ClientOption("--key", "SERVER_KEY", commands: ["send"], defaultText: "the first project's first key", help: "the server key to send with"),
        ClientOption("--project", "PROJECT", commands: ["service-account"], defaultText: "required",
                     help: "the project: its project id or sender id"),
        // One row per command: each command's help says what its own file holds.
        ClientOption("--out", "FILE", commands: ["service-account"], defaultText: "standard output",
                     help: "where to write the service account's JSON, private key included (mode 0600)"),
        ClientOption("--out", "FILE", commands: ["apns-key"], defaultText: "standard output",
                     help: "where to write the signing key's .p8 (PKCS #8 PEM, as Apple's download; mode 0600)"),
        ClientOption("--out", "FILE", commands: ["apns-cert"], defaultText: "standard output",
                     help: "where to write the certificate followed by its private key, one PEM file (mode 0600)"),
        ClientOption("--team", "TEAM_ID", commands: ["apns-key"], defaultText: "required",
                     help: "the APNs team: 10 uppercase letters or digits (made if new)"),
        ClientOption("--bundle-id", "BUNDLE_ID", commands: ["apns-key", "apns-cert"], defaultText: "none (apns-cert: required)",
                     help: "an app (repeatable): added to the team (apns-key), or named by the certificate, the first as its subject (apns-cert)"),
        ClientOption("--environment", "ENV", commands: ["apns-cert"], defaultText: "sandbox",
                     help: "the certificate's APNs environment: sandbox, production or both"),
        ClientOption("--days", "N", commands: ["apns-cert"], defaultText: "365", help: "how long the certificate is valid (1-3650)"),
        ClientOption("--key-id", "KEY_ID", commands: ["apns-key"], defaultText: "made by the server",
                     help: "the key id: 10 uppercase letters or digits"),
    ]

    /// The default `--server`: `FCM_MOCK_URL`, else the port `serve` reads from the same
    /// environment (so a container's health check follows `FCM_MOCK_HTTP_PORT`).
    static func defaultServer(_ environment: [String: String]) -> String {
        if let url = environment["FCM_MOCK_URL"], !url.isEmpty { return url }
        let c = (try? Configuration.parse(arguments: [], environment: environment)) ?? Configuration()
        return "\(c.httpTLS ? "https" : "http")://127.0.0.1:\(c.httpPort)"
    }

    /// Runs `command` with its arguments; returns the exit code.
    public static func run(_ command: String, _ args: [String], environment: [String: String]) -> Int32 {
        var server = defaultServer(environment)
        var token = environment["FCM_MOCK_CONTROL_TOKEN"]
        var json = false
        var caFile = environment["FCM_MOCK_CACERT"].flatMap { $0.isEmpty ? nil : $0 }
        var options: [String: [String]] = [:]
        // `health` answers every failure, bad arguments included, with one line and exit 1: a
        // Docker HEALTHCHECK gives exit code 2 a meaning of its own.
        func bad(_ message: String) -> Int32 {
            guard command == "health" else { return usage(message) }
            // With --json (anywhere among the arguments), one JSON object, as when unhealthy.
            if args.contains("--json") {
                print(unhealthyJSON(server: nil, reason: message))
            } else {
                print("unhealthy: \(message)")
            }
            return 1
        }
        var i = 0
        while i < args.count {
            let a = args[i]
            guard let o = Self.options.first(where: { $0.flag == a && $0.takes(command) }) else {
                return bad("unknown option '\(a)' for '\(command)' (see fcm-mock \(command) --help)")
            }
            var v = ""
            if let placeholder = o.value {
                i += 1
                guard i < args.count else { return bad("\(a) needs a value (\(placeholder))") }
                v = args[i]
            }
            switch a {
            case "--json": json = true
            case "--server": server = v
            case "--cacert": caFile = v
            case "--control-token": token = v
            default: options[a, default: []].append(v)
            }
            i += 1
        }
        guard let endpoint = Endpoint(server) else { return bad("--server must be http://HOST:PORT or https://HOST:PORT, got '\(server)'") }
        var client = Client(endpoint: endpoint, controlToken: token, caFile: caFile)
        // A health check that waits longer than this is unhealthy (the other commands may
        // long-poll a minute).
        if command == "health" { client.receiveSeconds = 10 }
        switch command {
        case "health": return health(client, server: server, json: json)
        case "devices": return devices(client, json: json)
        case "messages": return messages(client, options: options, json: json)
        case "send": return send(client, server: server, options: options, json: json)
        case "service-account":
            return serviceAccount(client, server: server, options: options)
        case "apns-key":
            return apnsKey(client, server: server, options: options, json: json)
        case "apns-cert":
            return apnsCertificate(client, server: server, options: options, json: json)
        default:
            return usage("unknown command '\(command)'")
        }
    }

    /// `health`: readiness first (every listener up, the store writing: what the image's
    /// HEALTHCHECK runs, so a server still starting is not yet healthy), then the health call.
    /// `health --json`'s answer when unhealthy: `{"status":"unhealthy","server","reason"}`.
    static func unhealthyJSON(server: String?, reason: String) -> String {
        JSONValue.object(JSONObject([("status", .string("unhealthy")), ("server", server.map { .string($0) } ?? .null),
                                     ("reason", .string(reason))])).serialized()
    }

    static func health(_ client: Client, server: String, json: Bool) -> Int32 {
        // Unhealthy: one line, or with --json one object (`{"status":"unhealthy","server","reason"}`).
        func unhealthy(_ reason: String, line: String) -> Int32 {
            if json {
                print(unhealthyJSON(server: server, reason: reason))
            } else {
                print(line)
            }
            return 1
        }
        guard let ready = client.request("GET", "/readyz") else {
            return unhealthy("no answer", line: "unhealthy: no healthy answer from \(server)")
        }
        if ready.status == 503, let reason = ready.object?["reason"]?.stringValue {
            return unhealthy(reason, line: "unhealthy: fcm-mock at \(server): \(reason)")
        }
        let answer = client.request("GET", "/api/v1/health")
        guard let r = answer, r.status == 200, let o = r.object, o["status"]?.stringValue == "ok" else {
            // A server that answers 503 because it cannot write says why (`failing: <reason>`).
            if let store = answer?.object?["store"]?.stringValue, store != "ok" {
                return unhealthy("store " + store, line: "unhealthy: fcm-mock at \(server): store \(store)")
            }
            return unhealthy("no healthy answer", line: "unhealthy: no healthy answer from \(server)")
        }
        if json { print(r.text) } else {
            print("ok: fcm-mock \(o["version"]?.stringValue ?? "?") at \(server), up \(o["uptime_s"]?.numberValue?.text ?? "?") s")
        }
        return 0
    }

    /// `devices`: every device, the pages followed to the end.
    static func devices(_ client: Client, json: Bool) -> Int32 {
        // Every device: the pages are followed to the end.
        var devices: [JSONObject] = []
        var cursor: String?
        repeat {
            let page = "/api/v1/devices?limit=1000" + (cursor.map { "&cursor=\(FormBody.percentEncode($0))" } ?? "")
            guard let r = client.expectOK("GET", page) else { return 1 }
            devices += rows(r)
            cursor = r.object?["next"]?.stringValue
        } while cursor != nil
        if json {
            print(JSONValue.object(JSONObject([("items", .array(devices.map { .object($0) })), ("next", .null)])).serialized())
            return 0
        }
        table(["TOKEN", "SENDER", "APP", "PLATFORM", "STATE", "ONLINE", "PENDING", "TOPICS"], devices.map { d in
            [short(d["token"]?.stringValue), d["sender_id"]?.stringValue ?? "", d["app"]?.stringValue ?? "",
             d["platform"]?.stringValue ?? "", d["state"]?.stringValue ?? "", d["online"]?.boolValue == true ? "yes" : "no",
             d["pending"]?.numberValue?.text ?? "0",
             (d["topics"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ",")]
        })
        return 0
    }

    /// `messages`: a device's inbox (`--token`, long-polling with `--wait`) or the records.
    static func messages(_ client: Client, options: [String: [String]], json: Bool) -> Int32 {
        // Bad values are bad options (exit 2), said here rather than by the server's 400.
        if let l = options["--limit"]?.last, !(Int(l).map { (1...1000).contains($0) } ?? false) {
            return usage("--limit must be a number 1-1000, got '\(l)'")
        }
        if let w = options["--wait"]?.last {
            guard options["--token"] != nil else { return usage("--wait goes with --token (it long-polls a device's inbox)") }
            guard let v = Double(w), v >= 0, v <= 60 else { return usage("--wait must be seconds 0-60, got '\(w)'") }
        }
        var path: String
        if let t = options["--token"]?.last {
            path = "/api/v1/devices/\(FormBody.percentEncode(t))/messages?limit=\(FormBody.percentEncode(options["--limit"]?.last ?? "1000"))"
            if let w = options["--wait"]?.last { path += "&wait=\(FormBody.percentEncode(w))&min=1" }
        } else {
            path = "/api/v1/messages?limit=\(FormBody.percentEncode(options["--limit"]?.last ?? "100"))"
        }
        if let s = options["--status"]?.last { path += "&status=\(FormBody.percentEncode(s))" }
        guard let r = client.expectOK("GET", path) else { return 1 }
        if json { print(r.text); return 0 }
        if options["--token"] != nil {
            table(["MESSAGE_ID", "STATUS", "ACCEPTED", "VIA", "DATA"], rows(r).map { m in
                [m["message_id"]?.stringValue ?? "", m["status"]?.stringValue ?? "", m["accepted_at"]?.stringValue ?? "",
                 "\(m["via"]?.objectValue?["transport"]?.stringValue ?? "")/\(m["via"]?.objectValue?["target"]?.stringValue ?? "")",
                 m["data"]?.serialized() ?? "null"]
            })
        } else {
            table(["MESSAGE_ID", "STATUS", "TRANSPORT", "TARGET", "ERROR", "RECIPIENTS"], rows(r).map { m in
                [m["message_id"]?.stringValue ?? "", m["status"]?.stringValue ?? "", m["transport"]?.stringValue ?? "",
                 short(m["target"]?.objectValue?["value"]?.stringValue), m["error"]?.stringValue ?? "",
                 String(m["recipients"]?.arrayValue?.count ?? 0)]
            })
        }
        return 0
    }

    /// `send`: a legacy send with the given (or the first project's) server key.
    static func send(_ client: Client, server: String, options: [String: [String]], json: Bool) -> Int32 {
        guard let to = options["--to"]?.last else { return usage("send needs --to TOKEN (or /topics/NAME)") }
        var data = JSONObject()
        for kv in options["--data"] ?? [] {
            guard let eq = kv.firstIndex(of: "=") else { return usage("--data takes key=value, got '\(kv)'") }
            data[String(kv[..<eq])] = .string(String(kv[kv.index(after: eq)...]))
        }
        var key = options["--key"]?.last
        if key == nil {
            // The first project's first key, as the demo fixture has it.
            guard let p = client.expectOK("GET", "/api/v1/projects") else { return 1 }
            key = rows(p).first?["server_keys"]?.arrayValue?.first?.stringValue
        }
        guard let key else { print("fcm-mock: no project with a server key: give --key"); return 1 }
        let body = JSONValue.object(JSONObject([("to", .string(to)), ("data", .object(data))])).serialized()
        guard let r = client.request("POST", "/fcm/send", headers: [("Content-Type", "application/json"), ("Authorization", "key=\(key)")],
                                     body: Array(body.utf8))
        else {
            print("fcm-mock: cannot reach \(server)")
            return 1
        }
        print(json ? r.text : "HTTP \(r.status): \(r.text)")
        return r.status == 200 ? 0 : 1
    }

    static func usage(_ message: String) -> Int32 {
        writeToStandardError("fcm-mock: \(message)\n")
        return 2
    }

    static func rows(_ r: Response) -> [JSONObject] {
        r.object?["items"]?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    /// Long tokens cut for a table (`--json` prints them whole).
    static func short(_ s: String?) -> String {
        guard let s else { return "" }
        return s.count > 40 ? String(s.prefix(37)) + "..." : s
    }

    static func table(_ header: [String], _ rows: [[String]]) {
        var widths = header.map(\.count)
        for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == cells.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count) }
                .joined(separator: "  ")
        }
        print(line(header))
        for r in rows { print(line(r)) }
        if rows.isEmpty { print("(none)") }
    }


    /// `http://HOST:PORT` (a path, if any, is ignored).
    struct Endpoint {
        let host: String
        let port: Int
        let tls: Bool
        init?(_ url: String) {
            if url.hasPrefix("http://") {
                tls = false
            } else if url.hasPrefix("https://") {
                tls = true
            } else {
                return nil
            }
            var rest = url.dropFirst(tls ? 8 : 7)
            if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
            if let colon = rest.lastIndex(of: ":"), let p = Int(rest[rest.index(after: colon)...]) {
                host = String(rest[..<colon]).trimmingCharacters(in: "[]")
                port = p
            } else {
                host = String(rest)
                port = tls ? 443 : 80
            }
            if host.isEmpty { return nil }
        }

        /// The `Host` header: the port too unless it is the scheme's default (RFC 9110 7.2).
        var hostHeader: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return port == (tls ? 443 : 80) ? name : "\(name):\(port)"
        }
    }

    /// An answer, as the project's HTTP client read it.
    typealias Response = WireResponse

    /// One request per connection (the CLI makes a request or two), through the project's
    /// HTTP client.
    struct Client {
        let endpoint: Endpoint
        let controlToken: String?
        /// The CA to trust for `https://` (else the system's trust store).
        var caFile: String? = nil
        /// How long an answer may take to come (`messages --wait` long-polls up to 60 s).
        var receiveSeconds = 75

        var url: String { "\(endpoint.tls ? "https" : "http")://\(endpoint.host):\(endpoint.port)" }

        func expectOK(_ method: String, _ path: String) -> Response? {
            guard let r = request(method, path) else {
                print("fcm-mock: cannot reach \(url)")
                return nil
            }
            guard r.status == 200 else {
                let message = r.object?["error"]?.objectValue?["message"]?.stringValue ?? r.text
                print("fcm-mock: HTTP \(r.status): \(message)")
                return nil
            }
            return r
        }

        func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) -> Response? {
            let security: HTTPClient.Security = endpoint.tls ? .tls(caFile.map { .caFile($0) } ?? .system) : .plain
            let client = HTTPClient(host: endpoint.host, port: endpoint.port, security: security, receiveTimeout: receiveSeconds)
            var fields = [("Connection", "close")]
            if let controlToken, path.hasPrefix("/api/") { fields.append(("Authorization", "Bearer \(controlToken)")) }
            do {
                defer { client.disconnect() }
                return try client.request(method, path, headers: fields + headers, body: body)
            } catch {
                if error.handshake {
                    writeToStandardError("fcm-mock: \(error.description)\(caFile == nil ? " (trust the mock's CA with --cacert)" : "")\n")
                }
                return nil
            }
        }
    }
}

extension WireResponse {
    /// The body as a JSON object (nil otherwise).
    var object: JSONObject? { (try? JSONParser.parse(body))?.objectValue }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }

    func trimmingCharacters(in chars: String) -> String {
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

/// One option of the client subcommands.
public struct ClientOption: Sendable {
    public let flag: String
    /// The value's placeholder; nil for a switch.
    public let value: String?
    public let environment: String?
    /// The subcommands that take it; nil for all of them.
    public let commands: Set<String>?
    public let defaultText: String
    public let help: String

    init(_ flag: String, _ value: String?, environment: String? = nil, commands: Set<String>? = nil, defaultText: String, help: String) {
        self.flag = flag
        self.value = value
        self.environment = environment
        self.commands = commands
        self.defaultText = defaultText
        self.help = help
    }

    func takes(_ command: String) -> Bool { commands?.contains(command) ?? true }
}
