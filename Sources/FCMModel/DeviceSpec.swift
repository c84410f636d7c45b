public import FCMCore

/// What `POST /api/v1/devices` (and a fixture's `devices[]`) asks for.
///
/// Kept small (the start-up fixtures' devices are kept for reset, 10,000 of them in the bench):
/// what a spec seldom gives (fid, APNs token and environment, VAPID key) lives in one immutable
/// box, nil when none is given. 64 bytes instead of 112.
public struct DeviceSpec: Sendable, Equatable {
    public var token: String?
    public var senderID: String
    public var app: String?
    private var rare: Boxed<DeviceSpecRareFields>?
    public var platform: Platform
    package var online: Bool

    public init(token: String?, senderID: String, app: String?, platform: Platform, online: Bool, fid: String? = nil,
                apnsToken: String? = nil, apnsEnvironment: APNsEnvironment? = nil, applicationServerKey: String? = nil) {
        self.token = token
        self.senderID = senderID
        self.app = app
        self.platform = platform
        self.online = online
        self.rare = Boxed(DeviceSpecRareFields(fid: fid, apnsToken: apnsToken, apnsEnvironment: apnsEnvironment,
                                               applicationServerKey: applicationServerKey), unless: DeviceSpecRareFields())
    }

    private var rareFields: DeviceSpecRareFields {
        get { rare?.value ?? DeviceSpecRareFields() }
        set { rare = Boxed(newValue, unless: DeviceSpecRareFields()) }
    }
    /// The Firebase installation id; generated when not given.
    package var fid: String? { get { rare?.value.fid } set { rareFields.fid = newValue } }
    /// An iOS device's APNs token (64 to 200 hex digits); derived from its FCM token when not given.
    package var apnsToken: String? { get { rare?.value.apnsToken } set { rareFields.apnsToken = newValue } }
    /// An iOS device's APNs environment; sandbox when not given.
    package var apnsEnvironment: APNsEnvironment? { get { rare?.value.apnsEnvironment } set { rareFields.apnsEnvironment = newValue } }
    /// A web device's VAPID key (base64url P-256 point): its subscription takes pushes signed by it only.
    package var applicationServerKey: String? { get { rare?.value.applicationServerKey } set { rareFields.applicationServerKey = newValue } }
    /// `unregistered` for an uninstalled app's device (a fixture's, kept so by a reset); else registered.
    public var state: DeviceState { get { rare?.value.state ?? .registered } set { rareFields.state = newValue } }
}

/// What a `DeviceSpec` seldom gives.
struct DeviceSpecRareFields: Sendable, Equatable {
    var fid: String?
    var apnsToken: String?
    var apnsEnvironment: APNsEnvironment?
    var applicationServerKey: String?
    var state: DeviceState = .registered
}
