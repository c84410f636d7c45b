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

    public init(id: String, kind: String, userAgent: String?, clientVersion: String?, createdAt: Int64, lastConnectedAt: Int64?) {
        self.id = id
        self.kind = kind
        self.userAgent = userAgent
        self.clientVersion = clientVersion
        self.createdAt = createdAt
        self.lastConnectedAt = lastConnectedAt
    }
}

/// A delivery's new state on a real client's connection: its status, when it was delivered
/// (an ack 100; nil leaves the column as it is) and its `client_delivery` JSON.
public struct ClientDeliveryUpdate: Sendable {
    public var id: Int64
    public var status: String
    public var deliveredAt: Int64?
    public var json: String

    public init(id: Int64, status: String, deliveredAt: Int64?, json: String) {
        self.id = id
        self.status = status
        self.deliveredAt = deliveredAt
        self.json = json
    }
}

extension Writes {
    /// Creates or updates a client.
    public static func saveClient(_ row: RealClientRow) -> WriteOp {
        { c in
            try c.run("""
                INSERT OR REPLACE INTO real_clients(id, kind, user_agent, client_version, created_at, last_connected_at)
                VALUES (?,?,?,?,?,?)
                """, [.text(row.id), .text(row.kind), .optional(row.userAgent), .optional(row.clientVersion), .int(row.createdAt),
                      .optional(row.lastConnectedAt)])
        }
    }

    /// Forgets clients (their devices go through `deleteDevice`).
    public static func deleteClients(_ ids: [String]) -> WriteOp {
        { c in try each(c, "DELETE FROM real_clients WHERE id = ?", ids.lazy.map { [.text($0)] }) }
    }

    /// A real client's device's link to its client changed (an autopush channel unregistered).
    public static func setDeviceClient(device id: Int64, _ json: String?) -> WriteOp {
        { c in try c.run("UPDATE devices SET client = ? WHERE id = ?", [.optional(json), .int(id)]) }
    }

    /// Deliveries on real clients' connections: each one's status, its `client_delivery` and,
    /// when given, when it was delivered.
    public static func setClientDeliveries(_ updates: [ClientDeliveryUpdate], settledAt: Int64) -> WriteOp {
        { c in
            try each(c, "UPDATE deliveries SET status = ?, client_delivery = ?, delivered_at = coalesce(?, delivered_at), settled_at = ? WHERE id = ?",
                     updates.lazy.map { [.text($0.status), .text($0.json), .optional($0.deliveredAt), .int(settledAt), .int($0.id)] })
        }
    }

    /// Deliveries written on a connection and not acknowledged when the process stopped are held
    /// again: that connection is gone (the engine's start).
    public static func requeueSent() -> WriteOp {
        { c in try c.run("UPDATE deliveries SET status = 'pending' WHERE status = 'sent'") }
    }
}

extension StoreLoader {
    /// Every client, oldest first.
    public func realClients(_ row: (RealClientRow) -> Void) throws(StoreError) {
        try c.query("SELECT id, kind, user_agent, client_version, created_at, last_connected_at FROM real_clients ORDER BY created_at, id") {
            (r: Statement) throws(StoreError) in
            row(RealClientRow(id: r.text(0) ?? "", kind: r.text(1) ?? "", userAgent: r.text(2), clientVersion: r.text(3), createdAt: r.int(4),
                              lastConnectedAt: r.optionalInt(5)))
        }
    }
}
