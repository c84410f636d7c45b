import FCMCore
// The Web Push endpoint's refusals (docs/spec/webpush.md section 2): each answers a JSON body
// `{"code","errno","error","message"}`, the shape Mozilla's autopush uses and libraries print as
// the failure text. The errno values are autopush's own (its docs/src/errors.md and
// autoendpoint's error kinds); where autopush has none for a rule the mock adds, the nearest is
// named in the table.

/// Why the push service refused a request.
public enum WebPushErrorKind: String, Sendable, CaseIterable {
    /// No `TTL` header.
    case missingTTL
    /// `TTL` not a decimal integer, or negative.
    case invalidTTL
    /// A body without `aes128gcm` or `aesgcm` as its `Content-Encoding`.
    case invalidEncoding
    /// `Urgency` other than `very-low`, `low`, `normal`, `high`.
    case invalidUrgency
    /// `Topic` over 32 characters or outside the base64url alphabet.
    case invalidTopic
    /// A body over 4,096 bytes.
    case payloadTooLarge
    /// No subscription has this id.
    case unknownSubscription
    /// The subscription was ended (`POST /api/v1/devices/{token}/web-push/expire`).
    case expiredSubscription
    /// The subscription's device was uninstalled or deleted.
    case unregistered
    /// A VAPID `Authorization` that is missing where required, malformed, or does not verify.
    case unauthorized
    /// A VAPID key that verifies but is not the subscription's `application_server_key`.
    case forbidden
    /// `DELETE /m/{id}` of a message not held (delivered, unknown).
    case messageNotFound
    /// A method the path does not take.
    case methodNotAllowed
    /// A status a fault answers with (its `then.status`).
    case fault

    /// The HTTP status (a fault's own status is given with it).
    public var status: Int {
        switch self {
        case .missingTTL, .invalidTTL, .invalidEncoding, .invalidUrgency, .invalidTopic: return 400
        case .unauthorized: return 401
        case .forbidden: return 403
        case .unknownSubscription, .messageNotFound: return 404
        case .methodNotAllowed: return 405
        case .expiredSubscription, .unregistered: return 410
        case .payloadTooLarge: return 413
        case .fault: return 500
        }
    }

    /// autopush's errno: 102 invalid URL, 103 expired URL, 104 payload too large, 106 invalid
    /// subscription, 109 invalid authentication, 110 invalid crypto (encoding), 111 missing TTL,
    /// 112 invalid TTL, 113 invalid Topic, 114 invalid header value (autopush's code for a TTL
    /// out of range; here an `Urgency` it does not know), 999 unknown error.
    public var errno: Int {
        switch self {
        case .missingTTL: return 111
        case .invalidTTL: return 112
        case .invalidEncoding: return 110
        case .invalidUrgency: return 114
        case .invalidTopic: return 113
        case .payloadTooLarge: return 104
        case .unknownSubscription, .messageNotFound: return 102
        case .expiredSubscription: return 103
        case .unregistered: return 106
        case .unauthorized, .forbidden: return 109
        case .methodNotAllowed, .fault: return 999
        }
    }
}

/// A refusal: its kind, its status and the message for people.
public struct WebPushError: Error, Sendable, Equatable, CustomStringConvertible {
    public let kind: WebPushErrorKind
    public let status: Int
    public let message: String

    public init(_ kind: WebPushErrorKind, _ message: String) {
        self.kind = kind
        self.status = kind.status
        self.message = message
    }

    /// The answer a fault's `then.status` gives: that status, autopush's errno for it (201
    /// "retry with back-off" for 429 and 503, 999 otherwise).
    public static func fault(status: Int, _ message: String) -> WebPushError {
        WebPushError(kind: .fault, status: status, message: message)
    }

    private init(kind: WebPushErrorKind, status: Int, message: String) {
        self.kind = kind
        self.status = status
        self.message = message
    }

    public var errno: Int {
        if kind == .fault { return status == 429 || status == 503 ? 201 : 999 }
        return kind.errno
    }

    /// Exactly `{"code":<status>,"errno":<n>,"error":"<reason phrase>","message":"<message>"}`.
    public var body: String {
        var w = JSONWriter(capacity: 96 + message.utf8.count)
        w.beginObject()
        w.key("code"); w.value(status)
        w.key("errno"); w.value(errno)
        w.key("error"); w.value(Self.reasonPhrase(status))
        w.key("message"); w.value(message)
        w.endObject()
        return w.string
    }

    public var description: String { "\(status) \(kind.rawValue): \(message)" }

    /// The reason phrase of `status` (RFC 9110's), as autopush's `error` member carries it.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 413: return "Payload Too Large"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Error"
        }
    }
}
