import FCMCore

/// FCM's error codes in an XMPP nack: the CCS room's wire form of them.
extension FCMErrorCode {
    /// The code an XMPP nack carries for this error (seeds, XMPP Table 4).
    var xmppCode: String {
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
}
