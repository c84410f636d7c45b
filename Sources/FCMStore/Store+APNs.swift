/// The `apns_teams` and `apns_keys` tables: APNs provider-token teams and their signing keys.
extension Writes {
    /// Creates or replaces a team and its bundle ids (a JSON array).
    public static func saveAPNsTeam(teamID: String, bundleIDsJSON: String, createdAt: Int64) -> WriteOp {
        { c in
            try c.run("INSERT OR REPLACE INTO apns_teams(team_id, bundle_ids, created_at) VALUES (?,?,?)",
                      [.text(teamID), .text(bundleIDsJSON), .int(createdAt)])
        }
    }

    /// Adds a signing key (its public key only).
    public static func saveAPNsKey(keyID: String, teamID: String, publicKey: String, createdAt: Int64) -> WriteOp {
        { c in
            try c.run("INSERT OR REPLACE INTO apns_keys(key_id, team_id, public_key, created_at) VALUES (?,?,?,?)",
                      [.text(keyID), .text(teamID), .text(publicKey), .int(createdAt)])
        }
    }

    /// Revokes a signing key.
    public static func deleteAPNsKey(_ keyID: String) -> WriteOp {
        { c in try c.run("DELETE FROM apns_keys WHERE key_id = ?", [.text(keyID)]) }
    }
}

extension StoreLoader {
    /// APNs teams in creation order: team id, bundle ids as JSON, creation time.
    public func apnsTeams(_ row: (String, String, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT team_id, bundle_ids, created_at FROM apns_teams ORDER BY created_at, team_id") {
            (r: Statement) throws(StoreError) in
            row(r.text(0) ?? "", r.text(1) ?? "[]", r.int(2))
        }
    }

    /// APNs signing keys in creation order: key id, team id, public key PEM, creation time.
    public func apnsKeys(_ row: (String, String, String, Int64) -> Void) throws(StoreError) {
        try c.query("SELECT key_id, team_id, public_key, created_at FROM apns_keys ORDER BY created_at, key_id") {
            (r: Statement) throws(StoreError) in
            row(r.text(0) ?? "", r.text(1) ?? "", r.text(2) ?? "", r.int(3))
        }
    }
}
