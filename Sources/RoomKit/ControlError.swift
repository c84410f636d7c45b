import FCMCore
public import FCMEngine
public import FCMModel

/// A control-API failure, in the documented shape `{"error":{"code":…,"message":…}}`: the
/// engine's refusal (`EngineError`), answered with the HTTP status of its kind.
public typealias ControlError = EngineError

extension EngineError.Code {
    /// The HTTP status the control API answers this kind with.
    public var status: Int {
        switch self {
        case .badRequest: 400
        case .unauthorized: 401
        case .notFound: 404
        case .conflict: 409
        case .payloadTooLarge: 413
        case .internal: 500
        case .unavailable: 503
        }
    }
}

extension EngineError {
    public var status: Int { code.status }
}

extension Render {
    /// `{"error":{"code":…,"message":…}}`.
    public static func error(_ e: ControlError) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("error"); w.beginObject()
        w.key("code"); w.value(e.code.rawValue)
        w.key("message"); w.value(e.message)
        w.endObject()
        w.endObject()
        return w.string
    }
}
