public import FCMCore

/// An HTTP v1 error answer: Google's `google.rpc.Status` (docs/spec/fcm-v1.md section 2),
/// `{"error":{"code":N,"message":"…","status":"…","details":[…]}}`, with an FcmError detail
/// where the spec's table names one and a BadRequest detail when fields were at fault. The one
/// place that turns the engine's refusals, send results and faults into that shape.
public struct V1Error: Error, Sendable, Equatable {
    public var code: Int
    public var message: String
    /// The `google.rpc.Code` name (`NOT_FOUND`, …).
    public var status: String
    /// The FcmError `errorCode` detail (`UNREGISTERED`, …), if any.
    public var fcmError: String?
    public var violations: [FieldViolation] = []
    /// Seconds for `Retry-After`.
    public var retryAfter: Int64?
    /// `WWW-Authenticate`, on the 401s of a missing or refused credential.
    public var challenge = false
    /// Why, in the mock's words, where Google's `message` is one fixed text for many causes (a
    /// 401, a 403): kept as the record's `error_detail` and logged, never sent.
    public var detail: String?

    public init(code: Int, message: String, status: String, fcmError: String? = nil, violations: [FieldViolation] = [],
                retryAfter: Int64? = nil, challenge: Bool = false) {
        self.code = code
        self.message = message
        self.status = status
        self.fcmError = fcmError
        self.violations = violations
        self.retryAfter = retryAfter
        self.challenge = challenge
    }

    /// What a record of the refused request keeps as its `error`: the FcmError code, else the status.
    public var recordedError: String { fcmError ?? status }

    /// What a record of the refused request keeps as its `error_detail`.
    public var recordedDetail: String { detail ?? message }

    /// The same answer, with why it was given for the record and the log.
    public func because(_ why: String) -> V1Error {
        var e = self
        e.detail = why
        return e
    }

    /// The answer's bytes, exactly in the order Google writes them.
    public var body: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("error"); w.beginObject()
        w.key("code"); w.value(code)
        w.key("message"); w.value(message)
        w.key("status"); w.value(status)
        if fcmError != nil || !violations.isEmpty {
            w.key("details"); w.beginArray()
            if let fcmError {
                w.beginObject()
                w.key("@type"); w.value("type.googleapis.com/google.firebase.fcm.v1.FcmError")
                w.key("errorCode"); w.value(fcmError)
                w.endObject()
            }
            if !violations.isEmpty {
                w.beginObject()
                w.key("@type"); w.value("type.googleapis.com/google.rpc.BadRequest")
                w.key("fieldViolations"); w.beginArray()
                for v in violations {
                    w.beginObject()
                    w.key("field"); w.value(v.field)
                    w.key("description"); w.value(v.description)
                    w.endObject()
                }
                w.endArray()
                w.endObject()
            }
            w.endArray()
        }
        w.endObject()
        w.endObject()
        return w.string
    }
}

extension V1Error {
    /// No credential, or one that is not (or no longer) an access token or a JWT of a known key.
    public static let unauthenticated = V1Error(
        code: 401,
        message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        status: "UNAUTHENTICATED", challenge: true)

    /// A valid credential of another project than the path's.
    public static func permissionDenied(project: String) -> V1Error {
        V1Error(code: 403,
                message: "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
                status: "PERMISSION_DENIED")
    }

    /// An unknown project, or a path under `/v1/` that names nothing.
    public static let notFound = V1Error(code: 404, message: "Requested entity was not found.", status: "NOT_FOUND")

    /// A method the path does not take (the API has no rpc code for it: UNIMPLEMENTED, the
    /// nearest in meaning, with HTTP's own 405).
    public static func methodNotAllowed(_ method: String, allowed: String) -> V1Error {
        V1Error(code: 405, message: "Method \(method) is not allowed here: use \(allowed).", status: "UNIMPLEMENTED")
    }

    /// A body over the server's limit, as Google's front end words it.
    public static func bodyTooLarge(limit: Int) -> V1Error {
        V1Error(code: 400, message: "Request payload size exceeds the limit: \(limit) bytes.", status: "INVALID_ARGUMENT")
    }

    /// A rule of the message broken: FcmError INVALID_ARGUMENT and the fields at fault.
    public static func invalidArgument(_ message: String, _ violations: [FieldViolation]) -> V1Error {
        V1Error(code: 400, message: message, status: "INVALID_ARGUMENT", fcmError: "INVALID_ARGUMENT", violations: violations)
    }

    /// A body that is not the Message JSON: no FcmError detail.
    public static func invalidPayload(_ message: String, _ violations: [FieldViolation]) -> V1Error {
        V1Error(code: 400, message: message, status: "INVALID_ARGUMENT", violations: violations)
    }

    /// Seconds a 503 asks clients to wait when its fault named none.
    public static let defaultRetryAfter: Int64 = 10

    /// A status fault's answer: 503 UNAVAILABLE, 500 INTERNAL, 429 QUOTA_EXCEEDED, any other
    /// status with its google.rpc code and no FcmError; each with `Retry-After` when the fault
    /// sets `retry_after_s` (as the legacy answer does), and a 503 always (10 s by default).
    public static func fault(status code: Int, retryAfter: Int64?) -> V1Error {
        switch code {
        case 503: return unavailable(retryAfter: retryAfter ?? defaultRetryAfter)
        case 500:
            var e = internalError
            e.retryAfter = retryAfter
            return e
        case 429: return quotaExceeded("Quota exceeded for the project's message rate.", retryAfter: retryAfter)
        default:
            return V1Error(code: code, message: "The service answered HTTP \(code).", status: rpcStatus(code), retryAfter: retryAfter)
        }
    }

    public static func unavailable(retryAfter: Int64) -> V1Error {
        V1Error(code: 503, message: "The service is currently unavailable.", status: "UNAVAILABLE", fcmError: "UNAVAILABLE",
                retryAfter: retryAfter)
    }

    public static let internalError = V1Error(code: 500, message: "Internal error encountered.", status: "INTERNAL", fcmError: "INTERNAL")

    public static func quotaExceeded(_ message: String, retryAfter: Int64? = nil) -> V1Error {
        V1Error(code: 429, message: message, status: "RESOURCE_EXHAUSTED", fcmError: "QUOTA_EXCEEDED", retryAfter: retryAfter)
    }

    /// The google.rpc code HTTP `code` stands for (google/rpc/code.proto's mapping); a status
    /// it does not name is FAILED_PRECONDITION (4xx) or UNKNOWN (5xx).
    public static func rpcStatus(_ code: Int) -> String {
        switch code {
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 409: return "ABORTED"
        case 416: return "OUT_OF_RANGE"
        case 429: return "RESOURCE_EXHAUSTED"
        case 499: return "CANCELLED"
        case 500: return "INTERNAL"
        case 501: return "UNIMPLEMENTED"
        case 503: return "UNAVAILABLE"
        case 504: return "DEADLINE_EXCEEDED"
        default: return code < 500 ? "FAILED_PRECONDITION" : "UNKNOWN"
        }
    }

    /// A recipient's legacy error as v1 answers it (the spec's table). `targetField` is the
    /// message's target field (`message.token`), named by an invalid token's violation.
    public init(_ e: FCMErrorCode, targetField: String = "message.token") {
        switch e {
        case .notRegistered:
            self = V1Error(code: 404, message: "Requested entity was not found.", status: "NOT_FOUND", fcmError: "UNREGISTERED")
        case .mismatchSenderId:
            self = V1Error(code: 403, message: "SenderId mismatch", status: "PERMISSION_DENIED", fcmError: "SENDER_ID_MISMATCH")
        case .invalidApnsCredential, .authenticationFailed:
            self = V1Error(code: 401, message: "Auth error from APNS or Web Push Service", status: "UNAUTHENTICATED",
                           fcmError: "THIRD_PARTY_AUTH_ERROR")
        case .invalidRegistration:
            // Worded as the parser words a malformed token.
            self = .invalidArgument("The registration token is not a valid FCM registration token",
                                    [FieldViolation(field: targetField, description: "Invalid registration token")])
        case .invalidPackageName:
            let text = "The restricted_package_name does not match the app of the registration token"
            self = .invalidArgument(text, [FieldViolation(field: "message.android.restricted_package_name", description: text)])
        case .deviceMessageRateExceeded:
            self = .quotaExceeded("Message rate exceeded for this device.")
        case .topicsMessageRateExceeded:
            self = .quotaExceeded("Message rate exceeded for this topic.")
        case .unavailable:
            self = .unavailable(retryAfter: Self.defaultRetryAfter)
        case .internalServerError:
            self = .internalError
        case .missingRegistration, .invalidParameters, .messageTooBig, .invalidDataKey, .invalidTtl:
            // The v1 parser refuses these before a send; kept for completeness of the mapping.
            self = .invalidArgument("Request contains an invalid argument.", [])
        }
    }
}
