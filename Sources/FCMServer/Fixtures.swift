import FCMCore
import FCMStore
import Platform

/// One fixture file, read and checked at start into what it declares. A reset applies it again
/// from memory: editing the file afterwards changes nothing until a restart, and a reset spends
/// no time parsing.
public struct FixtureDocument: Sendable {
    public let name: String
    var projects: [Project] = []
    /// Every device with its token (derived from its place in the file when the file gives none).
    var devices: [DeviceSpec] = []
    var subscriptions: [(topic: String, tokens: [String])] = []
    var groups: [(name: String, senderID: String, members: [String])] = []
}

/// Loads fixture files (docs/spec/control-api.md "Fixtures file") through the same engine calls the control
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
        let now = engine.clock.nowMillis()
        var documents: [FixtureDocument] = []
        // Each document is applied before the next is read: a later file may name a project an
        // earlier one declared.
        for path in try files(paths) {
            // Parsed (and the file's bytes and JSON tree let go) before anything is applied.
            let d = try parse(path.bytes(), name: path.name, now: now)
            try apply([d], into: engine)
            documents.append(d)
        }
        engine.startFixtures.withLock { $0 = documents }
        return documents
    }

    /// The files of `paths` (a folder's `*.json` in name order), each read when asked; none: the
    /// built-in one.
    static func files(_ paths: [String]) throws(ConfigurationError) -> [(name: String, bytes: () throws(ConfigurationError) -> [UInt8])] {
        if paths.isEmpty { return [(builtInName, { () throws(ConfigurationError) in Array(defaultFixtureJSON.utf8) })] }
        var files: [(name: String, bytes: () throws(ConfigurationError) -> [UInt8])] = []
        for path in paths {
            guard let kind = SystemIO.kind(of: path) else {
                throw ConfigurationError("fixtures: \(path) does not exist")
            }
            var names = [path]
            if kind == .directory {
                guard let listed = SystemIO.list(path) else { throw ConfigurationError("fixtures: cannot list \(path)") }
                let dir = path.hasSuffix("/") ? path : path + "/"
                names = listed.filter { $0.hasSuffix(".json") }.sorted().map { dir + $0 }
            }
            for f in names {
                files.append((f, { () throws(ConfigurationError) in
                    guard let data = SystemIO.readFile(f) else { throw ConfigurationError("fixtures: cannot read \(f)") }
                    return data
                }))
            }
        }
        return files
    }

    /// Checks one document's shape and reads what it declares; errors name the file and the
    /// JSON path of the problem.
    static func parse(_ bytes: [UInt8], name: String, now: Int64) throws(ConfigurationError) -> FixtureDocument {
        var d = FixtureDocument(name: name)
        let fail = d.failure
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
        if let v = obj["projects"] {
            guard let items = v.arrayValue else { throw fail("$.projects", "must be an array") }
            for (i, item) in items.enumerated() {
                guard let o = item.objectValue else { throw fail("$.projects[\(i)]", "must be an object") }
                do {
                    d.projects.append(try ControlAPI.projectSpec(Body(o, path: ""), now: now))
                } catch {
                    throw fail("$.projects[\(i)]", error.message)
                }
            }
        }
        if let v = obj["devices"] {
            guard let items = v.arrayValue else { throw fail("$.devices", "must be an array") }
            for (i, item) in items.enumerated() {
                guard let o = item.objectValue else { throw fail("$.devices[\(i)]", "must be an object") }
                do {
                    var spec = try ControlAPI.deviceSpec(Body(o, path: ""))
                    if spec.token == nil {
                        spec.token = deterministicRegistrationToken(
                            seed: "\(spec.senderID)|\(spec.app ?? "")|\(spec.platform.rawValue)|\(i)")
                    }
                    d.devices.append(spec)
                } catch {
                    throw fail("$.devices[\(i)]", error.message)
                }
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
                d.subscriptions.append((m.key, list.compactMap(\.stringValue)))
            }
        }
        if let v = obj["groups"] {
            guard let items = v.arrayValue else { throw fail("$.groups", "must be an array") }
            for (i, item) in items.enumerated() {
                guard let o = item.objectValue, let name = o["notification_key_name"]?.stringValue,
                    let sender = o["sender_id"]?.stringValue, let members = o["members"]?.arrayValue
                else { throw fail("$.groups[\(i)]", "needs notification_key_name, sender_id and members") }
                d.groups.append((name, sender, members.compactMap(\.stringValue)))
            }
        }
        return d
    }

    /// Applies documents at start; errors name the file and the JSON path of what the engine
    /// refused.
    public static func apply(_ documents: [FixtureDocument], into engine: Engine) throws(ConfigurationError) {
        for d in documents {
            // Projects and devices are queued and committed together: a commit per device would
            // make a 10,000-device file take seconds to load. What was queued before an error is
            // still committed.
            var tickets: [Store.Ticket] = []
            var refused: ConfigurationError?
            do {
                tickets = try queueProjects(d, into: engine)
            } catch {
                refused = error
            }
            if refused == nil {
                let (failure, ticket) = engine.createDevicesQueued(d.devices)
                if let ticket { tickets.append(ticket) }
                if let (i, error) = failure { refused = d.failure("$.devices[\(i)]", error.message) }
            }
            try commit(tickets, of: d, engine)
            if let refused { throw refused }
            // Subscriptions and groups name devices, so they come after the devices' commit.
            try applyLinks(d, into: engine)
        }
    }

    /// `POST /api/v1/reset`: the documents' projects again (a reset keeps projects; one deleted
    /// since comes back), then the engine's reset, which keeps, puts back or makes again their
    /// devices, then their subscriptions and groups. No documents: a reset keeping no device.
    static func reset(_ documents: [FixtureDocument], _ engine: Engine) throws(ControlError) {
        do {
            for d in documents { try commit(try queueProjects(d, into: engine), of: d, engine) }
        } catch {
            throw .internal("re-applying the fixtures failed: \(error.description)")
        }
        try engine.reset(fixtures: documents.isEmpty ? nil : documents.flatMap(\.devices))
        do {
            for d in documents { try applyLinks(d, into: engine) }
        } catch {
            throw .internal("re-applying the fixtures failed: \(error.description)")
        }
    }

    private static func queueProjects(_ d: FixtureDocument, into engine: Engine) throws(ConfigurationError) -> [Store.Ticket] {
        var tickets: [Store.Ticket] = []
        for (i, p) in d.projects.enumerated() {
            do {
                if let t = try engine.createProjectQueued(p, upsert: true).1 { tickets.append(t) }
            } catch {
                throw d.failure("$.projects[\(i)]", error.message)
            }
        }
        return tickets
    }

    private static func commit(_ tickets: [Store.Ticket], of d: FixtureDocument, _ engine: Engine) throws(ConfigurationError) {
        for t in tickets {
            do {
                try engine.commit(t)
            } catch {
                throw d.failure("$", "the store failed while loading: \(error.description)")
            }
        }
    }

    /// A document's subscriptions and groups.
    private static func applyLinks(_ d: FixtureDocument, into engine: Engine) throws(ConfigurationError) {
        for (topic, tokens) in d.subscriptions {
            let path = "$.subscriptions.\(topic)"
            let outcomes: [BatchOutcome]
            do {
                outcomes = try engine.batch(tokens, topic: topic, subscribe: true, senderID: nil)
            } catch {
                throw d.failure(path, error.message)
            }
            if let i = outcomes.firstIndex(where: { $0 != .ok }) {
                throw d.failure("\(path)[\(i)]", "cannot subscribe '\(tokens[i])': \(outcomes[i].rawValue)")
            }
        }
        for (i, g) in d.groups.enumerated() {
            do {
                if let key = engine.groupKey(name: g.name, senderID: g.senderID) {
                    _ = try engine.groupOperation("add", name: g.name, key: key, tokens: g.members, senderID: g.senderID)
                } else {
                    _ = try engine.groupOperation("create", name: g.name, key: nil, tokens: g.members, senderID: g.senderID,
                                                  newKey: fixtureNotificationKey(senderID: g.senderID, name: g.name))
                }
            } catch {
                throw d.failure("$.groups[\(i)]", error.message)
            }
        }
    }
}

extension FixtureDocument {
    /// A problem at `path` of this document, as start-up reports it.
    func failure(_ path: String, _ message: String) -> ConfigurationError {
        ConfigurationError("fixtures: \(name): \(path): \(message)")
    }
}
