/// Schema migrations keyed on `PRAGMA user_version`: each entry moves the schema one version up.
enum Migrations {
    static let steps: [String] = [
        // 1: projects, interned devices, messages and their per-recipient deliveries.
        // Both row ids are message-id stamps (unique, increasing): inserts append, a message id
        // is found by primary key, and a message's deliveries are the rows id ..< id + recipients.
        // Only pending deliveries are indexed by device (a partial index, tiny); the per-device
        // list of all deliveries is kept in chunks of ids (version 12), since a B-tree keyed by
        // device makes a 1000-token multicast dirty 1000 index pages. Rows stay small (what can be
        // derived is not stored: a token target's value is its recipient's token; options are
        // columns with `flags` bits 1 content_available, 2 mutable_content, 4 delay_while_idle
        // given, 8 its value), since every byte is written to the log and copied back.
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
            suffix INTEGER NOT NULL,
            multicast_id INTEGER,
            sender_id TEXT,
            transport TEXT NOT NULL,
            format TEXT NOT NULL,
            accepted_at INTEGER NOT NULL,
            target_kind TEXT NOT NULL,
            target_value TEXT,
            collapse_key TEXT,
            time_to_live INTEGER NOT NULL,
            restricted_package_name TEXT,
            flags INTEGER NOT NULL,
            data TEXT,
            notification TEXT,
            priority TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            error_detail TEXT,
            http_status INTEGER NOT NULL,
            raw TEXT,
            recipients INTEGER NOT NULL);
        CREATE TABLE deliveries(
            id INTEGER PRIMARY KEY,
            message INTEGER NOT NULL,
            device INTEGER,
            token TEXT,
            status TEXT NOT NULL,
            error TEXT,
            canonical INTEGER,
            delivered_at INTEGER,
            expires_at INTEGER NOT NULL);
        CREATE INDEX deliveries_pending ON deliveries(device) WHERE status = 'pending';
        """,
        // 2: the fault that fired, on the message record and on the recipient it failed.
        """
        ALTER TABLE messages ADD COLUMN fault TEXT;
        ALTER TABLE deliveries ADD COLUMN fault TEXT;
        """,
        // 3: topic subscriptions (the name as first given; matching is case-insensitive).
        """
        CREATE TABLE subscriptions(
            device INTEGER NOT NULL,
            topic TEXT NOT NULL,
            added_at INTEGER NOT NULL,
            PRIMARY KEY(device, topic)) WITHOUT ROWID;
        """,
        // 4: device groups and their members, in the order they joined.
        """
        CREATE TABLE groups(
            key TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        CREATE TABLE group_members(
            key TEXT NOT NULL,
            device INTEGER NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY(key, device)) WITHOUT ROWID;
        """,
        // 5: upstream messages (device to app server over XMPP).
        """
        CREATE TABLE upstream(
            id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            category TEXT NOT NULL,
            data TEXT NOT NULL,
            time_to_live INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            status TEXT NOT NULL,
            sent_at INTEGER,
            acked_at INTEGER,
            connection_id TEXT);
        """,
        // 6: the message_id an XMPP client gave its downstream message.
        """
        ALTER TABLE messages ADD COLUMN client_message_id TEXT;
        """,
        // 7: notification keys of deleted device groups: a send to one is NotRegistered, never a
        // new device registered on first use.
        """
        CREATE TABLE retired_groups(key TEXT PRIMARY KEY) WITHOUT ROWID;
        """,
        // 8: the project id HTTP v1 paths name (NULL: the default, project-{sender_id}).
        """
        ALTER TABLE projects ADD COLUMN project_id TEXT;
        """,
        // 9: OAuth 2.0 service accounts of projects (public keys only).
        """
        CREATE TABLE service_accounts(
            private_key_id TEXT PRIMARY KEY,
            sender_id TEXT NOT NULL,
            client_email TEXT NOT NULL,
            client_id TEXT NOT NULL,
            public_key TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        """,
        // 10: HTTP v1: a device's Firebase installation id; a v1 message's platform blocks (JSON
        // `{"android":…,"apns":…,"webpush":…,"fcm_options":…}`) and the `name` it was answered.
        """
        ALTER TABLE devices ADD COLUMN fid TEXT;
        ALTER TABLE messages ADD COLUMN platforms TEXT;
        ALTER TABLE messages ADD COLUMN v1_name TEXT;
        """,
        // 11: what the app server got (status, content type and body; an XMPP ack or nack as its
        // body) and the request headers that matter (authorization masked), set once the request
        // is answered; plain text forms, see RecordedExchange in FCMServer. And when a delivery
        // took a status the storage rules gave it (collapsed, dropped, expired), for the timeline.
        """
        ALTER TABLE messages ADD COLUMN answer TEXT;
        ALTER TABLE messages ADD COLUMN headers TEXT;
        ALTER TABLE deliveries ADD COLUMN settled_at INTEGER;
        """,
        // 12: each device's older delivery ids in chunks (Store+Inbox.swift), so the engine keeps
        // only the newest in memory. A store from before has none: the engine makes them from
        // the deliveries when it loads.
        """
        CREATE TABLE inbox_chunks(
            last_id INTEGER PRIMARY KEY,
            device INTEGER NOT NULL,
            ids BLOB NOT NULL);
        CREATE INDEX inbox_chunks_device ON inbox_chunks(device);
        """,
        // 13: APNs provider-token teams (their apps' bundle ids as a JSON array) and signing keys
        // (the public key only: the mock shows the private key once, when it makes it); an iOS
        // device's APNs token when it was given (NULL: derived from its FCM token) and its APNs
        // environment (NULL: sandbox).
        """
        ALTER TABLE devices ADD COLUMN apns_token TEXT;
        ALTER TABLE devices ADD COLUMN apns_environment TEXT;
        CREATE TABLE apns_teams(
            team_id TEXT PRIMARY KEY,
            bundle_ids TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        CREATE TABLE apns_keys(
            key_id TEXT PRIMARY KEY,
            team_id TEXT NOT NULL,
            public_key TEXT NOT NULL,
            created_at INTEGER NOT NULL);
        """,
        // 14: APNs client certificates issued by the mock's CA (the certificate, not its key: the
        // mock shows the key once), by serial number; revoking one deletes its row.
        """
        CREATE TABLE apns_certificates(
            id TEXT PRIMARY KEY,
            bundle_id TEXT NOT NULL,
            topics TEXT NOT NULL,
            environments TEXT NOT NULL,
            certificate TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL);
        """,
        // 15: when an iOS device's APNs token expires (a send after it is 410 ExpiredToken).
        """
        ALTER TABLE devices ADD COLUMN apns_expires_at INTEGER;
        """,
        // 16: Web Push subscriptions of web devices: the opaque id in the endpoint, the P-256 key
        // pair (private scalar and public point, the private half never shown), the auth secret,
        // the VAPID key the subscription is bound to (NULL: none), and whether it was ended.
        """
        CREATE TABLE web_push_subscriptions(
            device INTEGER PRIMARY KEY,
            push_id TEXT NOT NULL UNIQUE,
            private_key BLOB NOT NULL,
            public_key BLOB NOT NULL,
            auth BLOB NOT NULL,
            application_server_key TEXT,
            expired INTEGER NOT NULL DEFAULT 0);
        """,
        // 17: the subscription ids of deleted web devices, so their endpoints answer 410 after a
        // restart too (a subscription row is keyed by its device id, which a restart can give
        // again). Rows whose device is gone become such ids, their keys dropped.
        """
        CREATE TABLE web_push_deleted(push_id TEXT PRIMARY KEY) WITHOUT ROWID;
        INSERT INTO web_push_deleted(push_id)
            SELECT push_id FROM web_push_subscriptions WHERE device NOT IN (SELECT id FROM devices WHERE platform = 'web');
        DELETE FROM web_push_subscriptions WHERE device NOT IN (SELECT id FROM devices WHERE platform = 'web');
        """,
        // 18: real receiving clients (docs/real-clients.md): a client (an autopush uaid) and what it
        // said of itself; a device's link to its client (JSON: kind, id, channel_id,
        // unregister_code; NULL for a fake device); a delivery's life on a client's connection
        // (JSON: the connection, sends, the ack and the rejection).
        """
        CREATE TABLE real_clients(
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            user_agent TEXT,
            client_version TEXT,
            created_at INTEGER NOT NULL,
            last_connected_at INTEGER);
        ALTER TABLE devices ADD COLUMN client TEXT;
        ALTER TABLE deliveries ADD COLUMN client_delivery TEXT;
        CREATE INDEX deliveries_sent ON deliveries(device) WHERE status = 'sent';
        """,
        // 19: FCM's device side (docs/real-clients.md): a checked-in client's security token and
        // what its checkin said; its registrations (register3: a token per android id, app,
        // subtype, Instance ID app id and sender; a device when it reaches one); Firebase
        // installations (a project's app instance, its refresh and auth tokens).
        """
        ALTER TABLE real_clients ADD COLUMN secret TEXT;
        ALTER TABLE real_clients ADD COLUMN checkin TEXT;
        CREATE TABLE gcm_registrations(
            token TEXT PRIMARY KEY,
            client TEXT NOT NULL,
            app TEXT NOT NULL,
            subtype TEXT,
            sender TEXT NOT NULL,
            instance_id TEXT,
            device INTEGER,
            created_at INTEGER NOT NULL);
        CREATE TABLE installations(
            fid TEXT PRIMARY KEY,
            sender_id TEXT NOT NULL,
            app_id TEXT NOT NULL,
            refresh_token TEXT NOT NULL,
            auth_token TEXT NOT NULL,
            auth_expires_at INTEGER NOT NULL,
            created_at INTEGER NOT NULL);
        """,
        // 20: no index of deliveries written on a connection and not acknowledged: each real
        // client's delivery entered it when written and left it when acknowledged, a page more
        // in most commits of a send over MCS or autopush. Only the start looked them up, and the
        // start reads every held delivery anyway (`heldDeliveries`).
        "DROP INDEX deliveries_sent;",
        // 21: what a send answers NotRegistered for instead of registering it as a new device
        // (`--unknown-tokens register`), until a reset: the notification keys of deleted groups
        // (`retired_groups` until now) and the tokens of a deleted real client's devices.
        """
        CREATE TABLE retired_tokens(token TEXT PRIMARY KEY) WITHOUT ROWID;
        INSERT INTO retired_tokens(token) SELECT key FROM retired_groups;
        DROP TABLE retired_groups;
        """,
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
