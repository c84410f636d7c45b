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

    /// Reads a request; throws when the bytes are no protobuf message of that shape, or one
    /// without its required `checkin` (4).
    init(decoding bytes: [UInt8]) throws(ProtoError) {
        var r = ProtoReader(bytes)
        var sawCheckin = false
        while let f = try r.next() {
            switch f.number {
            case 2: if let v = f.uint64 { androidID = v }
            case 13:
                if let v = f.fixed64 { securityToken = v } else if let v = f.uint64 { securityToken = v }
            case 4:
                var checkin = try r.nested(f)
                try readCheckin(&checkin)
                sawCheckin = true
            default: break
            }
        }
        guard sawCheckin else { throw .missingRequired(message: "AndroidCheckinRequest", field: "checkin") }
    }

    /// `checkin.chrome_build` (13) of an `AndroidCheckinProto`.
    private mutating func readCheckin(_ r: inout ProtoReader) throws(ProtoError) {
        while let c = try r.next() {
            guard c.number == 13 else { continue }
            var build = try r.nested(c)
            try readBuild(&build)
        }
    }

    /// `platform` (1), `chrome_version` (2) and `channel` (3), as names.
    private mutating func readBuild(_ r: inout ProtoReader) throws(ProtoError) {
        while let b = try r.next() {
            switch b.number {
            case 1: if let v = b.uint64 { platform = Self.platforms[Int(truncatingIfNeeded: v)] ?? String(v) }
            case 2: if let v = b.string { chromeVersion = v }
            case 3: if let v = b.uint64 { channel = Self.channels[Int(truncatingIfNeeded: v)] ?? String(v) }
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
