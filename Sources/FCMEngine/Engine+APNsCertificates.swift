public import FCMCore
import FCMStore
import Platform

/// An APNs client certificate the mock issued (docs/apns.md, "Certificate authentication"): the
/// public part and what it authorizes. The private key was shown once, when it was issued.
public struct APNsCertificate: Sendable, Equatable {
    /// The serial number, lowercase hex: the certificate's name in the control API and on the
    /// records of the sends it authorized.
    public let id: String
    /// The subject's UID: the app the certificate was issued for.
    public let bundleID: String
    /// Apple's topic extension as issued: each app, then its `.voip` and `.complication` topics.
    public let topics: [String]
    /// The environments it is good for (Apple's marker extensions), sandbox first.
    public let environments: [APNsEnvironment]
    public let certificatePEM: String
    public let createdAt: Int64
    /// The end of its validity (ms), checked on the mock's clock.
    public let expiresAt: Int64
    /// The apps it was issued for, in order (`bundle_id`, then `bundle_ids`).
    public let apps: [String]

    /// `apps` defaults to those the topics list as issued (`apps(topics:)`).
    public init(id: String, bundleID: String, topics: [String], environments: [APNsEnvironment], certificatePEM: String,
                createdAt: Int64, expiresAt: Int64, apps: [String]? = nil) {
        self.id = id
        self.bundleID = bundleID
        self.topics = topics
        self.environments = environments
        self.certificatePEM = certificatePEM
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.apps = apps ?? Self.apps(topics: topics)
    }

    /// The apps of a topic extension as the mock issues it: each app followed by its `.voip`
    /// and `.complication` topics (so `com.a` and `com.a.voip` issued together are two apps).
    static func apps(topics: [String]) -> [String] {
        var apps: [String] = []
        var i = 0
        while i < topics.count {
            let app = topics[i]
            apps.append(app)
            i += 1
            for suffix in [".voip", ".complication"] where i < topics.count && topics[i] == app + suffix { i += 1 }
        }
        return apps
    }

    /// Most apps one certificate names besides its first (the TLS layer's bound).
    static let maxOtherApps = 63

    /// The other apps of a certificate for `bundleID` as asked (`bundle_ids`): each once, in
    /// order, without `bundleID`; all checked; at most `maxOtherApps`.
    public static func otherApps(of bundleID: String, _ asked: [String]) throws(EngineError) -> [String] {
        let others = Engine.unique(asked.filter { $0 != bundleID })
        guard others.count <= maxOtherApps else {
            throw .badRequest("bundle_ids names \(others.count) other apps: a certificate names at most \(maxOtherApps) besides bundle_id")
        }
        try Engine.checkBundleIDs([bundleID] + others)
        return others
    }

    /// Whether a push to `topic` (of the app `bundleID`) is allowed: the topic is listed, or its
    /// app is (Apple's certificates list the app, `.voip` and `.complication`; the other push
    /// types' topics are made from the app's).
    public func allows(topic: String, bundleID: String) -> Bool {
        topics.contains(topic) || apps.contains(bundleID)
    }
}

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

    /// Refuses bundle ids that are not 1 to 255 printable ASCII characters without spaces or '/'.
    static func checkBundleIDs(_ list: [String]) throws(EngineError) {
        for b in list { try checkBundleID(b) }
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
