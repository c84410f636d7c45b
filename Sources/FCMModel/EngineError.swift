/// Why the engine refused a request: a kind and a sentence for the user. The transports choose
/// the wire form (the control API answers `{"error":{"code":…,"message":…}}` with an HTTP status
/// per kind, in RoomKit's ControlError.swift); the engine never does.
public struct EngineError: Error, Sendable, Equatable {
    /// The kinds of refusal; a raw value is the kind's stable name (the control API's `code`).
    public enum Code: String, Sendable, Equatable, CaseIterable {
        case badRequest = "bad_request"
        case unauthorized = "unauthorized"
        case notFound = "not_found"
        case conflict = "conflict"
        case payloadTooLarge = "payload_too_large"
        case `internal` = "internal"
        /// A bounded resource is taken up (every event-stream reader's place); trying later works.
        case unavailable = "unavailable"
    }

    public var code: Code
    public var message: String

    init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public static func badRequest(_ m: String) -> EngineError { EngineError(code: .badRequest, message: m) }
    public static func unauthorized(_ m: String) -> EngineError { EngineError(code: .unauthorized, message: m) }
    public static func notFound(_ m: String) -> EngineError { EngineError(code: .notFound, message: m) }
    package static func conflict(_ m: String) -> EngineError { EngineError(code: .conflict, message: m) }
    public static func payloadTooLarge(_ m: String) -> EngineError { EngineError(code: .payloadTooLarge, message: m) }
    public static func `internal`(_ m: String) -> EngineError { EngineError(code: .internal, message: m) }
    public static func unavailable(_ m: String) -> EngineError { EngineError(code: .unavailable, message: m) }
}

/// Something a tester should be able to read in the log that the wire answer does not say (why
/// a credential was refused, a hint for a body that was read in the wrong format): a message and
/// dotted metadata, as `Log` takes them. The engine has no logger of its own; the application
/// forwards these to its log (`Engine.onNotice`).
public struct EngineNotice: Sendable {
    public var message: String
    public var fields: [(String, String)]

    package init(message: String, fields: [(String, String)]) {
        self.message = message
        self.fields = fields
    }
}
