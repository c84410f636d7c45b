@testable import RoomKit
import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import Platform
import HTTPServer
import XCTest

/// The built `fcm-mock` binary: command line, exit codes, signals, durability.
final class BinaryTests: XCTestCase {
    var tmp: String!

    override func setUpWithError() throws {
        tmp = try temporaryDirectory("mock-bin")
    }

    func testListeningLineDefaultFixtureAndCleanStop() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let c = s.client()
        let r = try c.sendJSON(#"{"to":"demo-android-1","data":{"score":"3x1"}}"#, key: DemoProject.serverKey)
        XCTAssertNil(singleError(r))
        XCTAssertEqual(items(try c.get("/api/v1/devices?sender_id=\(DemoProject.senderID)")).count, 5)
        c.disconnect()
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        let s2 = try BinaryServer(arguments: ["--db", ":memory:"])
        XCTAssertEqual(s2.stop(signal: SIGINT), 0)
    }

    func testBadCommandLinesExit2WithOneLine() throws {
        let cases: [[String]] = [
            ["serve", "--bogus"],
            ["serve", "--http-port", "70000"],
            ["serve", "--http-port"],
            ["serve", "--unknown-tokens", "maybe"],
            ["serve", "--db", "/nonexistent-dir/x/y.sqlite", "--http-port", "0", "--xmpp-port", "0"],
            ["serve", "--fixtures", "/nonexistent.json", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0"],
            ["frobnicate"],
        ]
        for args in cases {
            let r = try runBinary(args)
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.hasPrefix("fcm-mock: "), "\(args): \(r.stderr)")
            XCTAssertEqual(r.stdout, "", "\(args): nothing half-started")
        }
        XCTAssertEqual(try runBinary(["serve", "--bogus"]).stderr.split(separator: "\n").count, 1)
        let unknown = try runBinary(["frobnicate"])
        XCTAssertEqual(unknown.stderr.split(separator: "\n").count, 1, unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("unknown command 'frobnicate'") && unknown.stderr.contains("--help"), unknown.stderr)
    }

    /// The busy-port line names the port, the listener and its flag, and says how to get free ports.
    func testBusyPortExits2() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        defer { s.stop() }
        let http = try runBinary(["serve", "--http-port", String(s.httpPort), "--xmpp-port", "0", "--db", ":memory:"])
        XCTAssertEqual(http.status, 2)
        XCTAssertEqual(http.stderr, "fcm-mock: cannot listen on 127.0.0.1:\(s.httpPort) for HTTP (--http-port): Address already in use; "
                       + "is another fcm-mock running? Give --http-port N, or --http-port 0 --xmpp-port 0 to pick free ports\n")
        let xmpp = try runBinary(["serve", "--http-port", "0", "--xmpp-port", String(s.xmppPort), "--db", ":memory:"])
        XCTAssertEqual(xmpp.status, 2)
        XCTAssertTrue(xmpp.stderr.hasPrefix("fcm-mock: cannot listen on 127.0.0.1:\(s.xmppPort) for XMPP (--xmpp-port): "), xmpp.stderr)
        XCTAssertTrue(xmpp.stderr.contains("Give --xmpp-port N"), xmpp.stderr)
    }

    /// One server per store file: the second refuses with one line naming the file and the
    /// first's pid; once the first has stopped the file is free again. `:memory:` is unaffected.
    func testASecondServerOnTheSameStoreRefusesToStart() throws {
        let db = tmp + "/one.sqlite"
        let first = try BinaryServer(arguments: ["--db", db])
        let second = try runBinary(["serve", "--db", db, "--http-port", "0", "--xmpp-port", "0"])
        XCTAssertEqual(second.status, 2)
        XCTAssertEqual(second.stdout, "")
        XCTAssertEqual(second.stderr, "fcm-mock: the store \(db) is in use by another fcm-mock (pid \(first.process.processIdentifier)): "
                       + "stop that one, or give another --db (or --db :memory:)\n")
        XCTAssertEqual(try first.client().get("/api/v1/health").status, 200, "the first server goes on")
        XCTAssertEqual(first.stop(), 0)
        let third = try BinaryServer(arguments: ["--db", db])
        XCTAssertEqual(third.stop(), 0)
        let memoryA = try BinaryServer(arguments: ["--db", ":memory:"])
        let memoryB = try BinaryServer(arguments: ["--db", ":memory:"])
        XCTAssertEqual(memoryA.stop(), 0)
        XCTAssertEqual(memoryB.stop(), 0)
    }

    /// Start-up says where the store is and which fixtures were loaded; a stop says so last.
    func testStartAndStopAreLogged() throws {
        let fx = tmp + "/fx.json"
        try #"{"projects":[{"sender_id":"77","server_keys":["k77"]}]}"#.write(toFile: fx, atomically: true, encoding: .utf8)
        let s = try BinaryServer(arguments: ["--db", tmp + "/s.sqlite", "--fixtures", fx])
        let started = String(decoding: s.takeStderr(waitingFor: " started "), as: UTF8.self)
        XCTAssertTrue(started.contains(" info fcm-mock \(fcmMockVersion) started db=\(tmp!)/s.sqlite fixtures=\(fx) "), started)
        XCTAssertEqual(s.stop(signal: SIGINT), 0)
        let stopped = String(decoding: s.takeStderr(), as: UTF8.self)
        XCTAssertTrue(stopped.hasSuffix(" info stopped\n"), stopped)
        let demo = try BinaryServer(arguments: ["--db", ":memory:"])
        let line = String(decoding: demo.takeStderr(waitingFor: " started "), as: UTF8.self)
        XCTAssertTrue(line.contains("db=:memory: (nothing is kept) fixtures=built-in demo fixture "), line)
        demo.stop()
    }

    /// Every form of help answers on stdout with exit 0; each command's help lists every option
    /// its parser takes, with the default and the environment variable.
    func testHelpAndVersion() throws {
        for args in [["--help"], ["-h"], ["help"]] {
            let r = try runBinary(args)
            XCTAssertEqual(r.status, 0, "\(args)")
            XCTAssertTrue(r.stdout.contains("usage: fcm-mock [COMMAND]") && r.stdout.contains("  messages  "), r.stdout)
        }
        for command in ["serve", "health", "devices", "messages", "send", "cert", "version", "help"] {
            for args in [["help", command], [command, "--help"], [command, "-h"]] {
                let r = try runBinary(args)
                XCTAssertEqual(r.status, 0, "\(args): \(r.stderr)")
                XCTAssertEqual(r.stderr, "")
                XCTAssertTrue(r.stdout.hasPrefix("usage: fcm-mock \(command)"), "\(args): \(r.stdout)")
            }
        }
        let serve = try runBinary(["serve", "--http-port", "0", "--help"]).stdout
        for o in Configuration.options {
            XCTAssertTrue(serve.contains("  \(o.flag)"), o.flag)
            XCTAssertTrue(serve.contains("default: \(o.defaultText)"), o.flag)
            if let e = o.environment { XCTAssertTrue(serve.contains("env \(e);"), e) }
        }
        for flag in ["--device-rate N/PERIOD", "--topic-rate N/PERIOD", "--max-condition-operators N", "--log-format text|json"] {
            XCTAssertTrue(serve.contains(flag), flag)
        }
        XCTAssertTrue(try runBinary(["messages", "--help"]).stdout.contains("--limit N"))
        XCTAssertTrue(try runBinary(["send", "--help"]).stdout.contains("usage: fcm-mock send --to TOKEN|/topics/NAME [--data KEY=VALUE]"))
        // Every FCM_MOCK_ variable the sources read is in some command's help.
        let helps = try ["serve", "health", "cert"].map { try runBinary([$0, "--help"]).stdout }.joined()
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources").standardized
        let files = FileManager.default.enumerator(atPath: sources.path)!.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        var variables = Set<String>()
        for f in files {
            let text = try String(contentsOfFile: sources.path + "/" + f, encoding: .utf8)
            for m in text.matches(of: /"(FCM_MOCK_[A-Z_]+)"/) { variables.insert(String(m.1)) }
        }
        XCTAssertGreaterThan(variables.count, 15)
        for v in variables.sorted() { XCTAssertTrue(helps.contains(v), "\(v) is read but no help names it") }
        for args in [["--version"], ["-V"], ["version"]] {
            let r = try runBinary(args)
            XCTAssertEqual(r.status, 0)
            XCTAssertEqual(r.stdout, "fcm-mock \(fcmMockVersion)\n")
        }
        let unknown = try runBinary(["help", "frobnicate"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.hasPrefix("fcm-mock: no command 'frobnicate'"), unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("service-account, apns-key, apns-cert, apns-token, cert"), unknown.stderr)
    }

    func testInvalidFixtureNamesFileAndPath() throws {
        let path = tmp + "/bad.json"
        try #"{"projects":[{"sender_id":"1","server_keys":["k"]}],"devices":[{"sender_id":"1"},{"sender_id":"nope"}]}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runBinary(["serve", "--fixtures", path, "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains(path) && r.stderr.contains("$.devices[1]"), r.stderr)
        // Nothing half-made: a store the refused start made is not left behind with the file's
        // first project and device in it.
        let db = tmp + "/refused.sqlite"
        let onFile = try runBinary(["serve", "--fixtures", path, "--db", db, "--http-port", "0", "--xmpp-port", "0"])
        XCTAssertEqual(onFile.status, 2)
        for suffix in ["", "-wal", "-shm"] { XCTAssertFalse(FileManager.default.fileExists(atPath: db + suffix), db + suffix) }
    }

    func testEnvironmentVariablesAndFlagsWin() throws {
        var env = ProcessInfo.processInfo.environment
        env["FCM_MOCK_DB"] = ":memory:"
        env["FCM_MOCK_UNKNOWN_TOKENS"] = "reject"
        let s = try BinaryServer(arguments: [], environment: env)
        XCTAssertEqual(singleError(try s.client().sendJSON(#"{"to":"never-seen"}"#, key: DemoProject.serverKey)), "NotRegistered")
        s.stop()
        let s2 = try BinaryServer(arguments: ["--unknown-tokens", "register"], environment: env)
        XCTAssertNil(singleError(try s2.client().sendJSON(#"{"to":"never-seen"}"#, key: DemoProject.serverKey)))
        s2.stop()
        env["FCM_MOCK_HTTP_PORT"] = "not-a-port"
        let bad = Process()
        bad.executableURL = URL(fileURLWithPath: BinaryServer.executablePath)
        bad.arguments = ["serve"]
        bad.environment = env
        bad.standardError = Pipe()
        bad.standardOutput = Pipe()
        try bad.run()
        bad.waitUntilExit()
        XCTAssertEqual(bad.terminationStatus, 2)
        // The flag wins over its variable, one the variable's value would refuse too.
        let s3 = try BinaryServer(arguments: ["--http-port", "0"], environment: env)
        XCTAssertEqual(try s3.client().get("/api/v1/health").status, 200)
        s3.stop()
        // A flag's value is no flag, and a flag that sets the same thing as another wins over
        // that one's variable too.
        XCTAssertEqual(Configuration.givenFlags(["--control-token", "--db", "--unknown-tokens", "reject"]),
                       ["--control-token", "--unknown-tokens", "--auto-register"])
        var aliases = env
        aliases["FCM_MOCK_HTTP_PORT"] = nil
        aliases["FCM_MOCK_AUTO_REGISTER"] = "maybe"
        let s4 = try BinaryServer(arguments: ["--unknown-tokens", "reject"], environment: aliases)
        XCTAssertEqual(singleError(try s4.client().sendJSON(#"{"to":"never-seen"}"#, key: DemoProject.serverKey)), "NotRegistered")
        s4.stop()
        // An empty control token could never be sent: refused rather than a closed API.
        let empty = try runBinary(["serve", "--control-token", "", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0"])
        XCTAssertEqual(empty.status, 2)
        XCTAssertEqual(empty.stderr, "fcm-mock: --control-token must not be empty (leave it out for an open control API)\n")
    }

    func testFixturesAreIdempotentAndSurviveRestart() throws {
        let db = tmp + "/store.sqlite"
        let fx = tmp + "/fx.json"
        try #"{"projects":[{"sender_id":"77","server_keys":["k77"],"apps":[{"app":"com.x","platform":"android"}]}],"devices":[{"sender_id":"77"},{"sender_id":"77","token":"named"}]}"#
            .write(toFile: fx, atomically: true, encoding: .utf8)
        let s = try BinaryServer(arguments: ["--db", db, "--fixtures", fx, "--fixtures", fx])
        let c = s.client()
        let devices = items(try c.get("/api/v1/devices")).compactMap { $0["token"]?.stringValue }
        XCTAssertEqual(devices.count, 2, "loading the same file twice adds nothing")
        c.disconnect()
        XCTAssertEqual(s.stop(), 0)
        let s2 = try BinaryServer(arguments: ["--db", db, "--fixtures", fx])
        defer { s2.stop() }
        XCTAssertEqual(items(try s2.client().get("/api/v1/devices")).compactMap { $0["token"]?.stringValue }, devices)
    }

    func testEverythingSurvivesARestart() throws {
        let db = tmp + "/store.sqlite"
        let s = try BinaryServer(arguments: ["--db", db])
        let c = s.client()
        XCTAssertEqual(try c.post("/api/v1/projects", #"{"sender_id":"9","server_keys":["k9"]}"#).status, 201)
        let dev = try c.post("/api/v1/devices", #"{"sender_id":"9","online":false}"#)
        let token = try XCTUnwrap(dev.object?["token"]?.stringValue)
        let sent = try c.sendJSON("{\"to\":\"\(token)\",\"data\":{\"k\":\"v\"}}", key: "k9")
        let id = try XCTUnwrap(results(sent).first?["message_id"]?.stringValue)
        c.disconnect()
        XCTAssertEqual(s.stop(), 0)

        let s2 = try BinaryServer(arguments: ["--db", db])
        defer { s2.stop() }
        let c2 = s2.client()
        XCTAssertEqual(try c2.get("/api/v1/devices/\(pathEncode(token))").object?["pending"]?.numberValue?.int64, 1)
        XCTAssertEqual(try c2.get("/api/v1/messages/\(pathEncode(id))").status, 200)
        XCTAssertEqual(try c2.patch("/api/v1/devices/\(pathEncode(token))", #"{"online":true}"#).status, 200)
        XCTAssertEqual(items(try c2.get("/api/v1/devices/\(pathEncode(token))/messages")).first?["status"]?.stringValue, "delivered")
        // New ids after a restart never collide with stored ones.
        let again = try XCTUnwrap(results(try c2.sendJSON("{\"to\":\"\(token)\"}", key: "k9")).first?["message_id"]?.stringValue)
        XCTAssertGreaterThan(MessageID(again)!.micros, MessageID(id)!.micros)
    }

    /// Legacy multicasts on two connections and HTTP v1 sends on two more, killed mid-load:
    /// every message id answered (a legacy result, or the id at the end of a v1 `name`) is
    /// stored after the restart.
    func testKill9LosesNothingThatWasAnswered() throws {
        let db = tmp + "/store.sqlite"
        let s = try BinaryServer(arguments: ["--db", db, "--accept-any-key"])
        let port = s.httpPort
        let answered = LockedIDs()
        let v1Answered = Locked(0)
        let threads = (0..<4).map { t in
            Thread {
                let c = HTTPTestClient(port: port)
                for i in 0..<10_000 {
                    if t >= 2 {
                        let body = "{\"message\":{\"token\":\"k9v1-\(t)-\(i)\",\"data\":{\"i\":\"\(i)\"}}}"
                        guard let r = try? c.postJSON("/v1/projects/demo-project/messages:send", body,
                                                      headers: [("Authorization", "Bearer any")]),
                            let name = r.object?["name"]?.stringValue, let slash = name.lastIndex(of: "/")
                        else { break }
                        answered.add(String(name[name.index(after: slash)...]))
                        v1Answered.withLock { $0 += 1 }
                        continue
                    }
                    guard let r = try? c.sendJSON("{\"registration_ids\":[\"demo-android-1\",\"k9-\(t)-\(i)\"]}", key: DemoProject.serverKey) else { break }
                    for res in r.object?["results"]?.arrayValue ?? [] {
                        if let id = res.objectValue?["message_id"]?.stringValue { answered.add(id) }
                    }
                }
                answered.done()
            }
        }
        threads.forEach { $0.start() }
        // Kill in the middle of the load, once some sends were answered.
        while answered.all().count < 400 { usleep(5_000) }
        kill(s.process.processIdentifier, SIGKILL)
        s.process.waitUntilExit()
        answered.waitForDone(count: 4)
        let ids = Set(answered.all())
        XCTAssertGreaterThanOrEqual(ids.count, 400)
        XCTAssertGreaterThan(v1Answered.withLock { $0 }, 0, "some v1 sends were answered before the kill")

        let s2 = try BinaryServer(arguments: ["--db", db])
        defer { s2.stop() }
        let c = s2.client()
        let stored = try storedRecipientIDs(c)
        XCTAssertTrue(ids.isSubset(of: stored), "\(ids.subtracting(stored).count) of \(ids.count) answered ids were lost")
    }

    func testVersion() throws {
        let r = try runBinary(["version"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stdout, "fcm-mock \(fcmMockVersion)\n")
    }
}

/// Shutdown with requests still waiting.
final class ShutdownTests: XCTestCase {
    func testSIGTERMAnswersWaitingLongPollsAndExits0() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let port = s.httpPort
        let answer = Locked<WireResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        spawnThread {
            let c = HTTPTestClient(port: port)
            answer.withLock { $0 = try? c.get("/api/v1/devices/demo-android-1/messages?wait=60&min=1") }
            done.signal()
        }
        // Make sure the poll is waiting (a send to another device proves the server is past it).
        usleep(200_000)
        XCTAssertNil(singleError(try s.client().sendJSON(#"{"to":"demo-android-2"}"#, key: DemoProject.serverKey)))
        let start = Date()
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10, "the 60 s poll did not hold the shutdown")
        let r = answer.withLock { $0 }
        XCTAssertEqual(r?.status, 200, "the waiting poll got its answer (empty) before the server went")
        XCTAssertEqual(r.map { items($0).count }, 0)
    }

    /// SIGTERM while keep-alive clients keep sending: exit 0 (libmicrohttpd aborted the process
    /// when it was stopped with a request still waiting for its commit), every send answered
    /// 200 is stored, a send refused as the server stops is answered 503 and not stored, and a
    /// send held back by a delay fault gets its own answer at once.
    func testSIGTERMUnderLoadExits0AndAnswersHonestly() throws {
        let tmp = NSTemporaryDirectory() + "fcm-mock-sigterm-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let db = tmp + "/store.sqlite"
        let s = try BinaryServer(arguments: ["--db", db])
        let port = s.httpPort
        XCTAssertEqual(try s.client().post("/api/v1/faults", #"{"when":{"token":"demo-android-2"},"then":{"delay_ms":30000}}"#).status, 201)
        let delayed = Locked<WireResponse?>(nil)
        let delayedDone = DispatchSemaphore(value: 0)
        spawnThread {
            let c = HTTPTestClient(port: port)
            delayed.withLock { $0 = try? c.sendJSON(#"{"to":"demo-android-2"}"#, key: DemoProject.serverKey) }
            delayedDone.signal()
        }
        let answered = LockedIDs()
        let statuses = Locked<Set<Int>>([])
        for t in 0..<4 {
            spawnThread {
                let c = HTTPTestClient(port: port)
                for i in 0..<100_000 {
                    guard let r = try? c.sendJSON("{\"registration_ids\":[\"demo-android-1\",\"term-\(t)-\(i)\"]}", key: DemoProject.serverKey) else { break }
                    statuses.withLock { _ = $0.insert(r.status) }
                    for res in r.object?["results"]?.arrayValue ?? [] {
                        if let id = res.objectValue?["message_id"]?.stringValue { answered.add(id) }
                    }
                }
                answered.done()
            }
        }
        while answered.all().count < 400 { usleep(5_000) }
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        answered.waitForDone(count: 4)
        XCTAssertEqual(delayedDone.wait(timeout: .now() + 10), .success, "the delayed answer did not wait out its 30 s")
        let late = try XCTUnwrap(delayed.withLock { $0 })
        XCTAssertEqual(late.status, 200)
        let lateID = try XCTUnwrap(results(late).first?["message_id"]?.stringValue)
        XCTAssertTrue(statuses.withLock { $0 }.isSubset(of: [200, 503]), "\(statuses.withLock { $0 })")
        let ids = Set(answered.all())
        let s2 = try BinaryServer(arguments: ["--db", db])
        defer { s2.stop() }
        let stored = try storedRecipientIDs(s2.client())
        XCTAssertTrue(ids.isSubset(of: stored), "\(ids.subtracting(stored).count) of \(ids.count) answered ids were lost")
        XCTAssertTrue(stored.contains(lateID))
        XCTAssertEqual(stored.count, ids.count + 1, "only answered sends are stored")
    }
}
