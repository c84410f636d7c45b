/// What a checkin says of the client (Chromium's `chrome_build`), kept on it.
public struct CheckinInfo: Sendable, Equatable {
    public var platform: String?
    package var chromeVersion: String?
    package var channel: String?
    package var userAgent: String?

    public init(platform: String?, chromeVersion: String?, channel: String?, userAgent: String?) {
        self.platform = platform
        self.chromeVersion = chromeVersion
        self.channel = channel
        self.userAgent = userAgent
    }
}

/// A register3 request, read by the room.
public struct GCMRegistration: Sendable {
    package var androidID: String
    public var app: String
    public var subtype: String?
    public var sender: String
    /// The sender is a VAPID key (base64url, padding dropped), not a sender id.
    package var senderIsKey: Bool
    /// An Instance ID request's `appid`.
    package var instanceID: String?
    /// A Web Push (`wp:`) subtype's origin: the device's `app`.
    package var webOrigin: String?

    public init(androidID: String, app: String, subtype: String?, sender: String, senderIsKey: Bool, instanceID: String?,
                webOrigin: String?) {
        self.androidID = androidID
        self.app = app
        self.subtype = subtype
        self.sender = sender
        self.senderIsKey = senderIsKey
        self.instanceID = instanceID
        self.webOrigin = webOrigin
    }
}

/// An FCM registration's web part, as the client sent it (base64url, padding dropped).
public struct FCMWebRegistration: Sendable, Equatable {
    package var applicationPubKey: String?
    package var auth: String
    public var endpoint: String
    package var p256dh: String
    /// The `web` object as the client sent it (JSON), which `GET` answers.
    package var asSent: String?

    public init(applicationPubKey: String?, auth: String, endpoint: String, p256dh: String, asSent: String? = nil) {
        self.applicationPubKey = applicationPubKey
        self.auth = auth
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.asSent = asSent
    }
}

/// The tokens an installation is given, made by the FCM registrations room in Google's form: a
/// refresh token, an auth token and how long the auth token lives.
public struct InstallationTokens: Sendable {
    package var refresh: String
    package var auth: String
    package var authSeconds: Int64

    public init(refresh: String, auth: String, authSeconds: Int64) {
        self.refresh = refresh
        self.auth = auth
        self.authSeconds = authSeconds
    }
}

/// A field of an FCM registration that the engine finds wrong, for the room to name.
public enum WebRegistrationField: Sendable, Equatable {
    /// The browser's public key is none.
    case p256dh
    /// The auth secret is none.
    case auth
    /// The application server key is none.
    case applicationPubKey
    /// No subscription the mock serves has the endpoint.
    case endpoint
}

/// Why an installations or registrations call is refused, for the room to word in Google's
/// `google.rpc.Status` shape.
public enum FirebaseRefusal: Error, Sendable, Equatable {
    /// No such project.
    case unknownProject
    /// A field of the registration is wrong.
    case invalidField(WebRegistrationField)
    /// The installation's auth token is missing, unknown or expired (the room words it as
    /// Google does).
    case missingAuthToken
    /// The refresh token is not the fid's (said in the mock's words).
    case unauthenticated(String)
    /// An installation of another project.
    case permissionDenied(String)
    /// No such registration for this installation (the room words it as Google does).
    case notFound
    case failed
}
