public import FCMModel
import FCMCore
import FCMStore
import Platform

extension Engine {
    // MARK: Certificates

    /// Certificates in issue order.
    public func apnsCertificates() -> [APNsCertificate] {
        apnsCredentials.withLock { Array($0.certificates.values) }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// Records a certificate the server's CA has just issued (the caller made it and hands its
    /// key to the client once).
    public func addAPNsCertificate(_ c: APNsCertificate) throws(EngineError) {
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            guard s.certificates[c.id] == nil else { return nil }
            s.certificates[c.id] = c
            return submit([Writes.saveAPNsCertificate(id: c.id, bundleID: c.bundleID, topicsJSON: Self.jsonArray(c.topics),
                                                      environments: c.environments.map(\.rawValue).joined(separator: ","),
                                                      certificate: c.certificatePEM, createdAt: c.createdAt, expiresAt: c.expiresAt)])
        }
        guard let ticket else { throw .conflict("APNs certificate '\(c.id)' exists") }
        try commitControl(ticket)
    }

    /// Revokes a certificate: every request on a connection presenting it is refused
    /// `BadCertificate` from the next one on.
    public func revokeAPNsCertificate(_ id: String) throws(EngineError) {
        let ticket: Store.Ticket? = apnsCredentials.withLock { s in
            guard s.certificates.removeValue(forKey: id.lowercased()) != nil else { return nil }
            return submit([Writes.deleteAPNsCertificate(id.lowercased())])
        }
        guard let ticket else { throw .notFound("APNs certificate '\(id)' does not exist") }
        try commitControl(ticket)
    }

    /// The certificate the mock issued with serial `id` (nil: never issued by it, or revoked).
    public func apnsCertificate(id: String) -> APNsCertificate? {
        apnsCredentials.withLock { $0.certificates[id] }
    }

    static func jsonArray(_ list: [String]) -> String {
        var w = JSONWriter(capacity: 64)
        w.beginArray()
        for b in list { w.value(b) }
        w.endArray()
        return w.string
    }
}

extension APNsCredentials {
    /// The certificates the store holds (`apns_certificates`).
    static func loadCertificates(_ load: StoreLoader, into s: inout APNsCredentials) throws(StoreError) {
        try load.apnsCertificates { row in
            let topics = (try? JSONParser.parse(Array(row.topicsJSON.utf8)).arrayValue)?.compactMap(\.stringValue) ?? []
            let environments = row.environments.split(separator: ",").compactMap { APNsEnvironment(rawValue: String($0)) }
            s.certificates[row.id] = APNsCertificate(id: row.id, bundleID: row.bundleID, topics: topics, environments: environments,
                                                     certificatePEM: row.certificate, createdAt: row.createdAt, expiresAt: row.expiresAt)
        }
    }
}
