public import RoomKit
import Platform
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer
import TLS

/// `/api/v1/projects/{project}/service-accounts`: OAuth 2.0 service accounts of a project.
extension ControlAPI {
    /// `POST`: a new account with a new RSA 2048 key; answers the whole service-account JSON, in
    /// Google's form, private key included: the one time it is shown. Its `token_uri` is this
    /// server's `/token` at the address the caller used.
    public func createServiceAccount(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let project = try engine.project(c["project"])
        let (account, key, projectID) = try newServiceAccount(of: project)
        let host = c.request.header("host") ?? "127.0.0.1"
        return ok(Self.serviceAccountJSON(account, projectID: projectID, privateKeyPEM: key.pem,
                                          tokenURI: "\(c.request.isSecure ? "https" : "http")://\(host)/token"), status: 201)
    }

    /// A new account of `project` with a new RSA 2048 key, saved; its project id as saved.
    private func newServiceAccount(of project: Project) throws(ControlError) -> (ServiceAccount, RSAPrivateKey, String) {
        let key: RSAPrivateKey
        do {
            key = try RSAPrivateKey()
        } catch {
            throw .internal("cannot make an RSA key: \(error.description)")
        }
        var rng = SystemRandomNumberGenerator()
        let keyID = randomString(40, from: RandomAlphabet.hex, using: &rng)
        let tag = randomString(5, from: RandomAlphabet.lowercaseAlphanumeric, using: &rng)
        let clientID = randomString(1, from: Array("123456789".utf8), using: &rng) + randomString(20, from: RandomAlphabet.digits, using: &rng)
        let account = ServiceAccount(privateKeyID: keyID, clientEmail: "firebase-adminsdk-\(tag)@\(project.projectID).iam.gserviceaccount.com",
                                     clientID: clientID, publicKeyPEM: key.publicKeyPEM, createdAt: engine.clock.nowMillis())
        let saved = try engine.addServiceAccount(account, to: project.senderID)
        return (account, key, saved.projectID)
    }

    /// `POST /api/v1/projects/{project}/access-tokens`: an access token of the project, issued
    /// exactly as the token endpoint issues one to the project's first service account (a new
    /// account is made first when it has none), so a caller holding the control token (the web
    /// page's compose form) can send with HTTP v1 without signing a JWT. It is listed by
    /// `GET /api/v1/access-tokens` and revoked like any other.
    public func createAccessToken(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let project = try engine.project(c["project"])
        let account: ServiceAccount
        if let first = project.serviceAccounts.first { account = first } else { account = try newServiceAccount(of: project).0 }
        let t = engine.mintAccessToken(account: account, senderID: project.senderID, token: GoogleAccessTokens.newToken(),
                                       scope: GoogleAccessTokens.messagingScope, lifetimeSeconds: GoogleAccessTokens.lifetimeSeconds)
        var w = JSONWriter()
        w.beginObject()
        w.key("access_token"); w.value(t.token)
        w.key("expires_in"); w.value(GoogleAccessTokens.lifetimeSeconds)
        w.key("token_type"); w.value("Bearer")
        w.key("id"); w.value(t.id)
        w.key("client_email"); w.value(t.clientEmail)
        w.key("project_id"); w.value(project.projectID)
        w.endObject()
        return ok(w.string, status: 201)
    }

    /// `GET`: the project's accounts, without private keys.
    public func serviceAccounts(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(try engine.project(c["project"]).serviceAccounts, c.query) { a in
            var w = JSONWriter()
            Render.serviceAccount(&w, a)
            return w.string
        }
    }

    /// `DELETE …/{private_key_id}`: revokes the key.
    public func deleteServiceAccount(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteServiceAccount(c["key_id"], of: c["project"])
        return Self.noContent
    }

    /// `GET /api/v1/access-tokens`: the tokens issued (never the token itself: its first 12
    /// characters).
    public func accessTokens(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.accessTokens(), c.query) { t in
            var w = JSONWriter()
            w.beginObject()
            w.key("id"); w.value(t.id)
            w.key("token_prefix"); w.value(String(t.token.prefix(12)))
            w.key("client_email"); w.value(t.clientEmail)
            w.key("project_id"); w.value((try? engine.project(t.senderID))?.projectID)
            w.key("scope"); w.value(t.scope)
            w.key("issued_at"); w.value(rfc3339(millis: t.issuedAt))
            w.key("expires_at"); w.value(rfc3339(millis: t.expiresAt))
            w.endObject()
            return w.string
        }
    }

    /// `DELETE /api/v1/access-tokens/{id}`.
    public func revokeAccessToken(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.revokeAccessToken(id: c["id"])
        return Self.noContent
    }

    /// The service-account JSON as Google's console downloads it.
    static func serviceAccountJSON(_ a: ServiceAccount, projectID: String, privateKeyPEM: String, tokenURI: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("type"); w.value("service_account")
        w.key("project_id"); w.value(projectID)
        w.key("private_key_id"); w.value(a.privateKeyID)
        w.key("private_key"); w.value(privateKeyPEM)
        w.key("client_email"); w.value(a.clientEmail)
        w.key("client_id"); w.value(a.clientID)
        w.key("auth_uri"); w.value("https://accounts.google.com/o/oauth2/auth")
        w.key("token_uri"); w.value(tokenURI)
        w.key("auth_provider_x509_cert_url"); w.value("https://www.googleapis.com/oauth2/v1/certs")
        w.key("client_x509_cert_url"); w.value("https://www.googleapis.com/robot/v1/metadata/x509/" + FormBody.percentEncode(a.clientEmail))
        w.key("universe_domain"); w.value("googleapis.com")
        w.endObject()
        return w.string
    }

    /// A fixture's service account: `{"client_email","private_key_id","public_key"}`, or the
    /// whole service-account JSON (its private key gives the public one).
    static func serviceAccountSpec(_ b: Body, now: Int64) throws(ControlError) -> ServiceAccount {
        guard let email = try b.string("client_email"), !email.isEmpty else { throw .badRequest("\(b.path)client_email is required") }
        guard let keyID = try b.string("private_key_id"), !keyID.isEmpty else { throw .badRequest("\(b.path)private_key_id is required") }
        let publicKey: String
        if let pem = try b.string("private_key") {
            do {
                publicKey = try RSAPrivateKey(pem: pem).publicKeyPEM
            } catch {
                throw .badRequest("\(b.path)private_key is not an RSA private key in PEM: \(error.description)")
            }
        } else if let pem = try b.string("public_key") {
            do {
                _ = try RSAPublicKey(pem: pem)
            } catch {
                throw .badRequest("\(b.path)public_key is not an RSA public key in PEM: \(error.description)")
            }
            publicKey = pem
        } else {
            throw .badRequest("\(b.path)public_key or private_key is required")
        }
        return ServiceAccount(privateKeyID: keyID, clientEmail: email, clientID: try b.string("client_id") ?? "", publicKeyPEM: publicKey,
                              createdAt: now)
    }
}
