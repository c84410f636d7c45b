/// The `devices` and `projects` tables: rows and every statement that writes them.

/// One `devices` row: an interned device, whose id message and delivery rows use instead of
/// its 150-byte token.
public struct DeviceRow: Sendable {
    public var id: Int64
    public var token: String
    public var senderID: String
    public var app: String
    public var platform: String
    public var state: String
    public var canonicalID: Int64?
    public var online: Bool
    public var createdAt: Int64
    public var lastSeenAt: Int64
    /// The Firebase installation id HTTP v1 may address the device by (NULL in stores made
    /// before schema 10).
    public var fid: String?
    /// An iOS device's APNs token when one was given (NULL: derived from its FCM token).
    public var apnsToken: String?
    /// An iOS device's APNs environment (NULL: sandbox).
    public var apnsEnvironment: String?
    /// When an iOS device's APNs token expires (ms; NULL: never).
    public var apnsExpiresAt: Int64?
    /// A real client's device: its link to the client (JSON; NULL for a fake device).
    public var client: String?

    public init(id: Int64, token: String, senderID: String, app: String, platform: String, state: String, canonicalID: Int64?,
                online: Bool, createdAt: Int64, lastSeenAt: Int64, fid: String? = nil, apnsToken: String? = nil,
                apnsEnvironment: String? = nil, apnsExpiresAt: Int64? = nil, client: String? = nil) {
        self.id = id; self.token = token; self.senderID = senderID; self.app = app; self.platform = platform
        self.state = state; self.canonicalID = canonicalID; self.online = online; self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt; self.fid = fid; self.apnsToken = apnsToken; self.apnsEnvironment = apnsEnvironment
        self.apnsExpiresAt = apnsExpiresAt
        self.client = client
    }

    static let insertSQL = """
        INSERT INTO devices(id, token, sender_id, app, platform, state, canonical_id, online, created_at, last_seen_at, fid,
                            apns_token, apns_environment, apns_expires_at, client)
        VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
        """

    var values: [SQLValue] {
        [.int(id), .text(token), .text(senderID), .text(app), .text(platform), .text(state),
         .optional(canonicalID), .int(online ? 1 : 0), .int(createdAt), .int(lastSeenAt), .optional(fid),
         .optional(apnsToken), .optional(apnsEnvironment), .optional(apnsExpiresAt), .optional(client)]
    }
}

/// Typed writes: the engine decides a change under its lock and hands the store one of these;
/// the statements themselves live here, by resource.
public enum Writes {
    /// Runs `sql` once per argument list through one prepared statement. The lists are made one
    /// at a time (pass a lazy map): a fixture's 10,000 rows built at once stayed in the heap.
    static func each<Rows: Sequence>(_ c: SQLiteConnection, _ sql: String, _ rows: Rows) throws(StoreError)
    where Rows.Element == [SQLValue] {
        var statement: Statement?
        for args in rows {
            let s: Statement
            if let made = statement {
                s = made
            } else {
                s = try c.statement(sql)
                statement = s
            }
            try c.reset(s)
            try s.bind(args)
            while try s.step() {}
        }
    }

    // MARK: Projects

    public static func saveProject(senderID: String, projectID: String, keysJSON: String, appsJSON: String, createdAt: Int64) -> WriteOp {
        { c in
            try c.run("INSERT OR REPLACE INTO projects(sender_id, server_keys, apps, created_at, project_id) VALUES (?,?,?,?,?)",
                      [.text(senderID), .text(keysJSON), .text(appsJSON), .int(createdAt), .text(projectID)])
        }
    }

    public static func deleteProject(_ senderID: String) -> WriteOp {
        { c in
            try c.run("DELETE FROM service_accounts WHERE sender_id = ?", [.text(senderID)])
            try c.run("DELETE FROM projects WHERE sender_id = ?", [.text(senderID)])
        }
    }

    /// Adds a project's service account (its public key only).
    public static func saveServiceAccount(senderID: String, privateKeyID: String, clientEmail: String, clientID: String,
                                          publicKey: String, createdAt: Int64) -> WriteOp {
        { c in
            try c.run("""
                INSERT OR REPLACE INTO service_accounts(private_key_id, sender_id, client_email, client_id, public_key, created_at)
                VALUES (?,?,?,?,?,?)
                """, [.text(privateKeyID), .text(senderID), .text(clientEmail), .text(clientID), .text(publicKey), .int(createdAt)])
        }
    }

    /// Revokes a service account's key.
    public static func deleteServiceAccount(_ privateKeyID: String) -> WriteOp {
        { c in try c.run("DELETE FROM service_accounts WHERE private_key_id = ?", [.text(privateKeyID)]) }
    }

    // MARK: Devices

    public static func insertDevices(_ rows: [DeviceRow]) -> WriteOp {
        { c in try each(c, DeviceRow.insertSQL, rows.lazy.map(\.values)) }
    }

    /// A device went offline or came back; back online, what it held is delivered now, or
    /// expired if its time ran out.
    public static func setOnline(device id: Int64, _ online: Bool, at now: Int64, flushHeld: Bool) -> WriteOp {
        { c in
            try c.run("UPDATE devices SET online = ?, last_seen_at = ? WHERE id = ?", [.int(online ? 1 : 0), .int(now), .int(id)])
            guard flushHeld else { return }
            try c.run("UPDATE deliveries SET status = 'expired' WHERE device = ? AND status = 'pending' AND expires_at <= ?",
                      [.int(id), .int(now)])
            try c.run("UPDATE deliveries SET status = 'delivered', delivered_at = ? WHERE device = ? AND status = 'pending'",
                      [.int(now), .int(id)])
        }
    }

    /// Gives devices their fids (devices of a store from before schema 10, at start).
    public static func setFIDs(_ fids: [(id: Int64, fid: String)]) -> WriteOp {
        { c in try each(c, "UPDATE devices SET fid = ? WHERE id = ?", fids.lazy.map { [.text($0.fid), .int($0.id)] }) }
    }

    /// When an iOS device's APNs token expires (nil: never).
    public static func setAPNsExpiry(device id: Int64, at: Int64?) -> WriteOp {
        { c in try c.run("UPDATE devices SET apns_expires_at = ? WHERE id = ?", [.optional(at), .int(id)]) }
    }

    /// The app was uninstalled (its token retired) at `at`: the device's last sighting.
    public static func unregister(device id: Int64, at: Int64) -> WriteOp {
        { c in try c.run("UPDATE devices SET state = 'unregistered', last_seen_at = ? WHERE id = ?", [.int(at), .int(id)]) }
    }

    /// A token rotated: the new device takes the old one's subscriptions and group places.
    public static func refresh(device oldID: Int64, to fresh: DeviceRow) -> WriteOp {
        { c in
            try c.run(DeviceRow.insertSQL, fresh.values)
            try c.run("UPDATE devices SET state = 'refreshed', canonical_id = ? WHERE id = ?", [.int(fresh.id), .int(oldID)])
            try c.run("UPDATE subscriptions SET device = ? WHERE device = ?", [.int(fresh.id), .int(oldID)])
            try c.run("UPDATE group_members SET device = ? WHERE device = ?", [.int(fresh.id), .int(oldID)])
        }
    }

    /// Forgets a device; its past deliveries keep its token as text, so records still say whom
    /// they addressed.
    /// `deliveries`: the ones the engine still holds in memory (the rest are in the device's
    /// inbox chunks, which go with it).
    public static func deleteDevice(_ id: Int64, token: String, deliveries: [Int64]) -> WriteOp {
        { c in
            try c.run("DELETE FROM subscriptions WHERE device = ?", [.int(id)])
            let all = try c.allInboxChunkIDs(device: id) + deliveries
            try c.run("UPDATE deliveries SET token = ?, device = NULL WHERE id IN (SELECT value FROM json_each(?))",
                      [.text(token), .text("[" + all.map(String.init).joined(separator: ",") + "]")])
            try c.run("DELETE FROM inbox_chunks WHERE device = ?", [.int(id)])
            try c.run("DELETE FROM devices WHERE id = ?", [.int(id)])
        }
    }

    /// A reset, with `Store.resetHistory()` for messages and deliveries: every subscription,
    /// group and upstream message goes; of the devices, `removed` go (all of them when `keepsAny`
    /// is false) and `restored` are put back to their state and online flag.
    public static func reset(keepsAny: Bool, removed: [Int64], restored: [(id: Int64, state: String, online: Bool)]) -> WriteOp {
        { c in
            // Unconditional DELETEs take SQLite's truncate path: fast whatever the row count.
            try c.execute("DELETE FROM subscriptions; DELETE FROM groups; DELETE FROM group_members; DELETE FROM retired_tokens; DELETE FROM upstream;")
            guard keepsAny else {
                try c.execute("DELETE FROM devices")
                return
            }
            try each(c, "DELETE FROM devices WHERE id = ?", removed.lazy.map { [.int($0)] })
            try each(c, "UPDATE devices SET state = ?, canonical_id = NULL, online = ? WHERE id = ?",
                     restored.lazy.map { [.text($0.state), .int($0.online ? 1 : 0), .int($0.id)] })
        }
    }
}
