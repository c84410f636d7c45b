import FCMCore
import FCMStore

/// One fixture file as read at start: reset applies it again from memory, so editing the file
/// afterwards changes nothing until a restart.
public struct FixtureDocument: Sendable {
    public let name: String
    public let bytes: [UInt8]
}

/// Loads fixture files (control-api.md "Fixtures file") through the same engine calls the control
/// API uses. Loading is idempotent: projects merge, devices that exist are left alone, and devices
/// without a token get one derived from their place in the file.
public enum Fixtures {
    /// The name the built-in default fixture is logged and reported under.
    public static let builtInName = "built-in demo fixture"

    /// Loads each path (a file, or a folder meaning every `*.json` in it in name order); with no
    /// paths, the default fixture built into the binary. The engine keeps the documents, and
    /// `reset` applies them again.
    @discardableResult
    public static func load(_ paths: [String], into engine: Engine) throws(ConfigurationError) -> [FixtureDocument] {
        let documents = try read(paths)
        try apply(documents, into: engine)
        engine.startFixtures.withLock { $0 = documents }
        return documents
    }

    /// Applies documents read before (at start, or again after a reset).
    public static func apply(_ documents: [FixtureDocument], into engine: Engine) throws(ConfigurationError) {
        for d in documents { try load(d.bytes, name: d.name, into: engine) }
    }

    /// Reads each path (a file, or a folder's `*.json` in name order); none: the built-in one.
    static func read(_ paths: [String]) throws(ConfigurationError) -> [FixtureDocument] {
        if paths.isEmpty { return [FixtureDocument(name: builtInName, bytes: Array(defaultFixtureJSON.utf8))] }
        var documents: [FixtureDocument] = []
        for path in paths {
            guard let kind = SystemIO.kind(of: path) else {
                throw ConfigurationError("fixtures: \(path) does not exist")
            }
            var files = [path]
            if kind == .directory {
                guard let names = SystemIO.list(path) else { throw ConfigurationError("fixtures: cannot list \(path)") }
                let dir = path.hasSuffix("/") ? path : path + "/"
                files = names.filter { $0.hasSuffix(".json") }.sorted().map { dir + $0 }
            }
            for f in files {
                guard let data = SystemIO.readFile(f) else { throw ConfigurationError("fixtures: cannot read \(f)") }
                documents.append(FixtureDocument(name: f, bytes: data))
            }
        }
        return documents
    }

    /// Loads one fixture document; errors name the file and the JSON path of the problem.
    public static func load(_ bytes: [UInt8], name: String, into engine: Engine) throws(ConfigurationError) {
        func fail(_ path: String, _ message: String) -> ConfigurationError {
            ConfigurationError("fixtures: \(name): \(path): \(message)")
        }
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw fail("$", "invalid JSON: \(error.message)")
        }
        guard let obj = root.objectValue else { throw fail("$", "the document must be a JSON object") }
        for k in obj.keys where !["projects", "devices", "subscriptions", "groups"].contains(k) {
            throw fail("$.\(k)", "unknown key; allowed: projects, devices, subscriptions, groups")
        }
        let now = engine.clock.nowMillis()
        // Everything is queued first and committed together: one commit per fixture device would
        // make a 10,000-device file take seconds to load.
        var tickets: [Store.Ticket] = []
        var committed = false
        defer {
            // On an error below, what was queued still gets committed before start-up stops.
            if !committed { for t in tickets { try? engine.commit(t) } }
        }
        if let v = obj["projects"] {
            guard let items = v.arrayValue else { throw fail("$.projects", "must be an array") }
            for (i, item) in items.enumerated() {
                let path = "$.projects[\(i)]"
                guard let o = item.objectValue else { throw fail(path, "must be an object") }
                do {
                    let (_, t) = try engine.createProjectQueued(try ControlAPI.projectSpec(Body(o, path: ""), now: now), upsert: true)
                    if let t { tickets.append(t) }
                } catch {
                    throw fail(path, error.message)
                }
            }
        }
        if let v = obj["devices"] {
            guard let items = v.arrayValue else { throw fail("$.devices", "must be an array") }
            for (i, item) in items.enumerated() {
                let path = "$.devices[\(i)]"
                guard let o = item.objectValue else { throw fail(path, "must be an object") }
                do {
                    var spec = try ControlAPI.deviceSpec(Body(o, path: ""))
                    if spec.token == nil {
                        spec.token = deterministicRegistrationToken(
                            seed: "\(spec.senderID)|\(spec.app ?? "")|\(spec.platform.rawValue)|\(i)")
                    }
                    let (_, t) = try engine.createDeviceQueued(spec, idempotent: true)
                    if let t { tickets.append(t) }
                } catch {
                    throw fail(path, error.message)
                }
            }
        }
        // Subscriptions and groups name devices, so they need the devices committed first.
        committed = true
        for t in tickets {
            do {
                try engine.commit(t)
            } catch {
                throw fail("$", "the store failed while loading: \(error.description)")
            }
        }
        if let v = obj["subscriptions"] {
            guard let topics = v.objectValue else { throw fail("$.subscriptions", "must be an object of topic: [tokens]") }
            for m in topics.members {
                let path = "$.subscriptions.\(m.key)"
                guard Topics.isValidName(m.key) else { throw fail(path, "Topic name format is invalid") }
                guard let list = m.value.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                    throw fail(path, "must be an array of tokens")
                }
                let tokens = list.compactMap(\.stringValue)
                do {
                    let outcomes = try engine.batch(tokens, topic: m.key, subscribe: true, senderID: nil)
                    if let i = outcomes.firstIndex(where: { $0 != .ok }) {
                        throw fail("\(path)[\(i)]", "cannot subscribe '\(tokens[i])': \(outcomes[i].rawValue)")
                    }
                } catch let e as ConfigurationError {
                    throw e
                } catch {
                    throw fail(path, "\(error)")
                }
            }
        }
        if let v = obj["groups"] {
            guard let items = v.arrayValue else { throw fail("$.groups", "must be an array") }
            for (i, item) in items.enumerated() {
                let path = "$.groups[\(i)]"
                guard let o = item.objectValue, let name = o["notification_key_name"]?.stringValue,
                    let sender = o["sender_id"]?.stringValue, let members = o["members"]?.arrayValue
                else { throw fail(path, "needs notification_key_name, sender_id and members") }
                let tokens = members.compactMap(\.stringValue)
                do {
                    if let key = engine.groupKey(name: name, senderID: sender) {
                        _ = try engine.groupOperation("add", name: name, key: key, tokens: tokens, senderID: sender)
                    } else {
                        _ = try engine.groupOperation("create", name: name, key: nil, tokens: tokens, senderID: sender,
                                                      newKey: fixtureNotificationKey(senderID: sender, name: name))
                    }
                } catch {
                    throw fail(path, error.message)
                }
            }
        }
    }
}
