import FCMCore
import FCMEngine
import HTTPServer
import Platform
import TLS

/// APNs certificate authentication (docs/apns.md, "Certificate authentication"): client
/// certificates issued by the mock's local CA, and what a request's credentials authorize.
///
/// The HTTPS port asks every client for a certificate (never requiring one); a request on a
/// connection that presented one carries it (`HTTPRequest.clientCertificate`). A certificate is
/// checked on every request of its connection, so one revoked meanwhile is refused at once:
/// its CA signature is checked once per certificate (and remembered by its bytes), the rest
/// (issued, not revoked, not expired on the mock's clock, the environment) by the engine.
final class APNsCertificateAuth: Sendable {
    let engine: Engine
    /// The local CA that issues and recognizes certificates; nil without `--https-port`, where no
    /// client can present one.
    let authority: LocalCertificateAuthority?
    /// Certificates seen, by their bytes: the serial when the CA's signature is on it, else nil.
    private let seen = Locked<[[UInt8]: String?]>([:])
    /// Most certificates remembered (a full table is emptied: a client presents one certificate
    /// for as long as its connection lasts).
    static let maxSeen = 1000

    init(engine: Engine, authority: LocalCertificateAuthority?) {
        self.engine = engine
        self.authority = authority
    }

    /// Issues a certificate for `bundleID` (and `others`) good for `environments`, records it,
    /// and answers it with its key (which the mock does not keep).
    func issue(bundleID: String, others: [String], environments: [APNsEnvironment],
               days: Int) throws(ControlError) -> (IssuedClientCertificate, APNsCertificate) {
        guard let authority else {
            throw .notFound("no local CA to issue client certificates: start the server with --https-port")
        }
        var markers: APNsEnvironments = []
        if environments.contains(.sandbox) { markers.insert(.sandbox) }
        if environments.contains(.production) { markers.insert(.production) }
        let issued: IssuedClientCertificate
        let read: APNsClientCertificate
        do {
            issued = try authority.issueAPNsClientCertificate(bundleID: bundleID, otherBundleIDs: others, environments: markers, days: days)
            read = try APNsClientCertificate(pem: issued.certificatePEM)
        } catch {
            throw .internal("cannot issue a client certificate: \(error.description)")
        }
        // Valid `days` from now on the mock's clock, which is the one it is checked on.
        let now = engine.clock.nowMillis()
        let record = APNsCertificate(id: issued.serial, bundleID: read.bundleID ?? bundleID, topics: read.topics,
                                     environments: APNsEnvironment.allCases.reversed().filter { environments.contains($0) },
                                     certificatePEM: issued.certificatePEM, createdAt: now, expiresAt: now + Int64(days) * 86_400_000)
        try engine.addAPNsCertificate(record)
        return (issued, record)
    }

    /// Who authorizes the request: its connection's certificate, checked on every request
    /// (`BadCertificate`, `BadCertificateEnvironment`), unless the request carries an
    /// `authorization` header: then its provider token does (a token sent is a token meant; the
    /// certificate must still be good). Without a certificate, the provider token
    /// (`MissingProviderToken` when there is none).
    func authorize(_ r: HTTPRequest, environment: APNsEnvironment) throws(APNsError) -> APNsAuthorization {
        let authorization = r.header("authorization")
        if let der = r.clientCertificate {
            let certificate = try check(der, environment: environment)
            if authorization == nil { return .certificate(certificate) }
        }
        switch engine.authorizeProviderToken(authorization) {
        case .success(let a): return .token(a)
        case .failure(let e): throw e
        }
    }

    /// The mock's certificate `der` is, as good for `environment`.
    func check(_ der: [UInt8], environment: APNsEnvironment) throws(APNsError) -> APNsCertificate {
        let known = seen.withLock { $0[der] }
        let serial: String?
        if let known {
            serial = known
        } else {
            // The validity period is the engine's to check, on the mock's clock.
            serial = authority?.hasIssued(der, checkingTime: false) == true ? (try? APNsClientCertificate(der: der))?.serial : nil
            seen.withLock { s in
                if s.count >= Self.maxSeen { s.removeAll(keepingCapacity: true) }
                s[der] = serial
            }
        }
        guard let serial else { throw APNsError(.badCertificate, "the client certificate was not issued by this mock's CA") }
        switch engine.authorizeCertificate(id: serial, environment: environment) {
        case .success(let c): return c
        case .failure(let e): throw e
        }
    }
}

/// What authorized an APNs request: a provider token (its key and team) or a client
/// certificate.
enum APNsAuthorization {
    case token(APNsTokenAuthorization)
    case certificate(APNsCertificate)

    /// Whether `apns-topic` must be given as the headers are read: with a token (a certificate's
    /// case is `defaultTopic`'s).
    var requiresTopic: Bool {
        if case .token = self { return true }
        return false
    }

    /// What the record keeps of it: `key_id` or `certificate_id`, and its value.
    var recorded: (name: String, id: String) {
        switch self {
        case .token(let t): return ("key_id", t.keyID)
        case .certificate(let c): return ("certificate_id", c.id)
        }
    }

    /// Fills in the topic a certificate of one app implies when `apns-topic` was not sent: the
    /// app, with the suffix its push type requires. `MissingTopic` when the certificate names
    /// several apps.
    func defaultTopic(_ headers: inout APNsHeaders) throws(APNsError) {
        guard case .certificate(let c) = self, headers.topic == nil else { return }
        let apps = c.apps
        guard apps.count == 1 else {
            throw APNsError(.missingTopic, "the client certificate \(c.id) names \(apps.count) apps: apns-topic must say which")
        }
        headers.topic = apps[0] + headers.pushType.topicSuffix
        headers.bundleID = apps[0]
    }

    /// The app the send is for, once the topic is checked against what authorized it:
    /// `TopicDisallowed` for an app the key's team lacks, or a topic the certificate does not
    /// name (nor its app).
    func app(of headers: APNsHeaders, engine: Engine) throws(APNsError) -> String {
        let bundle = headers.bundleID ?? ""
        switch self {
        case .token(let auth):
            guard engine.apnsTeam(auth.teamID, has: bundle) else {
                throw APNsError(.topicDisallowed, "team \(auth.teamID) (key \(auth.keyID)) has no app \(bundle)")
            }
        case .certificate(let c):
            guard c.allows(topic: headers.topic ?? bundle, bundleID: bundle) else {
                throw APNsError(.topicDisallowed, "the client certificate \(c.id) names \(c.topics.joined(separator: ", ")), not \(headers.topic ?? bundle)")
            }
        }
        return bundle
    }
}
