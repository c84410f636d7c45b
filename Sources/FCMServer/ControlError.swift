/// A control-API failure, in the documented shape `{"error":{"code":…,"message":…}}`.
public struct ControlError: Error, Sendable, Equatable {
    /// `bad_request`, `unauthorized`, `not_found`, `conflict`, `payload_too_large`, `internal`.
    public var code: String
    public var message: String

    public var status: Int {
        switch code {
        case "bad_request": return 400
        case "unauthorized": return 401
        case "not_found": return 404
        case "conflict": return 409
        case "method_not_allowed": return 405
        case "payload_too_large": return 413
        default: return 500
        }
    }

    public static func badRequest(_ m: String) -> ControlError { ControlError(code: "bad_request", message: m) }
    public static func notFound(_ m: String) -> ControlError { ControlError(code: "not_found", message: m) }
    public static func conflict(_ m: String) -> ControlError { ControlError(code: "conflict", message: m) }
    public static func `internal`(_ m: String) -> ControlError { ControlError(code: "internal", message: m) }
}
