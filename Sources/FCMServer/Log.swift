import FCMCore
import HTTPServer

/// A small leveled logger writing one line per event to stderr, as text or JSON.
///
/// Libraries take it instead of creating one; messages are autoclosures, so a disabled level costs
/// nothing on the hot path.
public struct Log: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        init(_ name: String) {
            switch name {
            case "debug": self = .debug
            case "warning": self = .warning
            case "error": self = .error
            default: self = .info
            }
        }
        var name: String { ["debug", "info", "warning", "error"][rawValue] }
    }

    public let level: Level
    public let json: Bool

    /// A logger at `level` (`debug`…`error`) in `format` (`text` or `json`).
    public init(level: String = "info", format: String = "text") {
        self.level = Level(level)
        self.json = format == "json"
    }

    /// Logs `message` with dotted metadata keys when `at` is enabled.
    public func log(_ at: Level, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, String)] = []) {
        guard at >= level else { return }
        let ts = rfc3339(millis: wallClockMicros() / 1000)
        var line: String
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.key("ts"); w.value(ts)
            w.key("level"); w.value(at.name)
            w.key("msg"); w.value(message())
            for (k, v) in metadata() { w.key(k); w.value(v) }
            w.endObject()
            line = w.string
        } else {
            line = "\(ts) \(at.name) \(message())"
            for (k, v) in metadata() { line += " \(k)=\(v)" }
        }
        SystemIO.writeStderr(line + "\n")
    }

    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }

    /// The access-log line of one HTTP request (info): method, path, status, body bytes, time,
    /// and the credential in masked form.
    public func access(_ a: HTTPAccess) {
        log(.info, "http", [("method", a.method), ("path", a.path), ("status", String(a.status)),
                            ("bytes", a.bytes < 0 ? "stream" : String(a.bytes)),
                            ("ms", Self.millis(a.nanos)), ("auth", Self.maskCredential(a.authorization))])
    }

    /// A time in milliseconds with three decimals.
    static func millis(_ nanos: UInt64) -> String {
        let micros = nanos / 1000
        let frac = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// An Authorization value safe to print: the scheme stays, the secret does not. A server key
    /// keeps its last four characters, so a reader can tell keys apart; anything else is `***`.
    /// `key=AAAAfcmmock:demo-server-key` → `key=***-key`; `Bearer s3cret` → `Bearer ***`; none → `-`.
    public static func maskCredential(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        let v = value.drop { $0 == " " }
        if v.lowercased().hasPrefix("key=") {
            let secret = v.dropFirst(4)
            return secret.count >= 16 ? "key=***" + secret.suffix(4) : "key=***"
        }
        if let space = v.firstIndex(of: " ") {
            return String(v[..<space]) + " ***"
        }
        return "***"
    }
}
