import FCMServer

#if canImport(Glibc)
    import Glibc
#endif

// Thin on purpose: parse the command line, build the configuration, run. Everything else lives
// in FCMServer so tests can start the same application in-process.

let usage = """
    usage: fcm-mock serve [--http-port 8080] [--xmpp-port 5235] [--host 127.0.0.1]
                          [--db ./data/fcm-mock.sqlite | --db :memory:]
                          [--fixtures FILE_OR_DIR]... [--unknown-tokens register|reject]
                          [--accept-any-key] [--control-token SECRET]
                          [--tls-cert PEM --tls-key PEM] [--http-tls] [--xmpp-tls]
                          [--log-level debug|info|warning|error] [--log-format text|json]
           fcm-mock health|devices|messages|send [--server URL] [--cacert PEM] [--control-token SECRET] [--json]
                    messages [--token T] [--wait SECONDS] [--status S]
                    send --to TOKEN_OR_/topics/NAME [--data k=v]... [--key SERVER_KEY]
           fcm-mock cert --out DIR [--host NAME]...
           fcm-mock version
    """

func fail(_ message: String) -> Never {
    Log.flush()
    writeToStandardError("fcm-mock: \(message)\n")
    exit(2)
}

var args = Array(CommandLine.arguments.dropFirst())
let command = args.first.map { $0.hasPrefix("-") ? "serve" : $0 } ?? "serve"
if args.first == command { args.removeFirst() }

switch command {
case "version", "--version":
    print("fcm-mock \(fcmMockVersion)")
    exit(0)
case "help", "--help", "-h":
    print(usage)
    exit(0)
case "serve":
    break
case "health", "devices", "messages", "send":
    exit(CLI.run(command, args, environment: processEnvironment()))
case "cert":
    exit(CLI.cert(args))
default:
    fail("unknown command '\(command)' (commands: serve, health, devices, messages, send, cert, version; see fcm-mock --help)")
}
if args.contains("--help") || args.contains("-h") {
    print(usage)
    exit(0)
}

// Block the stop signals before any thread exists, so every thread inherits the mask and the main
// thread alone receives them through sigwait (no handler runs on a random thread).
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGTERM)
sigaddset(&stopSignals, SIGINT)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
signal(SIGPIPE, SIG_IGN)

let config: Configuration
do {
    config = try Configuration.parse(arguments: args, environment: processEnvironment())
} catch {
    fail(error.description)
}
let log = Log(level: config.logLevel, format: config.logFormat)
let app: Application
do {
    app = try Application(config, log: log)
    try app.start()
} catch {
    fail(error.description)
}
print(app.listeningLine)
fflush(nil)  // all output streams: the listening line must reach a pipe at once
log.info("fcm-mock \(fcmMockVersion) started", [("db", config.dbPath), ("http.port", String(app.httpPort)), ("http.tls", String(config.httpTLS)),
                                                ("xmpp.port", String(app.xmppPort)), ("xmpp.tls", String(config.xmppTLS))])

var received: Int32 = 0
sigwait(&stopSignals, &received)
log.info("stopping on signal \(received)")
app.stop()
Log.flush()
exit(0)
