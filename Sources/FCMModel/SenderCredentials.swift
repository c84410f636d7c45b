public import FCMCore

/// An APNs team: the apps (bundle ids) its keys may send to.
public struct APNsTeam: Sendable, Equatable {
    public let teamID: String
    public var bundleIDs: [String]
    public let createdAt: Int64

    package init(teamID: String, bundleIDs: [String], createdAt: Int64) {
        self.teamID = teamID
        self.bundleIDs = bundleIDs
        self.createdAt = createdAt
    }
}

extension APNsTeam {
    /// Whether `id` is shaped as Apple's team and key ids are: 10 uppercase letters or digits.
    public static func isAppleID(_ id: String) -> Bool {
        id.utf8.count == 10 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }
    }

    /// Refuses a team or key id (`what` names it) not shaped as Apple's.
    public static func checkAppleID(_ id: String, what: String) throws(EngineError) {
        guard isAppleID(id) else { throw .badRequest("\(what) must be 10 uppercase letters or digits, as Apple's are") }
    }

    /// A bundle id: 1 to 255 printable ASCII characters, no space, '/' or '"'.
    public static func checkBundleID(_ b: String) throws(EngineError) {
        guard !b.isEmpty, b.utf8.count <= 255,
            b.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\"") })
        else { throw .badRequest("a bundle id is 1 to 255 printable ASCII characters without spaces or '/'") }
    }
}

/// An APNs signing key: its public half. The mock made it (the private one was shown once), or
/// it was imported (`POST /api/v1/apns/keys` with `public_key_pem`, a fixture's `apns.teams`):
/// its private half is the sender's.
public struct APNsKey: Sendable, Equatable {
    public let keyID: String
    public let teamID: String
    public let publicKeyPEM: String
    public let createdAt: Int64

    package init(keyID: String, teamID: String, publicKeyPEM: String, createdAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKeyPEM = publicKeyPEM
        self.createdAt = createdAt
    }
}

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

    /// Whether a push to `topic` (of the app `bundleID`) is allowed: the topic is listed, or its
    /// app is (Apple's certificates list the app, `.voip` and `.complication`; the other push
    /// types' topics are made from the app's).
    public func allows(topic: String, bundleID: String) -> Bool {
        topics.contains(topic) || apps.contains(bundleID)
    }
}

/// An access token the token endpoint issued.
public struct AccessToken: Sendable, Equatable {
    /// 12 hex characters: how the control API names it without showing the token.
    public let id: String
    public let token: String
    public let clientEmail: String
    public let privateKeyID: String
    public let senderID: String
    public let scope: String
    public let issuedAt: Int64
    public let expiresAt: Int64

    package init(id: String, token: String, clientEmail: String, privateKeyID: String, senderID: String,
                 scope: String, issuedAt: Int64, expiresAt: Int64) {
        self.id = id
        self.token = token
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.senderID = senderID
        self.scope = scope
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// What an issued access token is worth now.
public enum IssuedToken: Sendable {
    /// Not a token the endpoint issued (maybe a self-signed JWT).
    case unknown
    /// Expired, or its key, account or project is gone.
    case invalid
    /// Good for this sender id.
    case valid(String)
}
