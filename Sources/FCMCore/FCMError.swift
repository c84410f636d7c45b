/// An error code of the legacy protocol, as named in the seeds' Table 9 (HTTP) and Table 4 (XMPP).
///
/// This is the one place that maps an internal failure to both wire forms, so the HTTP and XMPP
/// listeners can never disagree about what a failure is called.
public enum FCMErrorCode: String, Sendable, CaseIterable, Codable {
    case missingRegistration = "MissingRegistration"
    case invalidRegistration = "InvalidRegistration"
    case notRegistered = "NotRegistered"
    case invalidPackageName = "InvalidPackageName"
    case mismatchSenderId = "MismatchSenderId"
    case invalidParameters = "InvalidParameters"
    case messageTooBig = "MessageTooBig"
    case invalidDataKey = "InvalidDataKey"
    case invalidTtl = "InvalidTtl"
    case unavailable = "Unavailable"
    case internalServerError = "InternalServerError"
    case deviceMessageRateExceeded = "DeviceMessageRateExceeded"
    case topicsMessageRateExceeded = "TopicsMessageRateExceeded"
    case invalidApnsCredential = "InvalidApnsCredential"
    /// XMPP only (Table 4: FCM could not authenticate with the external push service); reached
    /// through an XMPP fault.
    case authenticationFailed = "AuthenticationFailed"

    /// A code the HTTP protocol does not have (its Table 9 has no row for it).
    public var isXMPPOnly: Bool { self == .authenticationFailed }
}
