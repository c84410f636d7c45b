/// Reading back, at start, everything the engine keeps in memory. Each table is visited in the
/// order the engine needs, row by row (a store of a million deliveries builds no array of them).
public struct StoreLoader {
    let c: SQLiteConnection

    init(_ c: SQLiteConnection) { self.c = c }

    /// Projects in creation order: sender id, server keys and apps as JSON, creation time, and
    /// the project id (nil in a store from before project ids).
    public func projects(_ row: (String, String, String, Int64, String?) -> Void) throws(StoreError) {
        try c.query("SELECT sender_id, server_keys, apps, created_at, project_id FROM projects ORDER BY created_at, sender_id") {
            (r: Statement) throws(StoreError) in
            row(r.text(0) ?? "", r.text(1) ?? "[]", r.text(2) ?? "[]", r.int(3), r.text(4))
        }
    }

    /// Service accounts in creation order: key id, sender id, e-mail, client id, public key,
    /// creation time.
    public func serviceAccounts(_ row: (String, String, String, String, String, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT private_key_id, sender_id, client_email, client_id, public_key, created_at FROM service_accounts ORDER BY created_at, private_key_id") {
            (r: Statement) throws(StoreError) in
            row(r.text(0) ?? "", r.text(1) ?? "", r.text(2) ?? "", r.text(3) ?? "", r.text(4) ?? "", r.int(5))
        }
    }

    /// Devices by id.
    public func devices(_ row: (DeviceRow) -> Void) throws(StoreError) {
        try c.query("SELECT id, token, sender_id, app, platform, state, canonical_id, online, created_at, last_seen_at, fid, apns_token, apns_environment, apns_expires_at, client FROM devices ORDER BY id") {
            (r: Statement) throws(StoreError) in
            row(DeviceRow(id: r.int(0), token: r.text(1) ?? "", senderID: r.text(2) ?? "", app: r.text(3) ?? "", platform: r.text(4) ?? "",
                          state: r.text(5) ?? "", canonicalID: r.optionalInt(6), online: r.int(7) != 0, createdAt: r.int(8),
                          lastSeenAt: r.int(9), fid: r.text(10), apnsToken: r.text(11), apnsEnvironment: r.text(12),
                          apnsExpiresAt: r.optionalInt(13), client: r.text(14)))
        }
    }

    /// Deliveries an offline device holds, in order, with what their collapse key is worked
    /// out from; those a real client's connection had, unacknowledged, when the process stopped
    /// (`wasSent`) are held again: the engine's start sets them `pending`. A delivery a real
    /// client was written comes with its `client_delivery`, so its next write continues it.
    public func heldDeliveries(_ row: (HeldDelivery) -> Void) throws(StoreError) {
        try c.query("""
            SELECT d.id, d.device, d.message, m.collapse_key, d.expires_at, m.target_kind, m.platforms, m.transport, d.status,
            d.client_delivery, m.target_value FROM deliveries d
            JOIN messages m ON m.id = d.message WHERE d.status IN ('pending', 'sent') AND d.device IS NOT NULL ORDER BY d.id
            """) { (r: Statement) throws(StoreError) in
            row(HeldDelivery(id: r.int(0), device: r.int(1), message: r.int(2), collapseKey: r.text(3), expiresAt: r.int(4),
                             isNotice: r.text(5) == "deleted_messages", platforms: r.text(6), transport: r.text(7),
                             wasSent: r.text(8) == "sent", clientDelivery: r.text(9),
                             noticeTotal: r.text(5) == "deleted_messages" ? Int64(r.text(10) ?? "") ?? 0 : 0))
        }
    }

    /// Every delivery to a device, in order: delivery id, device.
    public func deviceDeliveries(_ row: (Int64, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT id, device FROM deliveries WHERE device IS NOT NULL ORDER BY id") { (r: Statement) throws(StoreError) in
            row(r.int(0), r.int(1))
        }
    }

    /// Subscriptions: device, topic as first given, when.
    public func subscriptions(_ row: (Int64, String, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT device, topic, added_at FROM subscriptions") { (r: Statement) throws(StoreError) in
            row(r.int(0), r.text(1) ?? "", r.int(2))
        }
    }

    /// Device groups: key, name, sender id, creation time; then their members in order.
    public func groups(_ group: (String, String, String, Int64) -> Void, member: (String, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT key, name, sender_id, created_at FROM groups") { (r: Statement) throws(StoreError) in
            group(r.text(0) ?? "", r.text(1) ?? "", r.text(2) ?? "", r.int(3))
        }
        try c.query("SELECT key, device FROM group_members ORDER BY key, position") { (r: Statement) throws(StoreError) in
            member(r.text(0) ?? "", r.int(1))
        }
    }

    /// Tokens no send may register again: deleted groups' notification keys, deleted real
    /// clients' devices' tokens.
    public func retiredTokens(_ token: (String) -> Void) throws(StoreError) {
        try c.query("SELECT token FROM retired_tokens") { (r: Statement) throws(StoreError) in token(r.text(0) ?? "") }
    }

    /// Upstream messages in creation order (without the connection they were on: it is gone).
    public func upstream(_ row: (UpstreamRow) -> Void) throws(StoreError) {
        try c.query("""
            SELECT id, token, sender_id, category, data, time_to_live, created_at, status, sent_at, acked_at
            FROM upstream ORDER BY created_at, id
            """) { (r: Statement) throws(StoreError) in
            row(UpstreamRow(id: r.text(0) ?? "", token: r.text(1) ?? "", senderID: r.text(2) ?? "", category: r.text(3) ?? "",
                            data: r.text(4) ?? "{}", timeToLive: r.int(5), createdAt: r.int(6), status: r.text(7) ?? "queued",
                            sentAt: r.optionalInt(8), ackedAt: r.optionalInt(9), connectionID: nil))
        }
    }

    /// The highest device id (0 when none).
    public func maxDeviceID() throws(StoreError) -> Int64 { try c.scalar("SELECT max(id) FROM devices") ?? 0 }

    /// The highest message-id stamp used by a record or a delivery (0 when none).
    public func maxMessageStamp() throws(StoreError) -> Int64 {
        max(try c.scalar("SELECT max(id) FROM messages") ?? 0, try c.scalar("SELECT max(id) FROM deliveries") ?? 0)
    }
}

/// A delivery an offline device holds, as read back at start.
public struct HeldDelivery: Sendable {
    public var id: Int64
    public var device: Int64
    /// The message record it belongs to.
    public var message: Int64
    /// The message's top-level collapse key: every platform's for a legacy send, Android's for
    /// a v1 send (whose other platforms take theirs from `platforms`).
    public var collapseKey: String?
    /// This delivery's own expiry: already the device's platform's.
    public var expiresAt: Int64
    /// A `deleted_messages` notice.
    public var isNotice: Bool
    /// A notice's `total_deleted`.
    public var noticeTotal: Int64
    /// A v1 message's platform blocks as stored; nil for a legacy send.
    public var platforms: String?
    /// How it was sent (`apns`: held by Apple's rule).
    public var transport: String?
    /// Written on a real client's connection and not acknowledged (`sent`) when the process
    /// stopped.
    public var wasSent: Bool
    /// A real client's delivery written before (`sent`, or held again after its connection
    /// went): the record of its life on connections, as the engine stored it.
    public var clientDelivery: String?

    public init(id: Int64, device: Int64, message: Int64, collapseKey: String?, expiresAt: Int64, isNotice: Bool, platforms: String?,
                transport: String? = nil, wasSent: Bool = false, clientDelivery: String? = nil, noticeTotal: Int64 = 0) {
        self.id = id; self.device = device; self.message = message; self.collapseKey = collapseKey
        self.expiresAt = expiresAt; self.isNotice = isNotice; self.platforms = platforms; self.transport = transport
        self.wasSent = wasSent; self.clientDelivery = clientDelivery; self.noticeTotal = noticeTotal
    }
}
