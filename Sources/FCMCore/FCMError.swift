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

    /// The code an XMPP nack carries for this error (seeds, XMPP Table 4).
    public var xmppCode: String {
        switch self {
        case .missingRegistration, .invalidParameters, .messageTooBig, .invalidDataKey, .invalidTtl,
            .invalidPackageName:
            return "INVALID_JSON"
        case .invalidRegistration: return "BAD_REGISTRATION"
        case .notRegistered: return "DEVICE_UNREGISTERED"
        case .mismatchSenderId: return "SENDER_ID_MISMATCH"
        case .unavailable: return "SERVICE_UNAVAILABLE"
        case .internalServerError: return "INTERNAL_SERVER_ERROR"
        case .deviceMessageRateExceeded: return "DEVICE_MESSAGE_RATE_EXCEEDED"
        case .topicsMessageRateExceeded: return "TOPICS_MESSAGE_RATE_EXCEEDED"
        case .invalidApnsCredential: return "INVALID_APNS_CREDENTIAL"
        case .authenticationFailed: return "AUTHENTICATION_FAILED"
        }
    }

    /// A code the HTTP protocol does not have (its Table 9 has no row for it).
    public var isXMPPOnly: Bool { self == .authenticationFailed }

    /// Whether a plain-text request answers this error with an HTTP status instead of `Error=`:
    /// the plain format has no way to say "retry later" in the body (docs/spec/fcm-legacy.md section 1).
    public var plainTextStatus: Int? {
        switch self {
        case .unavailable: return 503
        case .internalServerError: return 500
        default: return nil
        }
    }
}
