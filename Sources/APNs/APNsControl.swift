public import FCMCore
public import FCMEngine
public import FCMModel
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
    /// its `.p8` PEM (PKCS #8, as Apple's download) once, with its key id and team id. With
    /// `public_key_pem` (a P-256 public key, as a `.p8`'s `openssl pkey -pubout` writes it), the
    /// sender's own key is imported instead and the answer has no private key. The team is made
    /// if new, and `bundle_ids` are added to it; a key id that exists is 409.
    public func createAPNsKey(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let o = try c.jsonBody()
        try o.allow(["team_id", "bundle_ids", "key_id", "public_key_pem"])
        guard let team = try o.string("team_id") else { throw .badRequest("team_id is required: Apple's 10-character team id") }
        let bundles = try o.stringArray("bundle_ids") ?? []
        if let given = try o.string("public_key_pem") {
            let pem = try Self.publicKeyPEM(given, field: "public_key_pem")
            let imported = try engine.addAPNsKey(teamID: team, bundleIDs: bundles, keyID: try o.string("key_id") ?? Self.newKeyID(),
                                                 publicKeyPEM: pem)
            return ControlReply.ok(Self.keyJSON(imported), status: 201)
        }
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey()
        } catch {
            throw .internal("cannot make a P-256 key: \(error.description)")
        }
        let made = try engine.addAPNsKey(teamID: team, bundleIDs: bundles, keyID: try o.string("key_id") ?? Self.newKeyID(),
                                       publicKeyPEM: key.publicKey.pem)
        var w = JSONWriter()
        w.beginObject()
        w.key("key_id"); w.value(made.keyID)
        w.key("team_id"); w.value(made.teamID)
        w.key("private_key_pem"); w.value(key.pem)
        w.endObject()
        return ControlReply.ok(w.string, status: 201)
    }

    /// A public key given as text (`field` names it in the refusal): a P-256 key's
    /// `-----BEGIN PUBLIC KEY-----` PEM (SubjectPublicKeyInfo), returned as the mock writes it.
    /// A private key (a `.p8`) is refused: the mock must never hold the sender's secret.
    public static func publicKeyPEM(_ text: String, field: String) throws(ControlError) -> String {
        if text.contains("PRIVATE KEY-----") {
            throw .badRequest("\(field): a private key; give its public half (openssl pkey -in AuthKey.p8 -pubout)")
        }
        do {
            return try P256PublicKey(pem: text).pem
        } catch {
            throw .badRequest("\(field): not a P-256 public key PEM (-----BEGIN PUBLIC KEY-----): \(error.description)")
        }
    }

    /// A fixture file's `apns` member (`{"teams":[{"team_id","bundle_ids":[…],"keys":[{"key_id",
    /// "public_key_pem"}]}]}`), checked whole: ids as Apple's (10 uppercase letters or digits),
    /// bundle ids, each PEM a P-256 public key, no key id twice. A refusal names the JSON path
    /// of what is wrong (`$.apns.teams[0].keys[1].public_key_pem`) and says why.
    public static func fixtureTeams(_ value: JSONValue) throws(APNsFixtureError) -> [APNsFixtureTeam] {
        guard let apns = value.objectValue else { throw APNsFixtureError("$.apns", "must be an object: {\"teams\":[…]}") }
        for k in apns.keys where k != "teams" { throw APNsFixtureError("$.apns.\(k)", "unknown key; allowed: teams") }
        guard let v = apns["teams"] else { return [] }
        guard let items = v.arrayValue else { throw APNsFixtureError("$.apns.teams", "must be an array") }
        var teams: [APNsFixtureTeam] = []
        var keyPaths: [String: String] = [:]
        var teamPaths: [String: String] = [:]
        for (i, item) in items.enumerated() {
            let path = "$.apns.teams[\(i)]"
            guard let o = item.objectValue else { throw APNsFixtureError(path, "must be an object with team_id, bundle_ids and keys") }
            for k in o.keys where !["team_id", "bundle_ids", "keys"].contains(k) {
                throw APNsFixtureError("\(path).\(k)", "unknown key; allowed: team_id, bundle_ids, keys")
            }
            guard let team = o["team_id"]?.stringValue else { throw APNsFixtureError("\(path).team_id", "is required: Apple's 10-character team id") }
            do { try APNsTeam.checkAppleID(team, what: "team_id") } catch { throw APNsFixtureError("\(path).team_id", error.message) }
            if let earlier = teamPaths[team] { throw APNsFixtureError("\(path).team_id", "team '\(team)' is declared twice (also at \(earlier))") }
            teamPaths[team] = path
            var bundles: [String] = []
            if let b = o["bundle_ids"], !b.isNull {
                guard let list = b.arrayValue else { throw APNsFixtureError("\(path).bundle_ids", "must be an array of bundle ids") }
                for (j, v) in list.enumerated() {
                    guard let s = v.stringValue else { throw APNsFixtureError("\(path).bundle_ids[\(j)]", "must be a string") }
                    do { try APNsTeam.checkBundleID(s) } catch { throw APNsFixtureError("\(path).bundle_ids[\(j)]", error.message) }
                    bundles.append(s)
                }
            }
            var keys: [(keyID: String, publicKeyPEM: String)] = []
            if let ks = o["keys"], !ks.isNull {
                guard let list = ks.arrayValue else { throw APNsFixtureError("\(path).keys", "must be an array of {\"key_id\",\"public_key_pem\"}") }
                for (j, v) in list.enumerated() {
                    let kp = "\(path).keys[\(j)]"
                    guard let k = v.objectValue else { throw APNsFixtureError(kp, "must be an object with key_id and public_key_pem") }
                    for name in k.keys where !["key_id", "public_key_pem"].contains(name) {
                        throw APNsFixtureError("\(kp).\(name)", "unknown key; allowed: key_id, public_key_pem")
                    }
                    guard let id = k["key_id"]?.stringValue else { throw APNsFixtureError("\(kp).key_id", "is required: the key's 10-character id") }
                    do { try APNsTeam.checkAppleID(id, what: "key_id") } catch { throw APNsFixtureError("\(kp).key_id", error.message) }
                    if let earlier = keyPaths[id] { throw APNsFixtureError("\(kp).key_id", "key '\(id)' is declared twice (also at \(earlier))") }
                    keyPaths[id] = kp
                    guard let text = k["public_key_pem"]?.stringValue else {
                        throw APNsFixtureError("\(kp).public_key_pem", "is required: the key's public half as PEM (-----BEGIN PUBLIC KEY-----)")
                    }
                    let pem: String
                    do {
                        pem = try publicKeyPEM(text, field: "public_key_pem")
                    } catch {
                        // The path names the field already.
                        throw APNsFixtureError("\(kp).public_key_pem", String(error.message.dropFirst("public_key_pem: ".count)))
                    }
                    keys.append((id, pem))
                }
            }
            teams.append(APNsFixtureTeam(teamID: team, bundleIDs: bundles, keys: keys))
        }
        return teams
    }

    /// A new key id: 10 characters of uppercase letters and digits, as Apple's.
    static func newKeyID() -> String {
        var rng = SystemRandomNumberGenerator()
        return randomString(10, from: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8), using: &rng)
    }

    static func keyJSON(_ k: APNsKey) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("key_id"); w.value(k.keyID)
        w.key("team_id"); w.value(k.teamID)
        w.key("public_key_pem"); w.value(k.publicKeyPEM)
        w.key("created_at"); w.value(rfc3339(millis: k.createdAt))
        w.endObject()
        return w.string
    }

    /// `GET /api/v1/apns/keys`: the keys, without their private halves.
    public func apnsKeys(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try ControlReply.paged(engine.apnsKeys(), c.query) { Self.keyJSON($0) }
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

/// Where a fixture's `apns` member is wrong: the JSON path, and why.
public struct APNsFixtureError: Error, Sendable {
    public let path: String
    public let message: String

    init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }
}
