/// The `apns_certificates` table: the APNs client certificates the mock's CA issued (the
/// certificate only: its key is shown once, when it is issued).
extension Writes {
    /// Records an issued certificate; `environments` is `sandbox`, `production` or both, comma-separated.
    public static func saveAPNsCertificate(id: String, bundleID: String, topicsJSON: String, environments: String,
                                           certificate: String, createdAt: Int64, expiresAt: Int64) -> WriteOp {
        { c in
            try c.run("""
                INSERT OR REPLACE INTO apns_certificates(id, bundle_id, topics, environments, certificate, created_at, expires_at)
                VALUES (?,?,?,?,?,?,?)
                """,
                      [.text(id), .text(bundleID), .text(topicsJSON), .text(environments), .text(certificate), .int(createdAt), .int(expiresAt)])
        }
    }

    /// Revokes a certificate.
    public static func deleteAPNsCertificate(_ id: String) -> WriteOp {
        { c in try c.run("DELETE FROM apns_certificates WHERE id = ?", [.text(id)]) }
    }
}

/// One row of `apns_certificates`.
public struct APNsCertificateRow: Sendable {
    public let id: String
    public let bundleID: String
    public let topicsJSON: String
    public let environments: String
    public let certificate: String
    public let createdAt: Int64
    public let expiresAt: Int64
}

extension StoreLoader {
    /// APNs client certificates in issue order.
    public func apnsCertificates(_ row: (APNsCertificateRow) -> Void) throws(StoreError) {
        try c.query("SELECT id, bundle_id, topics, environments, certificate, created_at, expires_at FROM apns_certificates ORDER BY created_at, id") {
            (r: Statement) throws(StoreError) in
            row(APNsCertificateRow(id: r.text(0) ?? "", bundleID: r.text(1) ?? "", topicsJSON: r.text(2) ?? "[]", environments: r.text(3) ?? "",
                                   certificate: r.text(4) ?? "", createdAt: r.int(5), expiresAt: r.int(6)))
        }
    }
}
