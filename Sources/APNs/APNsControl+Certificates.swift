import FCMCore
import FCMEngine
public import FCMModel
public import HTTPServer
public import RoomKit
import TLS

/// `/api/v1/apns/certificates`: APNs client certificates issued by the mock's local CA, for
/// certificate authentication (docs/apns.md).
extension APNsControl {
    /// `POST /api/v1/apns/certificates {"bundle_id","environment"?,"bundle_ids"?,"days"?}`: a new
    /// client certificate and its key (PEM), answered once. `environment` is `sandbox` (the
    /// default), `production` or `both`; `bundle_ids` adds more apps to one certificate (at most 63, each once); `days`
    /// (default 365) is how long it is valid, on the mock's clock.
    public func createAPNsCertificate(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let o = try c.jsonBody()
        try o.allow(["bundle_id", "bundle_ids", "environment", "days"])
        guard let bundle = try o.string("bundle_id") else { throw .badRequest("bundle_id is required: the app the certificate is for") }
        let others = try APNsCertificate.otherApps(of: bundle, try o.stringArray("bundle_ids") ?? [])
        let environments: [APNsEnvironment]
        switch try o.string("environment") ?? "sandbox" {
        case "sandbox": environments = [.sandbox]
        case "production": environments = [.production]
        case "both": environments = [.sandbox, .production]
        default: throw .badRequest("environment must be sandbox, production or both")
        }
        let days = try o.int("days") ?? 365
        guard (1...3650).contains(days) else { throw .badRequest("days must be 1 to 3650") }
        let (issued, record) = try certificates.issue(bundleID: bundle, others: others, environments: environments, days: Int(days))
        return ControlReply.ok(Self.certificateJSON(record, privateKeyPEM: issued.privateKeyPEM), status: 201)
    }

    /// `GET /api/v1/apns/certificates`: the certificates, without their keys.
    public func apnsCertificateList(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try ControlReply.paged(engine.apnsCertificates(), c.query) { Self.certificateJSON($0, privateKeyPEM: nil) }
    }

    /// `DELETE /api/v1/apns/certificates/{id}`: revokes it (its connections are refused
    /// `BadCertificate` from the next request on).
    public func deleteAPNsCertificate(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.revokeAPNsCertificate(c["id"])
        return ControlReply.noContent
    }

    static func certificateJSON(_ c: APNsCertificate, privateKeyPEM: String?) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.value(c.id)
        w.key("bundle_id"); w.value(c.bundleID)
        w.key("topics"); w.beginArray()
        for t in c.topics { w.value(t) }
        w.endArray()
        w.key("environments"); w.beginArray()
        for e in c.environments { w.value(e.rawValue) }
        w.endArray()
        w.key("created_at"); w.value(rfc3339(millis: c.createdAt))
        w.key("expires_at"); w.value(rfc3339(millis: c.expiresAt))
        w.key("certificate_pem"); w.value(c.certificatePEM)
        if let privateKeyPEM { w.key("private_key_pem"); w.value(privateKeyPEM) }
        w.endObject()
        return w.string
    }
}

extension APNsCertificate {
    /// Most apps one certificate names besides its first (the TLS layer's bound).
    static let maxOtherApps = 63

    /// The other apps of a certificate for `bundleID` as asked (`bundle_ids`): each once, in
    /// order, without `bundleID`; all checked; at most `maxOtherApps`.
    static func otherApps(of bundleID: String, _ asked: [String]) throws(EngineError) -> [String] {
        var seen = Set<String>()
        let others = asked.filter { $0 != bundleID && seen.insert($0).inserted }
        guard others.count <= maxOtherApps else {
            throw .badRequest("bundle_ids names \(others.count) other apps: a certificate names at most \(maxOtherApps) besides bundle_id")
        }
        for b in [bundleID] + others { try APNsTeam.checkBundleID(b) }
        return others
    }
}
