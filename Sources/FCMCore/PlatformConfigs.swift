/// The platform blocks of a v1 message, as sent but normalized by V1Parser: every field name in
/// snake_case (`restrictedPackageName` becomes `restricted_package_name`); enum values as their
/// proto name lower-cased, whatever was sent (`HIGH`, `1` → `high`; `PRIORITY_MAX` →
/// `priority_max`; `if-priority-lowered` → `if_priority_lowered`); booleans as `true`/`false`
/// (also when sent as `1`/`0` or strings); `int32` fields as JSON numbers; durations and times as
/// the text sent (already checked); `null` members dropped. `google.protobuf.Struct` blocks
/// (`apns.payload`, `webpush.notification`) and map keys are kept exactly as sent.
/// Nil for a legacy send; a v1 send always has one (a block sent as `{}` stays an empty object).
public struct PlatformConfigs: Sendable, Equatable {
    public var android: JSONObject?
    public var apns: JSONObject?
    public var webpush: JSONObject?
    /// The message-level `fcm_options`.
    public var fcmOptions: JSONObject?

    /// The block of platform `name` (`android`, `apns`, `webpush`); nil for another name.
    public func block(_ name: String) -> JSONObject? {
        switch name {
        case "android": android
        case "apns": apns
        case "webpush": webpush
        default: nil
        }
    }

    public init(android: JSONObject? = nil, apns: JSONObject? = nil, webpush: JSONObject? = nil,
                fcmOptions: JSONObject? = nil) {
        self.android = android
        self.apns = apns
        self.webpush = webpush
        self.fcmOptions = fcmOptions
    }
}
