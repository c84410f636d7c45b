import RoomKit
import FCMServer
/// `fcm-mock --help`, `fcm-mock help COMMAND` and `fcm-mock COMMAND --help`. The option lists
/// are read from the tables the parsers use (`Configuration.options`, `CLI.options`), so every
/// flag a command takes is in its help, with its default and its environment variable.
public enum Help {
    /// The overview: every command in one line.
    public static var overview: String {
        var lines = [
            "fcm-mock \(fcmMockVersion): a mock push server for tests: Firebase Cloud Messaging (HTTP v1, legacy HTTP",
            "and XMPP), Apple's APNs and Web Push, with fake Android, iOS and web devices and a control API that",
            "shows what each one received; HTTPS and HTTP/2 under Google's and Apple's host names.",
            "",
            "usage: fcm-mock [COMMAND] [OPTIONS]      (no command: serve)",
            "",
            "commands:",
        ]
        let all = [("serve", "runs the server (the default command)")] + CLI.commands
            + [("apns-token", "prints an APNs provider token signed with a .p8 (no server needed), for curl"),
               ("cert", "writes a local CA and a server certificate for Google's FCM host names"),
               ("version", "prints the version (also --version)"),
               ("help", "prints this, or a command's help: fcm-mock help serve")]
        for (name, summary) in all { lines.append("  " + name.padding(10) + summary) }
        lines += ["", "fcm-mock COMMAND --help lists a command's options, their defaults and environment variables."]
        return lines.joined(separator: "\n")
    }

    /// A command's help, or nil for a command that does not exist.
    public static func text(for command: String) -> String? {
        switch command {
        case "serve":
            var lines = [
                "usage: fcm-mock serve [OPTIONS]",
                "",
                "Serves:",
                "  FCM HTTP v1   POST /v1/projects/{project}/messages:send, and its OAuth 2.0 token endpoint /token",
                "  FCM legacy    POST /fcm/send, /fcm/notification (device groups), Instance ID (/iid/...)",
                "  FCM XMPP      the XMPP connection server (CCS), on the XMPP port",
                "  APNs          POST /3/device/{token}, HTTP/2 only (h2c on the HTTP port, TLS on --https-port)",
                "  Web Push      POST /wp/{id}, the endpoints of web devices' subscriptions (RFC 8030, VAPID)",
                "  real clients  Firefox's push service (/autopush, WebSocket); Chromium's and firebase-messaging's",
                "                checkin, register3, Firebase installations and registrations, MCS (--mcs-port)",
                "  control API   /api/v1 (devices, clients, inboxes, faults, clock) and the web page at /",
                "Every HTTP path is on the HTTP port; with --https-port, on HTTPS too (HTTP/2 and HTTP/1.1) under",
                "Google's and Apple's host names. Prints 'listening http=HOST:PORT xmpp=HOST:PORT' (then",
                "' https=HOST:PORT' with --https-port, ' mcs=HOST:PORT' with --mcs-port) on stdout once it accepts",
                "connections; SIGTERM or SIGINT stops",
                "it cleanly. Flags win over environment variables. FCM_MOCK_WEBPUSH_HANDOFF=all decrypts every",
                "Web Push body on the worker pool (by default HTTP/2's only: the HTTP/1.1 loops spread theirs).",
                "",
                "options:",
            ]
            lines += Configuration.options.flatMap { o in
                option(o.flag + (o.value.map { " " + $0 } ?? ""), environment: o.environment, defaultText: o.defaultText, help: o.help)
            }
            lines += ["", "exit codes: 0 stopped by a signal; 2 bad options, an unusable port, store or fixture file."]
            return lines.joined(separator: "\n")
        case "health", "devices", "messages", "send", "service-account", "apns-key", "apns-cert":
            let summary = CLI.commands.first { $0.name == command }!.summary
            let own = CLI.options.filter { $0.commands?.contains(command) == true }
            var usage = "usage: fcm-mock \(command)"
            for o in own {
                let item = o.flag + (o.value.map { " " + $0 } ?? "")
                usage += o.defaultText == "required" ? " \(item)" : " [\(item)]"
            }
            var lines = [usage + " [--server URL] [--cacert PEM] [--control-token SECRET] [--json]", "",
                         summary.prefix(1).uppercased() + summary.dropFirst() + ".",
                         "Talks to a running server's control API.", "", "options:"]
            lines += (own + CLI.options.filter { $0.commands == nil }).flatMap { o in
                option(o.flag + (o.value.map { " " + $0 } ?? ""), environment: o.environment, defaultText: o.defaultText, help: o.help)
            }
            lines += ["", command == "health"
                ? "exit codes: 0 healthy; 1 anything else, bad options included (a Docker HEALTHCHECK reserves 2)."
                : "exit codes: 0 done; 1 the server is unreachable or answered an error; 2 bad options."]
            return lines.joined(separator: "\n")
        case "apns-token":
            return CLI.apnsTokenHelp
        case "cert":
            return ([
                "usage: fcm-mock cert --out DIR [--host NAME]...",
                "",
                "Writes ca.pem (a new local certificate authority: trust it in the client), ca.key, server.pem and",
                "server.key, a certificate it signs for \(Application.googleHosts.joined(separator: ", "))",
                "and every --host. Use with: fcm-mock serve --http-tls --tls-cert DIR/server.pem --tls-key DIR/server.key",
                "",
                "options:",
            ] + option("--out DIR", environment: nil, defaultText: "required", help: "the folder to write the four files to")
                + option("--host NAME", environment: nil, defaultText: "none", help: "one more name or IP address (repeatable)")
                + ["", "exit codes: 0 written; 1 the folder cannot be written; 2 bad options."]).joined(separator: "\n")
        case "version":
            return "usage: fcm-mock version   (or fcm-mock --version)\n\nPrints 'fcm-mock \(fcmMockVersion)'."
        case "help":
            return "usage: fcm-mock help [COMMAND]\n\nPrints the overview, or COMMAND's help (the same as fcm-mock COMMAND --help)."
        default:
            return nil
        }
    }

    /// One option as two lines: the flag with its variable and default, then what it does.
    static func option(_ flag: String, environment: String?, defaultText: String, help: String) -> [String] {
        var facts: [String] = []
        if let environment { facts.append("env " + environment) }
        facts.append("default: " + defaultText)
        return ["  \(flag)   [\(facts.joined(separator: "; "))]", "      \(help)"]
    }
}

extension String {
    /// The string followed by spaces up to `width` characters.
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
