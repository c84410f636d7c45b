import XCTest

/// docs/architecture.md's target table against Package.swift, and the house's walls: what may
/// depend on what. Both files are read as text from the checkout this test was built from.
final class ArchitectureTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `.target(name: "X", dependencies: [...])` and `.executableTarget(...)` of Package.swift
    /// (test targets and system libraries left out), by name.
    static func packageGraph() throws -> [String: Set<String>] {
        let text = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var graph: [String: Set<String>] = [:]
        let pattern = try NSRegularExpression(pattern: #"\.(target|executableTarget)\(name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?"#)
        for m in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let name = String(text[Range(m.range(at: 2), in: text)!])
            var deps = Set<String>()
            if let r = Range(m.range(at: 3), in: text) {
                for d in text[r].split(separator: ",") {
                    let t = d.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                    if !t.isEmpty { deps.insert(t) }
                }
            }
            graph[name] = deps
        }
        return graph
    }

    /// The `| target | depends on |` table of docs/architecture.md.
    static func documentedGraph() throws -> [String: Set<String>] {
        let text = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        guard let start = text.range(of: "| target | depends on |") else { return [:] }
        var graph: [String: Set<String>] = [:]
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2) {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3 else { break }
            graph[cells[1]] = Set(cells[2].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        return graph
    }

    func testTheDocumentedGraphIsPackageSwifts() throws {
        let package = try Self.packageGraph()
        let documented = try Self.documentedGraph()
        XCTAssertFalse(package.isEmpty, "no targets read from Package.swift")
        XCTAssertFalse(documented.isEmpty, "no target table in docs/architecture.md")
        for name in Set(package.keys).union(documented.keys).sorted() {
            XCTAssertEqual(documented[name], package[name],
                           "docs/architecture.md says \(name) depends on \(documented[name].map { $0.sorted() } ?? []); Package.swift: \(package[name].map { $0.sorted() } ?? [])")
        }
    }

    /// Every `import` in a target's sources names a target it declares in Package.swift, or the
    /// toolchain's own modules: the build would take a module reached through another target's
    /// dependencies, and the graph would lie.
    func testEachImportIsADeclaredDependency() throws {
        let g = try Self.packageGraph()
        let toolchain: Set<String> = ["Foundation", "Dispatch", "Synchronization", "Glibc", "XCTest"]
        let importLine = try NSRegularExpression(pattern: #"^(?:@testable |public |package |internal )?import ([A-Za-z_][A-Za-z0-9_]*)\s*$"#)
        var checked = 0
        for (name, deps) in g.sorted(by: { $0.key < $1.key }) {
            let dir = Self.root.appendingPathComponent("Sources/\(name)")
            guard let files = FileManager.default.enumerator(atPath: dir.path) else { continue }
            for case let f as String in files where f.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(f), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let l = String(line)
                    guard let m = importLine.firstMatch(in: l, range: NSRange(l.startIndex..., in: l)),
                          let r = Range(m.range(at: 1), in: l) else { continue }
                    let module = String(l[r])
                    checked += 1
                    XCTAssertTrue(deps.contains(module) || toolchain.contains(module),
                                  "Sources/\(name)/\(f) imports \(module), which Package.swift does not give \(name)")
                }
            }
        }
        XCTAssertGreaterThan(checked, 300, "too few imports found: the scan is broken")
    }

    /// Everything `name` reaches through the graph (C targets are leaves).
    static func reach(_ name: String, _ graph: [String: Set<String>]) -> Set<String> {
        var seen = Set<String>()
        var todo = Array(graph[name] ?? [])
        while let n = todo.popLast() {
            if seen.insert(n).inserted { todo.append(contentsOf: graph[n] ?? []) }
        }
        return seen
    }

    func testTheWallsOfTheHouse() throws {
        let g = try Self.packageGraph()
        // The engine knows no wire: no transport, no TLS, no assembly above it.
        XCTAssertEqual(g["FCMEngine"], ["FCMCore", "FCMModel", "FCMStore", "Platform"])
        // Its values stand on the rules and the store's rows only: no lock, no clock, no I/O.
        XCTAssertEqual(g["FCMModel"], ["FCMCore", "FCMStore"])
        // The rules do no I/O; the store and the platform know nothing of FCM.
        XCTAssertEqual(g["FCMCore"], [])
        XCTAssertEqual(g["Platform"], [])
        for lower in ["FCMStore", "HTTPServer", "XMPPServer", "TLS", "Platform"] {
            let reached = Self.reach(lower, g)
            for upper in ["FCMCore", "FCMModel", "FCMEngine", "FCMServer", "FCMCommand"] {
                XCTAssertFalse(reached.contains(upper), "\(lower) reaches \(upper)")
            }
        }
        // A room per protocol: each stands on the engine, never on another room; only the
        // assembly (FCMServer) imports them all, and nothing below the rooms reaches one.
        let rooms = ["FCMLegacy", "FCMV1", "CCS", "APNs", "WebPush", "Autopush", "GCM", "FCMRegistrations", "Control"]
        for room in rooms {
            XCTAssertNotNil(g[room], "no target \(room)")
            XCTAssertTrue(g[room]?.contains("FCMEngine") == true, "\(room) does not stand on the engine")
            let reached = Self.reach(room, g)
            for other in rooms where other != room {
                XCTAssertFalse(reached.contains(other), "the room \(room) reaches the room \(other)")
            }
            XCTAssertTrue(g["FCMServer"]?.contains(room) == true, "the assembly does not import \(room)")
        }
        for (name, deps) in g where !["FCMServer"].contains(name) {
            let importsEveryRoom = rooms.allSatisfy { deps.contains($0) }
            XCTAssertFalse(importsEveryRoom, "\(name) imports every room: only the assembly does")
        }
        for lower in ["FCMEngine", "FCMModel", "FCMCore", "FCMStore", "RoomKit", "HTTPServer", "XMPPServer", "TLS", "Platform"] {
            let reached = Self.reach(lower, g)
            for room in rooms { XCTAssertFalse(reached.contains(room), "\(lower) reaches the room \(room)") }
        }
        let engine = Self.root.appendingPathComponent("Sources/FCMEngine")
        // The shared rules import nothing: no lock, no clock, no file (random bits and times come
        // in from the caller, as `uuidString(high:low:)` takes Platform's and a token's shape a
        // generator).
        let core = Self.root.appendingPathComponent("Sources/FCMCore")
        for f in try FileManager.default.contentsOfDirectory(atPath: core.path) where f.hasSuffix(".swift") {
            let text = try String(contentsOf: core.appendingPathComponent(f), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.hasPrefix("public import ") {
                XCTFail("FCMCore/\(f) imports a module: \(line)")
            }
            // Nor draws randomness of its own: a generator is its caller's to pass.
            XCTAssertFalse(text.contains("SystemRandomNumberGenerator()"), "FCMCore/\(f) draws from the system's generator")
        }
        // The values import the rules and the store's rows only (so no lock, clock or file), keep
        // no shared mutable state, and never reach for the store's connection.
        let model = Self.root.appendingPathComponent("Sources/FCMModel")
        for f in try FileManager.default.contentsOfDirectory(atPath: model.path) where f.hasSuffix(".swift") {
            let text = try String(contentsOf: model.appendingPathComponent(f), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let l = line.trimmingCharacters(in: .whitespaces)
                guard !l.hasPrefix("//") else { continue }
                if l.hasPrefix("import ") || l.contains(" import ") {
                    let module = l.split(separator: " ").last.map(String.init) ?? ""
                    XCTAssertTrue(["FCMCore", "FCMStore"].contains(module), "FCMModel/\(f) imports \(module)")
                }
                for unsafe in ["@unchecked Sendable", "nonisolated(unsafe)", "static var ", "SQLiteConnection", "SystemRandomNumberGenerator()"] {
                    XCTAssertFalse(l.contains(unsafe), "FCMModel/\(f) holds \(unsafe): \(l)")
                }
            }
        }
        // The engine and its values name no wire: no header, HTTP status, path or vendor error text.
        let wire = try NSRegularExpression(pattern: #""apns-|"[Bb]earer|"[Aa]uthorization"|httpStatus: *[0-9]|"/fcm/send"|[Rr]etry-[Aa]fter|INVALID_ARGUMENT"#
            + #"|https?://|ya29|"/wp/|Error=|Content-Type|Request is missing|Requested entity|fcmMessageId|Urgency|"aesgcm"|do_not_collapse|apns_id|decrypt_error"#
            + #"|"eyJ"|"3_"|:APA91b|3599|604_?800|"web\.|"Error"|INTERNAL_SERVER_ERROR|"/topics/""#)
        var enginePublic = 0
        for (folder, dir) in [("FCMEngine", engine), ("FCMModel", model)] {
            for f in try FileManager.default.contentsOfDirectory(atPath: dir.path) where f.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(f), encoding: .utf8)
                for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    let l = String(line)
                    XCTAssertNil(wire.firstMatch(in: l, range: NSRange(l.startIndex..., in: l)), "\(folder)/\(f) names a wire: \(l)")
                    let declaration = l.trimmingCharacters(in: .whitespaces)
                    // `package` counts too: to the other modules of the package it is as open.
                    if folder == "FCMEngine", declaration.hasPrefix("public ") || declaration.hasPrefix("package "),
                       !declaration.hasPrefix("public import "), !declaration.hasPrefix("package import ") {
                        enginePublic += 1
                    }
                }
            }
        }
        // The engine's port stays narrow: what the rooms and the assembly may call or read of it.
        XCTAssertGreaterThan(enginePublic, 0, "no public declaration counted in FCMEngine")
        XCTAssertLessThanOrEqual(enginePublic, 215, "FCMEngine declares \(enginePublic) public or package things")
        // Nothing but the command line, the executable and the test support stands on the server.
        for (name, deps) in g where deps.contains("FCMServer") {
            XCTAssertTrue(["FCMCommand", "FCMTesting", "fcm-mock"].contains(name), "\(name) depends on FCMServer")
        }
        // The rooms reach the store only through the engine's calls, never through its `store`.
        let storeReach = try NSRegularExpression(pattern: #"\bengine\.store\b|\.store\.[a-z]"#)
        for room in rooms + ["RoomKit"] {
            let dir = Self.root.appendingPathComponent("Sources/\(room)")
            for f in try FileManager.default.contentsOfDirectory(atPath: dir.path) where f.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(f), encoding: .utf8)
                for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    let l = String(line)
                    XCTAssertNil(storeReach.firstMatch(in: l, range: NSRange(l.startIndex..., in: l)), "\(room)/\(f) reaches the store: \(l)")
                }
            }
        }
        // The engine reads typed rows (StoreReader), never the SQL connection.
        for f in try FileManager.default.contentsOfDirectory(atPath: engine.path) where f.hasSuffix(".swift") {
            let text = try String(contentsOf: engine.appendingPathComponent(f), encoding: .utf8)
            XCTAssertFalse(text.contains("SQLiteConnection"), "FCMEngine/\(f) names SQLiteConnection")
        }
        // Imports are internal unless marked public, in every Swift target.
        let text = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        for name in g.keys.sorted() where !name.hasPrefix("C") {
            // The target's declaration (not the product's), to the next entry of the list.
            let start = text.range(of: ".target(name: \"\(name)\"") ?? text.range(of: ".executableTarget(name: \"\(name)\"")
            let declaration = start.map { r in text[r.lowerBound...].split(separator: "\n        .", maxSplits: 1).first ?? "" } ?? ""
            XCTAssertTrue(declaration.contains("swiftSettings: houseSettings"),
                          "\(name) is built without the upcoming-feature settings")
        }
    }

    /// The lines of each function, initialiser and subscript body in `text`, from its declaration
    /// to the brace that closes its body, with the declaration's line number. The body opens at
    /// the first `{` outside the parameter list (a default closure's braces are not it); braces
    /// in string literals (plain, raw `#"…"#` and multi-line), and after `//`, do not count.
    static func bodyLengths(_ text: String) -> [(line: Int, length: Int)] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let modifiers = #"^\s*((public|package|private|fileprivate|internal|static|class|final|mutating|nonisolated|override|convenience|required|@\w+(\([^)]*\))?)\s+)*"#
        let declaration = try! NSRegularExpression(pattern: modifiers + #"(func\s|init[?!]?\s*[(<]|deinit\b|subscript\s*[(<])"#)
        let raw = try! NSRegularExpression(pattern: ##"#"(?:[^"]|"(?!#))*"#"##)
        let plain = try! NSRegularExpression(pattern: #""(\\.|[^"\\])*""#)
        // Each line as code: literals emptied, comments cut, multi-line literals blank.
        var code: [String] = []
        var inLiteral = false
        for line in lines {
            let delimiters = line.components(separatedBy: "\"\"\"").count - 1
            if inLiteral {
                code.append("")
                if delimiters % 2 == 1 { inLiteral = false }
                continue
            }
            var l = line
            if delimiters % 2 == 1, let open = l.range(of: "\"\"\"") {
                l = String(l[..<open.lowerBound])
                inLiteral = true
            }
            l = raw.stringByReplacingMatches(in: l, range: NSRange(l.startIndex..., in: l), withTemplate: "\"\"")
            l = plain.stringByReplacingMatches(in: l, range: NSRange(l.startIndex..., in: l), withTemplate: "\"\"")
            if let comment = l.range(of: "//") { l = String(l[..<comment.lowerBound]) }
            code.append(l)
        }
        var found: [(line: Int, length: Int)] = []
        for (i, line) in lines.enumerated() where declaration.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
            var parens = 0, depth = 0, started = false, ended = false, j = i
            scan: while j < code.count, j < i + 40 || started {
                for ch in code[j] {
                    if !started {
                        switch ch {
                        case "(", "[": parens += 1
                        case ")", "]": parens -= 1
                        case "{" where parens == 0: started = true; depth = 1
                        case "{": depth += 1
                        case "}" where parens == 0 && depth == 0: break scan // a requirement without a body
                        case "}": depth -= 1
                        default: break
                        }
                    } else if ch == "{" {
                        depth += 1
                    } else if ch == "}" {
                        depth -= 1
                        if depth == 0 { ended = true; break scan }
                    }
                }
                j += 1
            }
            if started && ended { found.append((i + 1, j - i + 1)) }
        }
        return found
    }

    /// No function, initialiser or subscript in Sources is longer than 120 lines.
    func testNoFunctionIsOver120Lines() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        guard let files = FileManager.default.enumerator(atPath: sources.path) else { return XCTFail("no Sources folder") }
        var counted = 0
        for case let f as String in files where f.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(f), encoding: .utf8)
            for (line, length) in Self.bodyLengths(text) {
                counted += 1
                XCTAssertLessThanOrEqual(length, 120, "Sources/\(f):\(line) is \(length) lines long")
            }
        }
        XCTAssertGreaterThan(counted, 1000, "too few functions found: the scan is broken")
    }

    /// The scan itself: a body's length from its declaration to its brace, braces in strings and
    /// comments ignored, a protocol requirement without a body skipped.
    func testBodyLengthsCountsFromDeclarationToBrace() {
        let text = """
        protocol P {
            func need() -> Int
        }
        struct S {
            public static func f(_ x: Int) -> String { // a { in a comment
                let s = "}{ in a string"
                if x > 0 {
                    return s
                }
                return ""
            }
            init(y: Int) { _ = y }
            init(make: @escaping () -> [Int] = { [] },
                 z: Int) {
                _ = make
                _ = z
            }
            func g() {
                _ = #"a"b}"#
                let css = \"\"\"
                a { b } c { url(http://h/i.png) }
                \"\"\"
                _ = css
            }
        }
        """
        let found = Self.bodyLengths(text)
        XCTAssertEqual(found.map(\.line), [5, 12, 13, 18])
        XCTAssertEqual(found.map(\.length), [7, 1, 5, 7])
    }

    /// docs/adding-a-protocol.md quotes the APNs room: every line of its Swift blocks is a line of
    /// Sources/APNs (leading blanks aside), so the walk-through cannot drift from the code.
    func testTheWalkThroughQuotesTheAPNsRoom() throws {
        let doc = try String(contentsOf: Self.root.appendingPathComponent("docs/adding-a-protocol.md"), encoding: .utf8)
        let room = Self.root.appendingPathComponent("Sources/APNs")
        var lines = Set<String>()
        for f in try FileManager.default.contentsOfDirectory(atPath: room.path) where f.hasSuffix(".swift") {
            let text = try String(contentsOf: room.appendingPathComponent(f), encoding: .utf8)
            for l in text.split(separator: "\n") { lines.insert(l.trimmingCharacters(in: .whitespaces)) }
        }
        let blocks = doc.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        XCTAssertGreaterThanOrEqual(blocks.count, 2, "the walk-through has its Swift excerpts")
        for block in blocks {
            for l in block.split(separator: "\n") where !l.trimmingCharacters(in: .whitespaces).isEmpty {
                let line = l.trimmingCharacters(in: .whitespaces)
                XCTAssertTrue(lines.contains(line), "docs/adding-a-protocol.md quotes a line Sources/APNs does not have: \(line)")
            }
        }
    }
}
