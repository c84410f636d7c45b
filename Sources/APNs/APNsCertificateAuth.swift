import RoomKit
import FCMCore
public import FCMEngine
import FCMModel
import HTTPServer
import Platform
public import TLS

/// APNs certificate authentication (docs/apns.md, "Certificate authentication"): client
/// certificates issued by the mock's local CA, and what a request's credentials authorize.
///
/// The HTTPS port asks every client for a certificate (never requiring one); a request on a
/// connection that presented one carries it (`HTTPRequest.clientCertificate`). A certificate is
/// checked on every request of its connection, so one revoked meanwhile is refused at once:
/// its CA signature is checked once per certificate (those that carry it are remembered by the
/// SHA-256 of their bytes; those that do not are checked again, so a stranger fills no table),
/// the rest (issued, not revoked, not expired on the mock's clock, the environment) by the
/// engine.
public final class APNsCertificateAuth: Sendable {
    let engine: Engine
    /// The local CA that issues and recognizes certificates; nil without `--https-port`, where no
    /// client can present one.
    let authority: LocalCertificateAuthority?
    /// The CA's certificate, read once.
    let issuer: CertificateIssuer?
    /// Certificates that carry the CA's signature, by the SHA-256 of their DER: their serial (a
    /// client presents one certificate for as long as its connection lasts).
    private let verified = BoundedCache<[UInt8], String>(capacity: 1000)
    /// Provider tokens, for the requests that bring no certificate.
    let tokens: ProviderTokens

    public init(engine: Engine, authority: LocalCertificateAuthority?) {
        self.engine = engine
        self.authority = authority
        issuer = authority.flatMap { try? CertificateIssuer($0) }
        tokens = ProviderTokens(engine: engine)
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
        // Valid `days` from now on the mock's clock, which is the one it is checked on (and the
        // one the certificate's own dates are written on).
        let now = engine.clock.nowMillis()
        do {
            issued = try authority.issueAPNsClientCertificate(bundleID: bundleID, otherBundleIDs: others, environments: markers, days: days,
                                                              now: now / 1000)
            read = try APNsClientCertificate(pem: issued.certificatePEM)
        } catch {
            throw .internal("cannot issue a client certificate: \(error.description)")
        }
        let record = APNsCertificate(id: issued.serial, bundleID: read.bundleID ?? bundleID, topics: read.topics,
                                     environments: APNsEnvironment.allCases.reversed().filter { environments.contains($0) },
                                     certificatePEM: issued.certificatePEM, createdAt: now, expiresAt: now + Int64(days) * 86_400_000,
                                     apps: [bundleID] + others)
        try engine.addAPNsCertificate(record)
        return (issued, record)
    }

    /// Who authorizes the request: its connection's certificate when it presented one (Apple:
    /// the certificate authenticates the connection, and an `authorization` header is ignored),
    /// checked on every request (`BadCertificate`, `BadCertificateEnvironment`); else the
    /// provider token (`MissingProviderToken` when there is none).
    func authorize(_ r: HTTPRequest, environment: APNsEnvironment) throws(APNsError) -> APNsAuthorization {
        if let der = r.clientCertificate { return .certificate(try check(der, environment: environment)) }
        // Two provider tokens are no token to check: the header sent twice, as any other.
        if r.headers.lazy.filter({ nameIs($0.name, "authorization") }).count > 1 {
            throw APNsError(.duplicateHeaders, "authorization was sent more than once")
        }
        return .token(try tokens.authorize(r.header("authorization")))
    }

    /// The mock's certificate `der` is, as good for `environment`.
    func check(_ der: [UInt8], environment: APNsEnvironment) throws(APNsError) -> APNsCertificate {
        // The validity period is checked below, on the mock's clock, not by the CA's check.
        let serial = verified.value(for: SHA256.digest(der)) {
            guard issuer?.hasIssued(der, checkingTime: false) == true else { return nil }
            return (try? APNsClientCertificate(der: der))?.serial
        }
        guard let serial else { throw APNsError(.badCertificate, "the client certificate was not issued by this mock's CA") }
        return try Self.authorized(engine.apnsCertificate(id: serial), serial: serial, environment: environment,
                                   now: engine.clock.nowMillis())
    }

    /// The certificate of serial `id` as it authorizes a request reaching `environment` at
    /// `now`, or Apple's refusal: `BadCertificate` when the mock has no such certificate (never
    /// issued by it, or revoked) or it has expired on the mock's clock;
    /// `BadCertificateEnvironment` when it is not good for `environment`.
    static func authorized(_ c: APNsCertificate?, serial id: String, environment: APNsEnvironment,
                           now: Int64) throws(APNsError) -> APNsCertificate {
        guard let c else {
            throw APNsError(.badCertificate, "the client certificate (serial \(id)) was not issued by this mock, or was revoked")
        }
        guard now < c.expiresAt else {
            throw APNsError(.badCertificate, "the client certificate \(id) expired at \(rfc3339(millis: c.expiresAt)) on the mock's clock")
        }
        guard c.environments.contains(environment) else {
            throw APNsError(.badCertificateEnvironment,
                            "the client certificate \(id) is for \(c.environments.map(\.rawValue).joined(separator: " and ")); this request reached \(environment.rawValue)")
        }
        return c
    }
}

/// What authorized an APNs request: a provider token (its key and team) or a client
/// certificate.
enum APNsAuthorization {
    case token(APNsTokenAuthorization)
    case certificate(APNsCertificate)

    /// What the record keeps of it: `key_id` or `certificate_id`, and its value.
    var recorded: (name: String, id: String) {
        switch self {
        case .token(let t): return ("key_id", t.keyID)
        case .certificate(let c): return ("certificate_id", c.id)
        }
    }

    /// The request's APNs headers, checked in the contract's order. `apns-topic` is required
    /// (`MissingTopic` at the topic's step, before the headers after it) with a token, and with a
    /// certificate of several apps; without it, a certificate of one app stands for its app, with
    /// the suffix the push type requires.
    func headers(of r: HTTPRequest, body: inout APNsBody) throws(APNsError) -> APNsHeaders {
        guard case .certificate(let c) = self else { return try APNsHeaders.parse(r.headers, body: &body, topicRequired: true) }
        let apps = c.apps
        var headers: APNsHeaders
        do throws(APNsError) {
            headers = try APNsHeaders.parse(r.headers, body: &body, topicRequired: apps.count != 1)
        } catch where error.reason == .missingTopic {
            throw APNsError(.missingTopic, "the client certificate \(c.id) names \(apps.count) apps: apns-topic must say which")
        }
        if headers.topic == nil {
            headers.topic = apps[0] + headers.pushType.topicSuffix
            headers.bundleID = apps[0]
        }
        return headers
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
