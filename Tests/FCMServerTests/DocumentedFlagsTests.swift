@testable import FCMCommand
import FCMServer
import Foundation
import XCTest

/// Every `--flag` README.md and docs/*.md name is one the command it belongs to accepts, so the
/// docs cannot promise a flag the binary refuses (docs/v1.md once named `--max-body-bytes`).
final class DocumentedFlagsTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The commands and the flags each accepts, read from their help, which is generated from the
    /// tables their parsers use (`Configuration.options`, `CLI.options`; `cert`'s two).
    static let commands = ["serve", "health", "devices", "messages", "send", "service-account", "apns-key", "apns-cert", "apns-token", "cert"]

    static func accepted(by command: String) -> Set<String> {
        var flags: Set<String> = ["--help", "-h"]
        for line in (Help.text(for: command) ?? "").split(separator: "\n") where line.hasPrefix("  --") {
            flags.insert(String(line.dropFirst(2).prefix { $0 != " " }))
        }
        return flags
    }

    /// Flags of other programs the docs show, with the program: such a flag must have its
    /// program named on its line or one of the two before it.
    static let foreign: [String: [String]] = [
        "--rm": ["docker"], "--build": ["docker"], "--user": ["docker"],
        "--resolve": ["curl"], "--http2": ["curl"], "--cert": ["curl"], "--http2-prior-knowledge": ["curl"], "--cacert": ["curl"],
        "--timeout": ["wrk"], "--h1": ["h2load"],
        "--tool": ["valgrind"], "--instr-atstart": ["callgrind"], "--callgrind-out-file": ["valgrind"],
        "--static-swift-stdlib": ["Swift", "release"], "--reset-load": ["soak"], "--memory": ["bench/bounded.py"],
        "--map-root-user": ["unshare"], "--net": ["unshare"], "--mount": ["unshare"], "--bind": ["mount"],
        "--dns-result-order": ["Node"],
        "--fcm-mock-bin": ["pytest"], "--fcm-mock-url": ["pytest"], "--fcm-mock-fixtures": ["pytest"],
        "--fcm-mock-https": ["pytest"], "--fcm-mock-cacert": ["pytest"], "--fcm-mock-https-url": ["pytest"], "--strict": ["mypy"], "--variant": ["debootstrap"],
        "--build-arg": ["podman", "docker"], "--build-context": ["podman", "docker"],
        "--headless": ["firefox-esr", "chromium"], "--no-remote": ["firefox-esr"], "--profile": ["firefox-esr"],
        "--remote-debugging-port": ["firefox-esr", "chromium"], "--empty-password": ["certutil"],
        "--no-sandbox": ["chromium", "Chromium"], "--no-first-run": ["chromium"], "--user-data-dir": ["chromium"],
        "--gcm-checkin-url": ["chromium"], "--gcm-registration-url": ["chromium"], "--gcm-mcs-endpoint": ["chromium"],
        "--gcm-": ["chromium"], "--autopush": ["bench/run.sh"], "--mcs": ["bench/run.sh"], "--inclusive": ["callgrind_annotate"],
        "--simplified": ["swift-demangle"], "--build-tests": ["swift build"], "--sanitize": ["swift build"],
        "--fsize": ["prlimit"],
    ]

    func testTheTablesAreRead() {
        XCTAssertTrue(Self.accepted(by: "serve").isSuperset(of: ["--http-port", "--https-port", "--db", "--max-messages"]))
        XCTAssertTrue(Self.accepted(by: "service-account").isSuperset(of: ["--project", "--out", "--server", "--cacert"]))
        XCTAssertEqual(Self.accepted(by: "cert"), ["--out", "--host", "--help", "-h"])
        XCTAssertFalse(Self.accepted(by: "serve").contains("--max-body-bytes"))
    }

    func testEveryDocumentedFlagIsAcceptedByItsCommand() throws {
        var files = [Self.root.appendingPathComponent("README.md")]
        let docs = Self.root.appendingPathComponent("docs")
        files += try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }.sorted()
            .map { docs.appendingPathComponent($0) }
        XCTAssertGreaterThan(files.count, 10)
        let byCommand = Dictionary(uniqueKeysWithValues: Self.commands.map { ($0, Self.accepted(by: $0)) })
        let any = byCommand.values.reduce(Set<String>(["--version"])) { $0.union($1) }
        let flag = try NSRegularExpression(pattern: #"(?<![A-Za-z0-9_-])--[a-z][a-z0-9-]*"#)
        let invocation = try NSRegularExpression(
            pattern: #"fcm-mock(?: (serve|health|devices|messages|send|service-account|apns-key|apns-cert|apns-token|cert))?(?= --| |$)|make run ARGS="#)
        var checked = 0
        var problems: [String] = []
        for file in files {
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (n, line) in lines.enumerated() {
                let ns = line as NSString
                let calls = invocation.matches(in: line, range: NSRange(location: 0, length: ns.length))
                for m in flag.matches(in: line, range: NSRange(location: 0, length: ns.length)) {
                    let name = ns.substring(with: m.range)
                    let at = "\(file.lastPathComponent):\(n + 1): \(name)"
                    checked += 1
                    // The nearest `fcm-mock COMMAND` before it on the line, unless a shell
                    // separator, a comment or the end of a code span comes between.
                    if let call = calls.last(where: { $0.range.location < m.range.location }) {
                        let between = ns.substring(with: NSRange(location: call.range.location,
                                                                 length: m.range.location - call.range.location))
                        if !between.contains(where: { "#|;`".contains($0) }), !between.contains("&&") {
                            let command = call.range(at: 1).location != NSNotFound ? ns.substring(with: call.range(at: 1)) : "serve"
                            if !(byCommand[command] ?? []).contains(name), !(command == "serve" && name == "--version") {
                                problems.append("\(at) is not an option of 'fcm-mock \(command)'")
                            }
                            continue
                        }
                    }
                    if any.contains(name) { continue }
                    if let tools = Self.foreign[name] {
                        let context = lines[max(0, n - 2)...n].joined(separator: "\n")
                        if tools.contains(where: { context.contains($0) }) { continue }
                        problems.append("\(at) is \(tools.joined(separator: "/"))'s, but its line does not name it")
                        continue
                    }
                    problems.append("\(at) is no fcm-mock command's option")
                }
            }
        }
        XCTAssertGreaterThan(checked, 200, "the docs name a few hundred flags")
        XCTAssertEqual(problems, [], problems.joined(separator: "\n"))
    }
}
