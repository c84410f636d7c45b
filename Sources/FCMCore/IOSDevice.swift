// What an iOS device carries besides its FCM token: its APNs device token and the environment
// that token belongs to. Device data the engine keeps and checks when a device is made; the
// APNs room reads them off a request (APNs/APNsRules.swift).

/// An iOS device's APNs device token (what `/3/device/{token}` names): hexadecimal, an even
/// number of characters, 64 to 200.
public enum APNsDeviceToken {
    public static let minLength = 64
    public static let maxLength = 200

    /// Whether `token` has the form: hexadecimal, an even number of characters, 64 to 200.
    public static func isWellFormed(_ token: String) -> Bool {
        let n = token.utf8.count
        return n >= minLength && n <= maxLength && n % 2 == 0
            && (token.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(isHexDigit) }) ?? token.utf8.allSatisfy(isHexDigit))
    }

    /// `token` in lower case, the way devices are found by it: the same string when it has no
    /// letter to lower (as clients send them), with no copy.
    public static func lowercased(_ token: String) -> String {
        lowercasedIfNeeded(token)
    }

    /// A new token: 64 lowercase hexadecimal characters.
    public static func generate(using rng: inout some RandomNumberGenerator) -> String {
        randomString(64, from: Array("0123456789abcdef".utf8), using: &rng)
    }

    /// The APNs token of the iOS device whose FCM token is `fcmToken`: 64 lowercase hex digits,
    /// the same on every run (four FNV-1a 64-bit hashes of the token, each seeded apart), so it
    /// needs no column of its own and a restart keeps it.
    public static func derived(from fcmToken: String) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for seed in UInt64(1)...4 {
            var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ (seed &* 0x9e37_79b9_7f4a_7c15)
            for b in fcmToken.utf8 {
                h ^= UInt64(b)
                h = h &* 0x0000_0100_0000_01b3
            }
            for shift in stride(from: 60, through: 0, by: -4) { out.append(hex[Int(h >> UInt64(shift) & 15)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Which of Apple's environments an iOS device's token belongs to, and a request reached.
public enum APNsEnvironment: String, Sendable, CaseIterable {
    case production, sandbox
}
