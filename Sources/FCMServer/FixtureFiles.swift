import APNs
import Control
import RoomKit
import FCMCore
import FCMStore
public import FCMEngine
public import FCMModel
import Platform

/// `s` in storage of its own, made while the JSON tree it came from is still alive: so it is not
/// left among the tree's nodes once they are freed. A token kept from the tree held a page of
/// freed nodes around it each (10,000 fixture devices kept 3.6 MB of free heap the system could
/// not have back); copies made before the tree goes lie together, past it.
private func ownCopy(_ s: String) -> String {
    var s = s
    return s.withUTF8 { u in
        String(unsafeUninitializedCapacity: u.count) { $0.initialize(fromContentsOf: u) }
    }
}

extension Fixtures {
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
        // Each APNs key id once across the files: a second declaration would replace the first.
        var keyIDs: [String: String] = [:]
        for path in try files(paths) {
            // Parsed (and the file's bytes and JSON tree let go) before anything is applied.
            let d = try parse(path.bytes(), name: path.name, now: now)
            for (i, t) in d.apnsTeams.enumerated() {
                for (j, k) in t.keys.enumerated() {
                    if let other = keyIDs[k.keyID] {
                        throw d.failure("$.apns.teams[\(i)].keys[\(j)].key_id", "key '\(k.keyID)' is declared in \(other) too")
                    }
                    keyIDs[k.keyID] = d.name
                }
            }
            try Fixtures.apply([d], into: engine)
            documents.append(d)
        }
        engine.keepStartFixtures(documents)
        // The devices' rows filled the store's page cache; sends need other pages. (After the
        // writer thread let go of the last batch, which it may still hold when its commit is
        // answered: freed after start-up's heap trim, it stayed resident until the next one.)
        engine.store.drain()
        engine.store.releaseCachedPages()
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
        for k in obj.keys where !["projects", "devices", "subscriptions", "groups", "apns"].contains(k) {
            throw fail("$.\(k)", "unknown key; allowed: projects, devices, subscriptions, groups, apns")
        }
        if let v = obj["apns"] {
            // APNs teams and the public keys of their provider tokens (docs/apns.md, "Keys you bring").
            do {
                d.apnsTeams = try APNsControl.fixtureTeams(v)
            } catch {
                throw fail(error.path, error.message)
            }
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
            // The engine keeps these for reset: no spare room, and the app and project named
            // again and again kept once (a 10,000-device file named one app 10,000 times).
            d.devices.reserveCapacity(items.count)
            var names: Set<String> = []
            func once(_ s: String) -> String { names.insert(s).memberAfterInsert }
            for (i, item) in items.enumerated() {
                guard let o = item.objectValue else { throw fail("$.devices[\(i)]", "must be an object") }
                do {
                    var spec = try ControlAPI.deviceSpec(Body(o, path: ""))
                    spec.senderID = once(spec.senderID)
                    spec.app = spec.app.map(once)
                    if spec.token == nil {
                        spec.token = deterministicRegistrationToken(
                            seed: "\(spec.senderID)|\(spec.app ?? "")|\(spec.platform.rawValue)|\(i)")
                    } else {
                        spec.token = spec.token.map(ownCopy)
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
}
