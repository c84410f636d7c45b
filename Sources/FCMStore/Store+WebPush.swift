/// The `web_push_subscriptions` table: a web device's push subscription and its keys.
public struct WebPushRow: Sendable, Equatable {
    public var device: Int64
    /// The opaque id of the endpoint (`/wp/{id}`).
    public var pushID: String
    /// The P-256 private scalar (32 bytes): only the engine's decryption reads it.
    public var privateKey: [UInt8]
    /// The uncompressed public point (65 bytes): `p256dh`.
    public var publicKey: [UInt8]
    /// The 16-byte auth secret.
    public var auth: [UInt8]
    /// The VAPID key the subscription is bound to (base64url), if any.
    public var applicationServerKey: String?
    public var expired: Bool

    public init(device: Int64, pushID: String, privateKey: [UInt8], publicKey: [UInt8], auth: [UInt8],
                applicationServerKey: String?, expired: Bool) {
        self.device = device
        self.pushID = pushID
        self.privateKey = privateKey
        self.publicKey = publicKey
        self.auth = auth
        self.applicationServerKey = applicationServerKey
        self.expired = expired
    }
}

extension Writes {
    /// Creates or replaces subscriptions (a device id reused after a reset gets its new one).
    public static func saveWebPush(_ rows: [WebPushRow]) -> WriteOp {
        { c in
            try each(c, """
                INSERT OR REPLACE INTO web_push_subscriptions(device, push_id, private_key, public_key, auth, application_server_key, expired)
                VALUES (?,?,?,?,?,?,?)
                """, rows.lazy.map { r in
                [.int(r.device), .text(r.pushID), .blob(r.privateKey), .blob(r.publicKey), .blob(r.auth),
                 .optional(r.applicationServerKey), .int(r.expired ? 1 : 0)]
            })
        }
    }

    /// Ends a subscription: pushes to it answer 410 from now on.
    public static func expireWebPush(device: Int64) -> WriteOp {
        { c in try c.run("UPDATE web_push_subscriptions SET expired = 1 WHERE device = ?", [.int(device)]) }
    }

    /// The subscription of deleted device `device`: its keys go, its id `pushID` stays, so its
    /// endpoint answers 410 whatever device gets the id next.
    public static func deleteWebPush(device: Int64, pushID: String) -> WriteOp {
        { c in
            try c.run("DELETE FROM web_push_subscriptions WHERE device = ?", [.int(device)])
            try c.run("INSERT OR IGNORE INTO web_push_deleted(push_id) VALUES (?)", [.text(pushID)])
        }
    }

    /// A reset's part: the subscriptions of `devices` (removed by it) and the ids of deleted
    /// devices' ones go; the ended ones left are live again.
    public static func resetWebPush(removing devices: [Int64]) -> WriteOp {
        { c in
            try c.execute("DELETE FROM web_push_deleted; UPDATE web_push_subscriptions SET expired = 0 WHERE expired = 1")
            try each(c, "DELETE FROM web_push_subscriptions WHERE device = ?", devices.lazy.map { [.int($0)] })
        }
    }
}

extension StoreLoader {
    /// Every subscription, by device id.
    public func webPushSubscriptions(_ row: (WebPushRow) -> Void) throws(StoreError) {
        try c.query("""
            SELECT device, push_id, private_key, public_key, auth, application_server_key, expired
            FROM web_push_subscriptions ORDER BY device
            """) { (r: Statement) throws(StoreError) in
            row(WebPushRow(device: r.int(0), pushID: r.text(1) ?? "", privateKey: r.blob(2), publicKey: r.blob(3), auth: r.blob(4),
                           applicationServerKey: r.text(5), expired: r.int(6) != 0))
        }
    }

    /// The subscription ids of deleted devices.
    public func deletedWebPushIDs(_ id: (String) -> Void) throws(StoreError) {
        try c.query("SELECT push_id FROM web_push_deleted") { (r: Statement) throws(StoreError) in
            if let pushID = r.text(0) { id(pushID) }
        }
    }
}
