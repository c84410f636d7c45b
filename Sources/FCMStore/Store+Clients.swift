/// The `real_clients` table and the columns of real clients' devices and deliveries
/// (docs/real-clients.md): a client the mock knows (an autopush uaid), what it said of itself,
/// and every statement that writes them.

/// One `real_clients` row.
public struct RealClientRow: Sendable, Equatable {
    public var id: String
    /// `autopush` (a Firefox uaid).
    public var kind: String
    public var userAgent: String?
    public var clientVersion: String?
    public var createdAt: Int64
    public var lastConnectedAt: Int64?
    /// A checked-in client's security token (decimal).
    public var secret: String?
    /// What its last checkin said (JSON: platform, chrome_version, channel, at).
    public var checkin: String?

    public init(id: String, kind: String, userAgent: String?, clientVersion: String?, createdAt: Int64, lastConnectedAt: Int64?,
                secret: String? = nil, checkin: String? = nil) {
        self.id = id
        self.kind = kind
        self.userAgent = userAgent
        self.clientVersion = clientVersion
        self.createdAt = createdAt
        self.lastConnectedAt = lastConnectedAt
        self.secret = secret
        self.checkin = checkin
    }
}

/// One `gcm_registrations` row: a register3 token.
public struct GCMRegistrationRow: Sendable, Equatable {
    public var token: String
    /// The android id it was made for.
    public var client: String
    public var app: String
    public var subtype: String?
    public var sender: String
    /// An Instance ID request's `appid`.
    public var instanceID: String?
    /// The device it reaches (nil: a token only, as Google's own sender's).
    public var device: Int64?
    public var createdAt: Int64

    public init(token: String, client: String, app: String, subtype: String?, sender: String, instanceID: String?, device: Int64?,
                createdAt: Int64) {
        self.token = token
        self.client = client
        self.app = app
        self.subtype = subtype
        self.sender = sender
        self.instanceID = instanceID
        self.device = device
        self.createdAt = createdAt
    }
}

/// One `installations` row: a Firebase installation.
public struct InstallationRow: Sendable, Equatable {
    public var fid: String
    public var senderID: String
    public var appID: String
    public var refreshToken: String
    public var authToken: String
    public var authExpiresAt: Int64
    public var createdAt: Int64

    public init(fid: String, senderID: String, appID: String, refreshToken: String, authToken: String, authExpiresAt: Int64, createdAt: Int64) {
        self.fid = fid
        self.senderID = senderID
        self.appID = appID
        self.refreshToken = refreshToken
        self.authToken = authToken
        self.authExpiresAt = authExpiresAt
        self.createdAt = createdAt
    }
}

/// A delivery's new state on a real client's connection: its status, when it was delivered
/// (an ack 100; nil leaves the column as it is) and its `client_delivery`.
public struct ClientDeliveryUpdate: Sendable {
    public var id: Int64
    public var status: String
    public var deliveredAt: Int64?
    /// The `client_delivery` column as the engine keeps it.
    public var stored: String

    public init(id: Int64, status: String, deliveredAt: Int64?, stored: String) {
        self.id = id
        self.status = status
        self.deliveredAt = deliveredAt
        self.stored = stored
    }
}

extension Writes {
    /// Creates or updates a client.
    public static func saveClient(_ row: RealClientRow) -> WriteOp {
        { c in
            try c.run("""
                INSERT OR REPLACE INTO real_clients(id, kind, user_agent, client_version, created_at, last_connected_at, secret, checkin)
                VALUES (?,?,?,?,?,?,?,?)
                """, [.text(row.id), .text(row.kind), .optional(row.userAgent), .optional(row.clientVersion), .int(row.createdAt),
                      .optional(row.lastConnectedAt), .optional(row.secret), .optional(row.checkin)])
        }
    }

    /// Forgets clients with their registrations (their devices go through `deleteDevice`).
    public static func deleteClients(_ ids: [String]) -> WriteOp {
        { c in
            try each(c, "DELETE FROM gcm_registrations WHERE client = ?", ids.lazy.map { [.text($0)] })
            try each(c, "DELETE FROM real_clients WHERE id = ?", ids.lazy.map { [.text($0)] })
        }
    }

    /// Creates or replaces register3 registrations.
    public static func saveGCMRegistrations(_ rows: [GCMRegistrationRow]) -> WriteOp {
        { c in
            try each(c, """
                INSERT OR REPLACE INTO gcm_registrations(token, client, app, subtype, sender, instance_id, device, created_at)
                VALUES (?,?,?,?,?,?,?,?)
                """, rows.lazy.map { r in
                [.text(r.token), .text(r.client), .text(r.app), .optional(r.subtype), .text(r.sender), .optional(r.instanceID),
                 .optional(r.device), .int(r.createdAt)]
            })
        }
    }

    /// Forgets register3 registrations (`delete=true`).
    public static func deleteGCMRegistrations(_ tokens: [String]) -> WriteOp {
        { c in try each(c, "DELETE FROM gcm_registrations WHERE token = ?", tokens.lazy.map { [.text($0)] }) }
    }

    /// Creates or replaces an installation.
    public static func saveInstallation(_ r: InstallationRow) -> WriteOp {
        { c in
            try c.run("""
                INSERT OR REPLACE INTO installations(fid, sender_id, app_id, refresh_token, auth_token, auth_expires_at, created_at)
                VALUES (?,?,?,?,?,?,?)
                """, [.text(r.fid), .text(r.senderID), .text(r.appID), .text(r.refreshToken), .text(r.authToken), .int(r.authExpiresAt),
                      .int(r.createdAt)])
        }
    }

    public static func deleteInstallation(_ fid: String) -> WriteOp {
        { c in try c.run("DELETE FROM installations WHERE fid = ?", [.text(fid)]) }
    }

    /// A real client's device's link to its client changed (an autopush channel unregistered).
    public static func setDeviceClient(device id: Int64, _ json: String?) -> WriteOp {
        { c in try c.run("UPDATE devices SET client = ? WHERE id = ?", [.optional(json), .int(id)]) }
    }

    /// Faults that fired on the writes of held deliveries (delivery id, fault id): on the
    /// delivery, and on its message when none is there yet, as for a fault fired at the send.
    public static func recordClientFaults(_ fired: [(delivery: Int64, fault: String)]) -> WriteOp {
        { c in
            try each(c, "UPDATE deliveries SET fault = ? WHERE id = ?", fired.lazy.map { [.text($0.fault), .int($0.delivery)] })
            try each(c, "UPDATE messages SET fault = ? WHERE fault IS NULL AND id = (SELECT message FROM deliveries WHERE id = ?)",
                     fired.lazy.map { [.text($0.fault), .int($0.delivery)] })
        }
    }

    /// Deliveries on real clients' connections: each one's status, its `client_delivery` and,
    /// when given, when it was delivered.
    public static func setClientDeliveries(_ updates: [ClientDeliveryUpdate], settledAt: Int64) -> WriteOp {
        { c in
            try each(c, "UPDATE deliveries SET status = ?, client_delivery = ?, delivered_at = coalesce(?, delivered_at), settled_at = ? WHERE id = ?",
                     updates.lazy.map { [.text($0.status), .text($0.stored), .optional($0.deliveredAt), .int(settledAt), .int($0.id)] })
        }
    }
}

extension StoreLoader {
    /// Every client, oldest first.
    public func realClients(_ row: (RealClientRow) -> Void) throws(StoreError) {
        try c.query("SELECT id, kind, user_agent, client_version, created_at, last_connected_at, secret, checkin FROM real_clients ORDER BY created_at, id") {
            (r: Statement) throws(StoreError) in
            row(RealClientRow(id: r.text(0) ?? "", kind: r.text(1) ?? "", userAgent: r.text(2), clientVersion: r.text(3), createdAt: r.int(4),
                              lastConnectedAt: r.optionalInt(5), secret: r.text(6), checkin: r.text(7)))
        }
    }

    /// Every register3 registration, oldest first.
    public func gcmRegistrations(_ row: (GCMRegistrationRow) -> Void) throws(StoreError) {
        try c.query("SELECT token, client, app, subtype, sender, instance_id, device, created_at FROM gcm_registrations ORDER BY created_at, token") {
            (r: Statement) throws(StoreError) in
            row(GCMRegistrationRow(token: r.text(0) ?? "", client: r.text(1) ?? "", app: r.text(2) ?? "", subtype: r.text(3), sender: r.text(4) ?? "",
                                   instanceID: r.text(5), device: r.optionalInt(6), createdAt: r.int(7)))
        }
    }

    /// Every installation.
    public func installations(_ row: (InstallationRow) -> Void) throws(StoreError) {
        try c.query("SELECT fid, sender_id, app_id, refresh_token, auth_token, auth_expires_at, created_at FROM installations") {
            (r: Statement) throws(StoreError) in
            row(InstallationRow(fid: r.text(0) ?? "", senderID: r.text(1) ?? "", appID: r.text(2) ?? "", refreshToken: r.text(3) ?? "",
                                authToken: r.text(4) ?? "", authExpiresAt: r.int(5), createdAt: r.int(6)))
        }
    }
}
