import FCMCore
/// Apple's APNs reasons (docs/spec/apns.md, "Handling notification responses from APNs"): each
/// answers with one fixed HTTP status and the body `{"reason":"<Reason>"}`, plus `timestamp`
/// (milliseconds since the epoch) on a 410 `Unregistered`.
public enum APNsReason: String, Sendable, CaseIterable {
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case idleTimeout = "IdleTimeout"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    case badCertificate = "BadCertificate"
    case badCertificateEnvironment = "BadCertificateEnvironment"
    case expiredProviderToken = "ExpiredProviderToken"
    case forbidden = "Forbidden"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    case expiredToken = "ExpiredToken"
    case unregistered = "Unregistered"
    case payloadTooLarge = "PayloadTooLarge"
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    /// The HTTP status Apple answers this reason with.
    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
             .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
             .missingTopic, .payloadEmpty, .topicDisallowed:
            return 400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
             .missingProviderToken:
            return 403
        case .badPath: return 404
        case .methodNotAllowed: return 405
        case .expiredToken, .unregistered: return 410
        case .payloadTooLarge: return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: return 429
        case .internalServerError: return 500
        case .serviceUnavailable, .shutdown: return 503
        }
    }

    /// The reason Apple gives for a bare HTTP status (a fault's `then: {"status":N}`): its own
    /// reason for 429, 500 and 503, `InternalServerError` for any other.
    public static func forStatus(_ status: Int) -> APNsReason {
        switch status {
        case 429: return .tooManyRequests
        case 503: return .serviceUnavailable
        default: return .internalServerError
        }
    }
}

/// A refused APNs request: the reason, the `timestamp` of a 410 `Unregistered`, and why in the
/// mock's words (kept on the record and logged, never sent: Apple's body is the reason alone).
public struct APNsError: Error, Sendable, Equatable {
    public var reason: APNsReason
    /// Milliseconds since the epoch when the token became invalid (`Unregistered` only).
    public var timestamp: Int64?
    public var detail: String

    public init(_ reason: APNsReason, _ detail: String, timestamp: Int64? = nil) {
        self.reason = reason
        self.detail = detail
        self.timestamp = timestamp
    }

    public var status: Int { reason.status }

    /// Exactly `{"reason":"…"}`, or `{"reason":"Unregistered","timestamp":N}`.
    public var body: String {
        var w = JSONWriter(capacity: 48)
        w.beginObject()
        w.key(literal: "reason"); w.value(reason.rawValue)
        if let timestamp { w.key(literal: "timestamp"); w.value(timestamp) }
        w.endObject()
        return w.string
    }
}
