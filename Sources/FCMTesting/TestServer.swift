import RoomKit
public import HTTPServer
import FCMEngine
import FCMCore
public import FCMServer
public import Foundation
import Platform

/// The demo project of the built-in default fixture, as tests and README use it.
public enum DemoProject {
    public static let senderID = "123456789012"
    public static let serverKey = "AAAAfcmmock:demo-server-key"
    public static let androidApp = "com.example.demo"
    public static let iosApp = "com.example.demo.ios"
}

/// The application started in-process on port 0 with a throwaway store, for end-to-end tests
/// that talk real HTTP to it. Stop it in `tearDown` (or with `defer`) even when a test fails.
public final class TestServer {
    public let app: Application
    public let port: Int

    /// Starts the server; `fixtures` are JSON documents written to a temporary folder (none: the
    /// built-in default fixture).
    /// `configure` may change what no command-line flag sets.
    public init(fixtures: [String] = [], db: String = ":memory:", unknownTokens: String = "register",
                extraArguments: [String] = [], configure: (inout Configuration) -> Void = { _ in }) throws {
        var args = ["--http-port", "0", "--xmpp-port", "0", "--db", db, "--unknown-tokens", unknownTokens]
        for (i, f) in fixtures.enumerated() {
            let path = NSTemporaryDirectory() + "fcm-mock-fixture-\(UUID().uuidString)-\(i).json"
            try f.write(toFile: path, atomically: true, encoding: .utf8)
            args += ["--fixtures", path]
        }
        var config = try Configuration.parse(arguments: args + extraArguments, environment: [:])
        configure(&config)
        app = try Application(config, log: Log(level: "error"))
        try app.start()
        port = app.httpPort
    }

    /// A new client connected to this server.
    public func client() -> HTTPTestClient { HTTPTestClient(port: port) }

    /// Stops the server.
    public func stop() { app.stop() }
}

/// The built `fcm-mock` binary started as a child process, for tests of the command line,
/// signals and crash safety.
public final class BinaryServer {
    public let process: Process
    public let httpPort: Int
    public let xmppPort: Int
    /// The HTTPS port from the listening line (nil without `--https-port`).
    public let httpsPort: Int?
    private let stderrPipe: Pipe
    /// Everything the server wrote to stderr and no test took yet. A thread drains the pipe all
    /// the time, so a busy server (one access-log line a request) never blocks on a full pipe.
    private let stderrBuffer = Locked<(bytes: [UInt8], total: Int, closed: Bool)>(([], 0, false))

    /// Where `swift build` put the executable: next to the test bundle.
    public static var executablePath: String {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = testBinary.deletingLastPathComponent()
        while dir.path != "/" {
            let candidate = dir.appendingPathComponent("fcm-mock").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return ".build/debug/fcm-mock"
    }

    /// Starts `fcm-mock serve` with `arguments` (ports 0 are added unless given) and waits for the
    /// `listening` line. `maxOpenFiles` lowers the process's descriptor limit (`ulimit -n`);
    /// `maxFileBytes` the size any file it writes may reach (`RLIMIT_FSIZE`: a write past it
    /// fails with EFBIG, as on a full disk).
    /// `pickXMPPPort` false leaves the XMPP port to the server's default when `arguments` give none.
    public init(arguments: [String], environment: [String: String]? = nil, maxOpenFiles: Int? = nil,
                maxFileBytes: Int? = nil, timeout: TimeInterval = 20, pickXMPPPort: Bool = true) throws {
        var args = ["serve"]
        if !arguments.contains("--http-port") { args += ["--http-port", "0"] }
        if pickXMPPPort && !arguments.contains("--xmpp-port") { args += ["--xmpp-port", "0"] }
        args += arguments
        let p = Process()
        if let maxOpenFiles {
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", "ulimit -n \(maxOpenFiles) && exec \"$0\" \"$@\"", Self.executablePath] + args
        } else if let maxFileBytes {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")  // util-linux: on every Debian
            p.arguments = ["--fsize=\(maxFileBytes)", "--", Self.executablePath] + args
        } else {
            p.executableURL = URL(fileURLWithPath: Self.executablePath)
            p.arguments = args
        }
        if let environment { p.environment = environment }
        let out = Pipe()
        stderrPipe = Pipe()
        p.standardOutput = out
        p.standardError = stderrPipe
        try p.run()
        process = p
        let errFD = stderrPipe.fileHandleForReading.fileDescriptor
        let buffer = stderrBuffer
        spawnThread {
            var chunk = [UInt8](repeating: 0, count: 16384)
            while true {
                let n = read(errFD, &chunk, chunk.count)
                if n <= 0 { buffer.withLock { $0.closed = true }; return }
                buffer.withLock { $0.bytes += chunk[0..<n]; $0.total += n }
            }
        }
        let line = try Self.readLine(out.fileHandleForReading, timeout: timeout)
        guard let l = line, let h = Self.port(l, "http="), let x = Self.port(l, "xmpp=") else {
            p.terminate()
            p.waitUntilExit()
            usleep(50_000)
            let err = String(decoding: buffer.withLock { $0.bytes }, as: UTF8.self)
            throw TestError("the server did not print its listening line (got \(line ?? "nothing")); stderr: \(err)")
        }
        httpPort = h
        xmppPort = x
        httpsPort = Self.port(l, "https=")
    }

    /// What the server wrote to stderr since the last call, once nothing new came for 50 ms.
    /// `waitingFor`: first wait (up to `timeout`) until what was not taken yet contains it, or the
    /// pipe closed, so a loaded machine that writes the line late does not make an empty answer.
    /// After `stop()` everything the process wrote is there: stop waits for the pipe's end.
    public func takeStderr(waitingFor needle: String? = nil, timeout: TimeInterval = 10) -> Data {
        if let needle {
            let wanted = Array(needle.utf8)
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                let (found, closed) = stderrBuffer.withLock { b in
                    (b.bytes.count >= wanted.count && (0...(b.bytes.count - wanted.count)).contains { i in
                        b.bytes[i..<(i + wanted.count)].elementsEqual(wanted) }, b.closed)
                }
                if found || closed { break }
                usleep(10_000)
            }
        }
        var seen = stderrBuffer.withLock { $0.total }
        while true {
            usleep(50_000)
            let now = stderrBuffer.withLock { $0.total }
            if now == seen { break }
            seen = now
        }
        return Data(stderrBuffer.withLock { b -> [UInt8] in defer { b.bytes = [] }; return b.bytes })
    }

    static func port(_ line: String, _ key: String) -> Int? {
        guard let r = line.range(of: key) else { return nil }
        let rest = line[r.upperBound...].prefix { $0 != " " }
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        return Int(rest[rest.index(after: colon)...])
    }

    static func readLine(_ h: FileHandle, timeout: TimeInterval) throws -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var bytes: [UInt8] = []
        let fd = h.fileDescriptor
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 100) > 0 {
                var b: UInt8 = 0
                let n = read(fd, &b, 1)
                if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
                if b == 10 { return String(decoding: bytes, as: UTF8.self) }
                bytes.append(b)
            }
        }
        return nil
    }

    /// A client for the HTTP port.
    public func client() -> HTTPTestClient { HTTPTestClient(port: httpPort) }

    /// The process's resident memory (`VmRSS` of /proc/PID/status), in bytes; nil once it is gone.
    public var residentBytes: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else { return nil }
        return kib * 1024
    }

    /// Sends `signal` and waits for the process to exit; returns its exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        // The drain thread reads what the process wrote last; wait for the pipe's end (bounded:
        // a child the server started could hold it open).
        let deadline = Date().addingTimeInterval(5)
        while !stderrBuffer.withLock({ $0.closed }) && Date() < deadline { usleep(5_000) }
        return process.terminationStatus
    }
}

/// Runs the binary to completion (for exit-code tests) and returns status, stdout and stderr.
public func runBinary(_ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 20) throws
    -> (status: Int32, stdout: String, stderr: String) {
    try runProcess(BinaryServer.executablePath, arguments, environment: environment, timeout: timeout)
}

/// Runs `executable` to completion with extra `environment` variables; returns status and output.
public func runProcess(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       timeout: TimeInterval = 20) throws -> (status: Int32, stdout: String, stderr: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    // Both pipes are drained while the process runs: one that writes more than a pipe holds
    // (64 KiB) would otherwise wait for a reader forever.
    let outData = Locked<Data>(Data()), errData = Locked<Data>(Data())
    let drained = DispatchGroup()
    for (handle, box) in [(out.fileHandleForReading, outData), (err.fileHandleForReading, errData)] {
        drained.enter()
        DispatchQueue.global().async {
            let d = handle.readDataToEndOfFile()
            box.withLock { $0 = d }
            drained.leave()
        }
    }
    let deadline = Date().addingTimeInterval(timeout)
    while p.isRunning && Date() < deadline { usleep(10_000) }
    if p.isRunning { p.terminate(); p.waitUntilExit(); throw TestError("\(executable) \(arguments) did not exit within \(timeout)s") }
    _ = drained.wait(timeout: .now() + 5)
    let o = String(decoding: outData.withLock { $0 }, as: UTF8.self)
    let e = String(decoding: errData.withLock { $0 }, as: UTF8.self)
    return (p.terminationStatus, o, e)
}
