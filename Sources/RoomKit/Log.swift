import FCMEngine
import FCMCore
public import FCMStore
import Platform

#if canImport(Glibc)
    import Glibc
#endif
public import HTTPServer

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
        // Only the values are taken here; the line is formatted on the writer thread, off the
        // threads that serve requests and stanzas.
        LogWriter.shared.append(LogEntry(micros: wallClockMicros(), level: at, json: json,
                                         body: .event(message(), metadata())),
                                now: at >= .warning)
    }

    /// Writes out every buffered line (call before the process exits), waiting at most
    /// `exitFlushSeconds` for stderr to take them: when it is a pipe nobody reads (a test harness
    /// that never drains it), the rest is lost and the process ends all the same, instead of
    /// waiting for a reader for ever.
    public static func flush() { LogWriter.shared.flush(within: exitFlushSeconds) }

    /// How long `flush()` waits for stderr at most.
    public static let exitFlushSeconds = 3.0

    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }

    /// The access-log line of one HTTP request (info): method, path, status, body bytes, time,
    /// and the credential in masked form.
    public func access(_ a: HTTPAccess) {
        guard Level.info >= level else { return }
        // The request's own values only: masking and formatting happen on the writer thread.
        LogWriter.shared.append(LogEntry(micros: wallClockMicros(), level: .info, json: json, body: .http(a)), now: false)
    }

    /// A time in milliseconds with three decimals.
    static func millis(_ nanos: UInt64) -> String {
        let micros = nanos / 1000
        let frac = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// An Authorization value safe to print: the scheme stays, the secret does not (see
    /// `maskSecret`; a bearer token or an unknown form is `***` whatever its length).
    /// `key=AAAAfcmmock:demo-server-key` → `key=***-key`; `Bearer s3cret` → `Bearer ***`; none → `-`.
    public static func maskCredential(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        let v = value.drop { $0 == " " }
        if hasPrefixIgnoringCase(v.utf8, "key=") { return "key=" + maskSecret(v.dropFirst(4)) }
        if let space = v.firstIndex(of: " ") {
            return String(v[..<space]) + " ***"
        }
        return "***"
    }

    /// A server key safe to print: its last four characters, so a reader can tell keys apart, when
    /// it is long enough for that to give nothing away; else `***`. A value with a comma is two
    /// headers joined (`key=…, Bearer x`): its end may be another credential, so none is shown.
    public static func maskSecret(_ secret: Substring) -> String {
        secret.count >= 16 && !secret.contains(",") ? "***" + secret.suffix(4) : "***"
    }
}

extension Log {
    /// The two lines of a spell of failing writes: a warning with SQLite's reason when the first
    /// commit fails (full disk, I/O error, read-only file), an info line when one succeeds again.
    /// Requests failed in between have only their access lines.
    public func storeHealth(_ failure: StoreError?) {
        if let failure {
            warning("store writes are failing: sends answer 500 and health 503 until a write succeeds",
                    [("code", String(failure.code)), ("reason", failure.reason)])
        } else {
            info("store writes succeed again")
        }
    }
}

/// One log event, formatted when it is written.
struct LogEntry: Sendable {
    enum Body: Sendable {
        /// A message with dotted metadata keys.
        case event(String, [(String, String)])
        /// The access-log line of one HTTP request (message `http`).
        case http(HTTPAccess)
    }

    let micros: Int64
    let level: Log.Level
    let json: Bool
    let body: Body

    func format(into out: inout [UInt8], clock: inout LogTimestamp) {
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.key("ts"); w.value(rfc3339(millis: micros / 1000))
            w.key("level"); w.value(level.name)
            w.key("msg"); w.value(message)
            forEachField { k, v in w.key(k); w.value(v) }
            w.endObject()
            out.append(contentsOf: w.string.utf8)
        } else {
            clock.append(millis: micros / 1000, into: &out)
            out.append(32)
            out.append(contentsOf: level.name.utf8)
            out.append(32)
            out.append(contentsOf: message.utf8)
            if case .http(let a) = body {
                Self.appendAccessFields(a, into: &out)
            } else {
                forEachField { k, v in Self.append(k, v.utf8, into: &out) }
            }
        }
        out.append(10)
    }

    /// About the bytes this entry holds and formats to: the UTF-8 length of its strings plus an
    /// allowance for the timestamp, level, keys and the entry itself. Cheap (a string's UTF-8 count
    /// is stored), since every line pays it on the thread that logs it.
    var queuedSize: Int {
        switch body {
        case .event(let message, let metadata):
            var n = 64 + message.utf8.count
            for (k, v) in metadata { n += 2 + k.utf8.count + v.utf8.count }
            return n
        case .http(let a):
            return 128 + a.method.utf8.count + a.path.utf8.count + (a.authorization?.utf8.count ?? 0)
        }
    }

    var message: String {
        switch body {
        case .event(let message, _): return message
        case .http: return "http"
        }
    }

    /// The metadata pairs in order (an access line's are made from its raw values here, on the
    /// writer thread).
    func forEachField(_ field: (String, String) -> Void) {
        switch self.body {
        case .event(_, let metadata):
            for (k, v) in metadata { field(k, v) }
        case .http(let a):
            field("method", a.method)
            field("path", a.path)
            field("status", String(a.status))
            field("bytes", a.bytes < 0 ? "stream" : String(a.bytes))
            field("ms", Log.millis(a.nanos))
            field("auth", Log.maskCredential(a.authorization))
        }
    }

    /// The fields of an access line in text form, written as bytes: the same text as
    /// `forEachField` gives, without the strings it makes (one line per request).
    static func appendAccessFields(_ a: HTTPAccess, into out: inout [UInt8]) {
        appendLiteral(" method=", into: &out)
        out.append(contentsOf: a.method.utf8)
        appendLiteral(" path=", into: &out)
        out.append(contentsOf: a.path.utf8)
        appendLiteral(" status=", into: &out)
        appendDecimal(UInt64(max(0, a.status)), into: &out)
        appendLiteral(" bytes=", into: &out)
        if a.bytes < 0 { appendLiteral("stream", into: &out) } else { appendDecimal(UInt64(a.bytes), into: &out) }
        appendLiteral(" ms=", into: &out)
        let micros = a.nanos / 1000
        appendDecimal(micros / 1000, into: &out)
        let frac = Int(micros % 1000)
        out.append(46)
        out.append(UInt8(48 + frac / 100))
        out.append(UInt8(48 + frac / 10 % 10))
        out.append(UInt8(48 + frac % 10))
        appendLiteral(" auth=", into: &out)
        appendMaskedCredential(a.authorization, into: &out)
    }

    @inline(__always)
    private static func appendLiteral(_ s: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private static func appendDecimal(_ n: UInt64, into out: inout [UInt8]) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buf in
            var i = buf.count
            var v = n
            repeat {
                i -= 1
                buf[i] = UInt8(48 + v % 10)
                v /= 10
            } while v > 0
            out.append(contentsOf: buf[i...])
        }
    }

    /// `Log.maskCredential(value)` appended as bytes. Where the bytes the rules look at are
    /// printable ASCII (every real credential) they are masked as bytes, without reading the rest
    /// of a long token; anything else goes through the string form, whose rules see characters.
    static func appendMaskedCredential(_ value: String?, into out: inout [UInt8]) {
        guard var value, !value.isEmpty else { return out.append(UInt8(ascii: "-")) }
        @inline(__always) func printable(_ b: UInt8) -> Bool { b >= 0x20 && b <= 0x7E }
        let done = value.withUTF8 { u -> Bool in
            var start = 0
            while start < u.count && u[start] == 32 { start += 1 }
            let v = UnsafeBufferPointer(rebasing: u[start...])
            // A character after the blanks could merge with the last of them (a combining mark).
            if let first = v.first, !printable(first) { return false }
            if hasPrefixIgnoringCase(v, "key=") {
                // The secret's length and last characters are shown: every byte counts.
                guard v.allSatisfy(printable) else { return false }
                appendLiteral("key=***", into: &out)
                if v.count - 4 >= 16 && !v.contains(UInt8(ascii: ",")) { out.append(contentsOf: v[(v.count - 4)...]) }
            } else if let space = v.firstIndex(of: 32) {
                // The scheme, and the byte after the blank (a combining mark would make the
                // blank part of another character).
                guard v[..<space].allSatisfy(printable), space + 1 >= v.count || printable(v[space + 1]) else { return false }
                out.append(contentsOf: v[..<space])
                appendLiteral(" ***", into: &out)
            } else {
                // No blank byte at all: no blank character either.
                appendLiteral("***", into: &out)
            }
            return true
        }
        if !done { out.append(contentsOf: Log.maskCredential(value).utf8) }
    }

    private static func append(_ key: String, _ value: String.UTF8View, into out: inout [UInt8]) {
        out.append(32)
        out.append(contentsOf: key.utf8)
        out.append(61)
        out.append(contentsOf: value)
    }
}

/// RFC 3339 timestamps for a run of log lines: the date and time of day are formatted once per
/// second, the milliseconds for each line.
struct LogTimestamp {
    private var second = Int64.min
    private var prefix: [UInt8] = []

    mutating func append(millis: Int64, into out: inout [UInt8]) {
        let sec = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        if sec != second {
            // `YYYY-MM-DDTHH:MM:SS` of the full form `YYYY-MM-DDTHH:MM:SS.mmmZ`.
            prefix = Array(rfc3339(millis: sec * 1000).utf8.dropLast(5))
            second = sec
        }
        out.append(contentsOf: prefix)
        let ms = Int(millis - sec * 1000)
        out.append(46)
        out.append(UInt8(48 + ms / 100))
        out.append(UInt8(48 + ms / 10 % 10))
        out.append(UInt8(48 + ms % 10))
        out.append(90)
    }
}
