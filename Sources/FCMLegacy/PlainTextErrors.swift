import FCMCore

/// FCM's error codes in the legacy plain-text format: the legacy room's wire form of them.
extension FCMErrorCode {
    /// Whether a plain-text request answers this error with an HTTP status instead of `Error=`:
    /// the plain format has no way to say "retry later" in the body (docs/spec/fcm-legacy.md section 1).
    var plainTextStatus: Int? {
        switch self {
        case .unavailable: return 503
        case .internalServerError: return 500
        default: return nil
        }
    }
}
