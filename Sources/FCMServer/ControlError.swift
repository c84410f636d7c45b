/// A control-API failure, in the documented shape `{"error":{"code":…,"message":…}}`.
public struct ControlError: Error, Sendable, Equatable {
    /// The kinds of failure: each one's wire string (its raw value) and HTTP status.
    public enum Code: String, Sendable, Equatable, CaseIterable {
        case badRequest = "bad_request"
        case unauthorized = "unauthorized"
        case notFound = "not_found"
        case conflict = "conflict"
        case payloadTooLarge = "payload_too_large"
        case `internal` = "internal"

        public var status: Int {
            switch self {
            case .badRequest: 400
            case .unauthorized: 401
            case .notFound: 404
            case .conflict: 409
            case .payloadTooLarge: 413
            case .internal: 500
            }
        }
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var status: Int { code.status }

    public static func badRequest(_ m: String) -> ControlError { ControlError(code: .badRequest, message: m) }
    public static func unauthorized(_ m: String) -> ControlError { ControlError(code: .unauthorized, message: m) }
    public static func notFound(_ m: String) -> ControlError { ControlError(code: .notFound, message: m) }
    public static func conflict(_ m: String) -> ControlError { ControlError(code: .conflict, message: m) }
    public static func payloadTooLarge(_ m: String) -> ControlError { ControlError(code: .payloadTooLarge, message: m) }
    public static func `internal`(_ m: String) -> ControlError { ControlError(code: .internal, message: m) }
}
