public import FCMCore

/// An app of a project (`apps[]` of `POST /api/v1/projects`).
public struct AppConfig: Sendable, Equatable {
    package var app: String
    package var platform: Platform
    /// `valid` | `missing` | `expired`: sends reaching an iOS device of an app whose credential is
    /// not valid fail with `InvalidApnsCredential`.
    package var apnsCredential: String

    public init(app: String, platform: Platform, apnsCredential: String) {
        self.app = app
        self.platform = platform
        self.apnsCredential = apnsCredential
    }
}

/// A fake device's platform.
public enum Platform: String, Sendable, Equatable {
    case android, ios, web
}

/// A Firebase project as the mock knows it: a sender id, its server keys and its apps.
public struct Project: Sendable, Equatable {
    public var senderID: String
    package var serverKeys: [String]
    package var apps: [AppConfig]
    package var createdAt: Int64
    /// The Firebase project id HTTP v1 paths name (`projects/{project_id}/messages:send`);
    /// `project-{sender_id}` unless given.
    public var projectID: String
    /// OAuth 2.0 service accounts: the keys whose JWTs stand for this project.
    public var serviceAccounts: [ServiceAccount] = []

    public init(senderID: String, serverKeys: [String], apps: [AppConfig], createdAt: Int64, projectID: String? = nil,
                serviceAccounts: [ServiceAccount] = []) {
        self.senderID = senderID
        self.serverKeys = serverKeys
        self.apps = apps
        self.createdAt = createdAt
        self.projectID = projectID ?? Project.defaultID(senderID: senderID)
        self.serviceAccounts = serviceAccounts
    }

    /// The project id of a project that was given none.
    package static func defaultID(senderID: String) -> String { "project-" + senderID }

    package func app(named name: String) -> AppConfig? { apps.first { $0.app == name } }
}

/// A service account of a project: its key's id (the JWT header's `kid`), its e-mail (the JWT's
/// `iss`) and its public key. The private half is shown once, when the mock makes the account.
public struct ServiceAccount: Sendable, Equatable {
    public var privateKeyID: String
    public var clientEmail: String
    public var clientID: String
    public var publicKeyPEM: String
    package var createdAt: Int64

    public init(privateKeyID: String, clientEmail: String, clientID: String, publicKeyPEM: String, createdAt: Int64) {
        self.privateKeyID = privateKeyID
        self.clientEmail = clientEmail
        self.clientID = clientID
        self.publicKeyPEM = publicKeyPEM
        self.createdAt = createdAt
    }
}

/// Lifecycle state of a registration token (docs/spec/control-api.md, device object `state`).
public enum DeviceState: String, Sendable, Equatable {
    case registered, unregistered, refreshed
}

/// A fake app instance holding one registration token. Kept in memory (the send path resolves
/// every recipient here) and mirrored in the store.
///
/// Kept small, since the engine holds one per device (10,000 fixture devices are 10,000 of them
/// in a dictionary of 16,384 places): what most devices leave at its default (an iOS
/// device's given APNs token, environment and expiry, a real client's link) lives in one shared,
/// immutable box, nil when all of it is the default. 112 bytes instead of 336.
public struct Device: Sendable, Equatable {
    /// Interned id: what message and delivery rows index instead of the 150-byte token.
    public var id: Int64
    public var token: String
    /// The Firebase installation id HTTP v1 may address it by (`fid`). A refreshed token's
    /// device and the device that replaced it share one: the installation is the same.
    package var fid: String
    public var senderID: String
    public var app: String
    package var createdAt: Int64
    public var lastSeenAt: Int64
    /// What most devices leave at its default (see the type's comment).
    private var rare: Boxed<DeviceRareFields>?
    /// For a refreshed token: the device that replaced it.
    package var canonicalID: Int64?
    public var platform: Platform
    public var state: DeviceState
    package var online: Bool
    // What it holds while offline lives in `EngineState.stored` only; the rendered `pending`
    // count is derived from there (`EngineState.render`), so it can never disagree with it.

    package init(id: Int64, token: String, fid: String, senderID: String, app: String, platform: Platform, state: DeviceState,
         canonicalID: Int64?, online: Bool, createdAt: Int64, lastSeenAt: Int64, givenAPNsToken: String? = nil,
         apnsEnvironment: APNsEnvironment = .sandbox, apnsExpiresAt: Int64? = nil, client: DeviceClient? = nil) {
        self.id = id
        self.token = token
        self.fid = fid
        self.senderID = senderID
        self.app = app
        self.platform = platform
        self.state = state
        self.canonicalID = canonicalID
        self.online = online
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.rare = Boxed(DeviceRareFields(givenAPNsToken: givenAPNsToken, apnsEnvironment: apnsEnvironment,
                                           apnsExpiresAt: apnsExpiresAt, client: client), unless: DeviceRareFields())
    }

    private var rareFields: DeviceRareFields {
        get { rare?.value ?? DeviceRareFields() }
        set { rare = Boxed(newValue, unless: DeviceRareFields()) }
    }
    /// An iOS device's APNs token when one was given (lowercase); nil: derived (`apnsToken`).
    package var givenAPNsToken: String? { get { rare?.value.givenAPNsToken } set { rareFields.givenAPNsToken = newValue } }
    /// An iOS device's APNs environment.
    public var apnsEnvironment: APNsEnvironment { get { rare?.value.apnsEnvironment ?? .sandbox } set { rareFields.apnsEnvironment = newValue } }
    /// When an iOS device's APNs token expires (mock clock, ms; nil: never): then `ExpiredToken`.
    public var apnsExpiresAt: Int64? { get { rare?.value.apnsExpiresAt } set { rareFields.apnsExpiresAt = newValue } }
    /// A real client's device (docs/real-clients.md): which client made it; nil for a fake one.
    /// Its `online` is then derived: connected, and not held by the control API.
    public var client: DeviceClient? { get { rare?.value.client } set { rareFields.client = newValue } }
}

/// A device's fields that most devices leave at their default (`Device`).
struct DeviceRareFields: Sendable, Equatable {
    var givenAPNsToken: String?
    var apnsEnvironment: APNsEnvironment = .sandbox
    var apnsExpiresAt: Int64?
    var client: DeviceClient?
}

/// A value most instances leave at its default, kept out of line: nil for the default, else one
/// immutable box that copies share (a change makes a new one).
final class Boxed<Value: Sendable & Equatable>: Sendable, Equatable {
    let value: Value

    private init(_ value: Value) { self.value = value }

    /// A box for `value`; nil when it is `defaultValue`.
    convenience init?(_ value: Value, unless defaultValue: Value) {
        if value == defaultValue { return nil }
        self.init(value)
    }

    static func == (a: Boxed, b: Boxed) -> Bool { a === b || a.value == b.value }
}

extension Device {
    /// An iOS device's APNs device token: the one given, else derived from its FCM token; nil
    /// on other platforms.
    package var apnsToken: String? {
        guard platform == .ios else { return nil }
        return givenAPNsToken ?? APNsDeviceToken.derived(from: token)
    }
}

/// How a send was made.
public enum Transport: String, Sendable, CaseIterable {
    case http
    /// FCM's HTTP v1 API.
    case httpV1 = "http_v1"
    case xmpp
    /// Apple's provider API.
    case apns
    /// The Web Push protocol (RFC 8030).
    case webpush
    /// The write of a delivery on a Firefox's autopush connection: faults only (`when.transport`);
    /// no send is made through it.
    case autopush
    /// The write of a delivery on a GCM client's MCS connection: faults only.
    case mcs
}

/// What a send does with a well-formed token nobody registered (`--unknown-tokens`).
public enum UnknownTokenPolicy: String, Sendable {
    case register, reject
}

/// A device's subscription to a topic.
public struct Subscription: Sendable, Equatable {
    /// Most topics one device may subscribe to (the Instance ID API's `TOO_MANY_TOPICS`).
    public static let maxTopicsPerDevice = 2000
    /// The name as first given (matching ignores case).
    public var name: String
    public var addedAt: Int64

    package init(name: String, addedAt: Int64) {
        self.name = name
        self.addedAt = addedAt
    }
}

/// Firebase installation ids (docs/spec/fcm-v1.md section 1): 22 characters of base64url, the
/// first one `c`, `d`, `e` or `f` (the installation SDK's first four bits are 0111).
package enum InstallationID {
    static let length = 22
    private static let firstCharacters: [UInt8] = Array("cdef".utf8)

    /// A new random fid, drawn with `rng`.
    package static func make(using rng: inout some RandomNumberGenerator) -> String {
        randomString(1, from: firstCharacters, using: &rng) + randomString(length - 1, from: RandomAlphabet.base64URL, using: &rng)
    }

    /// Whether `s` is shaped like an fid (the v1 parser's rule).
    package static func isWellFormed(_ s: String) -> Bool { isWellFormedInstallationID(s) }

    package static let malformedMessage = "fid must be 22 characters of base64url (A-Z a-z 0-9 - _) starting with c, d, e or f"
}
