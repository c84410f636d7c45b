import Protobuf

/// Chromium's checkin messages (checkin.proto, android_checkin.proto): the fields the mock reads
/// of `AndroidCheckinRequest` and the `AndroidCheckinResponse` it writes.
struct CheckinRequest: Sendable, Equatable {
    /// `id` (2): 0 or absent at the first checkin.
    var androidID: UInt64 = 0
    /// `security_token` (13, fixed64).
    var securityToken: UInt64 = 0
    /// `checkin.chrome_build` (4.13): platform, Chrome's version, channel, as names.
    var platform: String?
    var chromeVersion: String?
    var channel: String?

    static let platforms = [1: "PLATFORM_WIN", 2: "PLATFORM_MAC", 3: "PLATFORM_LINUX", 4: "PLATFORM_CROS", 5: "PLATFORM_IOS", 6: "PLATFORM_ANDROID"]
    static let channels = [1: "CHANNEL_STABLE", 2: "CHANNEL_BETA", 3: "CHANNEL_DEV", 4: "CHANNEL_CANARY", 5: "CHANNEL_UNKNOWN"]

    /// Reads a request; throws when the bytes are no protobuf message of that shape.
    init(decoding bytes: [UInt8]) throws(ProtoError) {
        var r = ProtoReader(bytes)
        while let f = try r.next() {
            switch f.number {
            case 2: androidID = f.uint64 ?? 0
            case 13: securityToken = f.fixed64 ?? f.uint64 ?? 0
            case 4:
                var checkin = try r.nested(f)
                while let c = try checkin.next() {
                    guard c.number == 13 else { continue }
                    var build = try checkin.nested(c)
                    while let b = try build.next() {
                        switch b.number {
                        case 1: platform = b.uint64.map { Self.platforms[Int($0)] ?? String($0) }
                        case 2: chromeVersion = b.string
                        case 3: channel = b.uint64.map { Self.channels[Int($0)] ?? String($0) }
                        default: break
                        }
                    }
                }
            default: break
            }
        }
    }
}

/// `AndroidCheckinResponse`: `stats_ok` (1), `time_msec` (3), `android_id` (7, fixed64),
/// `security_token` (8, fixed64), `settings_diff` (9), in field order.
enum CheckinResponse {
    static func encode(androidID: UInt64, securityToken: UInt64, timeMillis: Int64) -> [UInt8] {
        var w = ProtoWriter()
        w.bool(1, true)
        w.int64(3, timeMillis)
        w.fixed64(7, androidID)
        w.fixed64(8, securityToken)
        w.bool(9, false)
        return w.bytes
    }
}
