public import FCMCore
// What the HTTP v1 API adds to a message (docs/spec/fcm-v1.md sections 1, 2 and 5): the platform
// blocks, the outcome of decoding a `messages:send` body, and the field violations its errors name.
// V1Parser.swift decodes and validates a body into these types.

/// One `google.rpc.BadRequest` field violation: the field's path (`message.android.ttl`) and why.
public struct FieldViolation: Sendable, Equatable {
    public var field: String
    public var description: String

    public init(field: String, description: String) {
        self.field = field
        self.description = description
    }
}

/// A v1 message that passed every rule, ready for the shared send path.
public struct V1Send: Sendable {
    /// The message as the legacy paths would have built it: target `.token`, `.topic` (bare
    /// name) or `.condition`; `data`/`notification` from the message (nil when absent or
    /// empty); options from the android block (`collapse_key`, `priority`, `ttl` in whole
    /// seconds, the fraction dropped, `restricted_package_name`); `platforms` set;
    /// `options.dryRun` set by `validate_only`; format `.json`. An `fid` target is `.token(fid)`
    /// with `byFID`.
    public var request: SendRequest
    /// The target was an `fid` (a Firebase installation id), not a registration token.
    public var byFID: Bool
    /// `validate_only: true`.
    public var validateOnly: Bool

    public init(request: SendRequest, byFID: Bool = false, validateOnly: Bool = false) {
        self.request = request
        self.byFID = byFID
        self.validateOnly = validateOnly
    }
}

/// What decoding a `messages:send` body gives.
public enum V1ParseOutcome: Sendable {
    case send(V1Send)
    /// 400 INVALID_ARGUMENT for a broken rule: answered with an FcmError `INVALID_ARGUMENT`
    /// detail and a BadRequest detail listing `violations`.
    case invalidArgument(message: String, violations: [FieldViolation])
    /// 400 INVALID_ARGUMENT for a body that is not the Message JSON (malformed, unknown field,
    /// wrongly typed value): `Invalid JSON payload received. …`, a BadRequest detail when
    /// `violations` is not empty, and no FcmError detail.
    case invalidPayload(message: String, violations: [FieldViolation])
}
