import FCMCore
public import FCMEngine
public import HTTPServer
public import RoomKit
import TLS

/// `/api/v1/apns/…`: APNs teams (the apps their keys may send to) and the signing keys the mock
/// makes for provider tokens (docs/apns.md).
public struct APNsControl: Sendable {
    let engine: Engine
    /// Issues APNs client certificates (nil without a local CA: `--https-port`).
    let certificates: APNsCertificateAuth

    public init(engine: Engine, certificates: APNsCertificateAuth) {
        self.engine = engine
        self.certificates = certificates
    }

    /// `POST /api/v1/apns/keys {"team_id","bundle_ids":[…],"key_id"?}`: a new P-256 key; answers
    /// its `.p8` PEM (PKCS #8, as Apple's download) once, with its key id and team id. The team is
    /// made if new, and `bundle_ids` are added to it.
    public func createAPNsKey(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let o = try c.jsonBody()
        try o.allow(["team_id", "bundle_ids", "key_id"])
        guard let team = try o.string("team_id") else { throw .badRequest("team_id is required: Apple's 10-character team id") }
        let bundles = try o.stringArray("bundle_ids") ?? []
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey()
        } catch {
            throw .internal("cannot make a P-256 key: \(error.description)")
        }
        let made = try engine.addAPNsKey(teamID: team, bundleIDs: bundles, keyID: try o.string("key_id"), publicKeyPEM: key.publicKey.pem)
        var w = JSONWriter()
        w.beginObject()
        w.key("key_id"); w.value(made.keyID)
        w.key("team_id"); w.value(made.teamID)
        w.key("private_key_pem"); w.value(key.pem)
        w.endObject()
        return ControlReply.ok(w.string, status: 201)
    }

    /// `GET /api/v1/apns/keys`: the keys, without their private halves.
    public func apnsKeys(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try ControlReply.paged(engine.apnsKeys(), c.query) { k in
            var w = JSONWriter()
            w.beginObject()
            w.key("key_id"); w.value(k.keyID)
            w.key("team_id"); w.value(k.teamID)
            w.key("public_key_pem"); w.value(k.publicKeyPEM)
            w.key("created_at"); w.value(rfc3339(millis: k.createdAt))
            w.endObject()
            return w.string
        }
    }

    /// `DELETE /api/v1/apns/keys/{key_id}`: revokes the key (its tokens are refused at once).
    public func deleteAPNsKey(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.revokeAPNsKey(c["key_id"])
        return ControlReply.noContent
    }

    /// `PUT /api/v1/apns/teams/{team_id} {"bundle_ids":[…]}`: creates the team or replaces its apps.
    public func putAPNsTeam(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let o = try c.jsonBody()
        try o.allow(["bundle_ids"])
        guard let bundles = try o.stringArray("bundle_ids") else { throw .badRequest("bundle_ids is required: an array of bundle ids") }
        return ControlReply.ok(Self.teamJSON(try engine.putAPNsTeam(c["team_id"], bundleIDs: bundles)))
    }

    /// `GET /api/v1/apns/teams`.
    public func apnsTeams(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try ControlReply.paged(engine.apnsTeams(), c.query) { Self.teamJSON($0) }
    }

    static func teamJSON(_ t: APNsTeam) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("team_id"); w.value(t.teamID)
        w.key("bundle_ids"); w.beginArray()
        for b in t.bundleIDs { w.value(b) }
        w.endArray()
        w.key("created_at"); w.value(rfc3339(millis: t.createdAt))
        w.endObject()
        return w.string
    }
}
