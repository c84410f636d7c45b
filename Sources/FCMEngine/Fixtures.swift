public import FCMModel
import FCMCore
import FCMStore
import Platform

/// Loads fixture files (docs/spec/control-api.md "Fixtures file") through the same engine calls the control
/// API uses. Loading is idempotent: projects merge, devices that exist are left alone, and devices
/// without a token get one derived from their place in the file.
public enum Fixtures {

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
            try applyAPNs(d, into: engine)
            // Subscriptions and groups name devices, so they come after the devices' commit.
            try applyLinks(d, into: engine)
        }
    }

    /// `POST /api/v1/reset`: the documents' projects again (a reset keeps projects; one deleted
    /// since comes back), then the engine's reset, which keeps, puts back or makes again their
    /// devices, then their subscriptions and groups. No documents: a reset keeping no device.
    public static func reset(_ documents: [FixtureDocument], _ engine: Engine, keepClients: Bool = true) throws(EngineError) {
        do {
            for d in documents {
                try commit(try queueProjects(d, into: engine), of: d, engine)
                // A fixture's APNs keys come back (one revoked since included); teams get their
                // apps back. Keys made since are kept, as they are by a reset.
                try applyAPNs(d, into: engine)
            }
        } catch {
            throw .internal("re-applying the fixtures failed: \(error.description)")
        }
        try engine.reset(fixtures: documents.isEmpty ? nil : documents.flatMap(\.devices), keepClients: keepClients)
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

    /// A document's APNs teams (made, or their apps added) and keys (registered, or put back as
    /// declared).
    private static func applyAPNs(_ d: FixtureDocument, into engine: Engine) throws(ConfigurationError) {
        for (i, t) in d.apnsTeams.enumerated() {
            do {
                try engine.putAPNsTeam(t.teamID, bundleIDs: t.bundleIDs, adding: true)
            } catch {
                throw d.failure("$.apns.teams[\(i)]", error.message)
            }
            for (j, k) in t.keys.enumerated() {
                do {
                    try engine.putFixtureAPNsKey(teamID: t.teamID, keyID: k.keyID, publicKeyPEM: k.publicKeyPEM)
                } catch {
                    throw d.failure("$.apns.teams[\(i)].keys[\(j)]", error.message)
                }
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
                throw d.failure("\(path)[\(i)]", "cannot subscribe '\(tokens[i])': \(outcomes[i].reason)")
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
    public func failure(_ path: String, _ message: String) -> ConfigurationError {
        ConfigurationError("fixtures: \(name): \(path): \(message)")
    }
}
