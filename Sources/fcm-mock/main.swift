import FCMModel
import RoomKit
import FCMCommand
import FCMServer
import Platform

#if canImport(Glibc)
    import Glibc
#endif

// Thin on purpose: parse the command line, build the configuration, run. Everything else lives
// in FCMServer so tests can start the same application in-process.

func fail(_ message: String) -> Never {
    Log.flush()
    writeToStandardError("fcm-mock: \(message)\n")
    exit(2)
}

var args = Array(CommandLine.arguments.dropFirst())
let command: String
switch args.first {
case nil: command = "serve"
case "--version", "-V":
    command = "version"
    args.removeFirst()
case "--help", "-h":
    command = "help"
    args.removeFirst()
case let first? where first.hasPrefix("-"): command = "serve"
case let first?:
    command = first
    args.removeFirst()
}
// `COMMAND --help` anywhere among its options, and `help COMMAND`.
if args.contains("--help") || args.contains("-h") {
    guard let text = Help.text(for: command) else { fail("unknown command '\(command)' (see fcm-mock --help)") }
    print(text)
    exit(0)
}

switch command {
case "version":
    print("fcm-mock \(fcmMockVersion)")
    exit(0)
case "help":
    guard let topic = args.first else {
        print(Help.overview)
        exit(0)
    }
    guard let text = Help.text(for: topic) else { fail("no command '\(topic)' (commands: serve, health, devices, messages, send, service-account, apns-key, apns-cert, apns-token, cert, version)") }
    print(text)
    exit(0)
case "serve":
    break
case "health", "devices", "messages", "send", "service-account", "apns-key", "apns-cert":
    exit(CLI.run(command, args, environment: processEnvironment()))
case "cert":
    exit(CLI.cert(args))
case "apns-token":
    exit(CLI.apnsToken(args))
default:
    fail("unknown command '\(command)' (commands: serve, health, devices, messages, send, service-account, apns-key, apns-cert, apns-token, cert, version; see fcm-mock --help)")
}

// Block the stop signals before any thread exists, so every thread inherits the mask and the main
// thread alone receives them through sigwait (no handler runs on a random thread).
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGTERM)
sigaddset(&stopSignals, SIGINT)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
signal(SIGPIPE, SIG_IGN)
// A file-size limit (ulimit -f) reached makes a write fail (EFBIG), which the store reports like
// a full disk, instead of killing the process.
signal(SIGXFSZ, SIG_IGN)

// Before any thread starts: see SystemIO.limitMallocArenas. Four, not two: with two, HTTP/2's
// connection threads and the writer waited on the arenas' locks (futex calls per v1 send over h2c
// 0.96 -> 2.2, h2c against HTTP/1.1 req/s about 1.33x -> 1.1x); four kept the 10-minute soak's
// RSS at 1.04x and RSS after 100,000 messages where two left it.
SystemIO.limitMallocArenas(4)
// Large multicasts' bodies and answers (over 64 KiB) are mapped and unmapped, not kept in the
// arena of the thread that handled them: RSS after the bench's 100,000 messages (sent as
// multicasts) 30.0-30.3 -> 29.5-29.6 MB, peak 30.8 -> 29.9.
SystemIO.mapLargeAllocations(from: 64 * 1024)
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
SystemIO.releaseFreedMemory()
print(app.listeningLine)
fflush(nil)  // all output streams: the listening line must reach a pipe at once
log.info("fcm-mock \(fcmMockVersion) started", [("db", app.storeDescription), ("fixtures", app.fixturesDescription),
                                                ("http.port", String(app.httpPort)), ("http.tls", String(config.httpTLS)),
                                                ("https.port", app.httpsPort.map(String.init) ?? "off"),
                                                ("xmpp.port", String(app.xmppPort)), ("xmpp.tls", String(config.xmppTLS)),
                                                ("mcs.port", app.mcsPort.map(String.init) ?? "off"),
                                                ("store.limits", app.limitsDescription)])

var received: Int32 = 0
sigwait(&stopSignals, &received)
log.info("stopping on signal \(received)")
app.stop()
log.info("stopped")
Log.flush()
exit(0)
