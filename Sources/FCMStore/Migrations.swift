/// Schema migrations keyed on `PRAGMA user_version`: each entry moves the schema one version up.
enum Migrations {
    static let steps: [String] = [
        // 1: projects, interned devices, messages and their per-recipient deliveries.
        """
        CREATE TABLE projects(
            sender_id TEXT PRIMARY KEY,
            server_keys TEXT NOT NULL,
            apps TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        CREATE TABLE devices(
            id INTEGER PRIMARY KEY,
            token TEXT NOT NULL UNIQUE,
            sender_id TEXT NOT NULL,
            app TEXT NOT NULL,
            platform TEXT NOT NULL,
            state TEXT NOT NULL,
            canonical_id INTEGER,
            online INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            last_seen_at INTEGER NOT NULL);
        CREATE TABLE messages(
            id INTEGER PRIMARY KEY,
            mid INTEGER NOT NULL,
            suffix INTEGER NOT NULL,
            multicast_id INTEGER,
            sender_id TEXT,
            transport TEXT NOT NULL,
            format TEXT NOT NULL,
            accepted_at INTEGER NOT NULL,
            target_kind TEXT NOT NULL,
            target_value TEXT,
            options TEXT NOT NULL,
            data TEXT,
            notification TEXT,
            status TEXT NOT NULL,
            error TEXT,
            error_detail TEXT,
            http_status INTEGER NOT NULL,
            priority TEXT NOT NULL,
            raw TEXT,
            first_delivery INTEGER NOT NULL,
            delivery_count INTEGER NOT NULL);
        CREATE INDEX messages_mid ON messages(mid);
        CREATE INDEX messages_sender ON messages(sender_id, id);
        CREATE TABLE deliveries(
            id INTEGER PRIMARY KEY,
            message INTEGER NOT NULL,
            device INTEGER,
            token TEXT,
            mid INTEGER NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            canonical INTEGER,
            accepted_at INTEGER NOT NULL,
            delivered_at INTEGER,
            expires_at INTEGER NOT NULL,
            collapse_key TEXT);
        CREATE INDEX deliveries_device ON deliveries(device, id);
        """
    ]

    static func run(on conn: SQLiteConnection) throws(StoreError) {
        let current = Int(try conn.scalar("PRAGMA user_version") ?? 0)
        guard current < steps.count else {
            if current > steps.count {
                throw StoreError(code: 0, message: "the database has schema version \(current), newer than this fcm-mock knows (\(steps.count))", sql: nil)
            }
            return
        }
        for v in current..<steps.count {
            try conn.transaction { () throws(StoreError) in
                try conn.execute(steps[v])
                try conn.execute("PRAGMA user_version=\(v + 1)")
            }
        }
    }
}
