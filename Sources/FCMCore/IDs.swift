/// A downstream message id as FCM printed it: `0:<16-digit epoch µs>%<16 hex>`.
///
/// The hex part of real ids was a per-app value written twice (`%31bd1c9631bd1c96`); the mock
/// derives it from the sender id, so ids of one project look alike and ids stay unique through
/// the microsecond part alone (which is also what the store indexes).
public struct MessageID: Hashable, Sendable, CustomStringConvertible {
    /// Microseconds since the epoch; unique across every id this process hands out.
    public let micros: Int64
    /// The per-sender half of the hex suffix.
    public let suffix: UInt32

    /// Makes an id from its two parts.
    public init(micros: Int64, suffix: UInt32) {
        self.micros = micros
        self.suffix = suffix
    }

    /// The wire form, `0:1700000000000123%31bd1c9631bd1c96`.
    public var description: String {
        // Built byte by byte into the string's own storage (no other allocation): this runs once
        // per recipient on the send path. At least 16 digits, at most 20 (UInt64.max).
        var v = UInt64(max(0, micros))
        var count = 0
        var probe = v
        repeat {
            count += 1
            probe /= 10
        } while probe > 0
        let width = max(count, 16)
        let hex = hexDigits  // read the lazy global once
        return String(unsafeUninitializedCapacity: width + 19) { buf in
            var i = 0
            buf[i] = UInt8(ascii: "0"); i += 1
            buf[i] = UInt8(ascii: ":"); i += 1
            var at = i + width - 1
            while at >= i {
                buf[at] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
                at -= 1
            }
            i += width
            buf[i] = UInt8(ascii: "%"); i += 1
            for _ in 0..<2 {
                for shift in stride(from: 28, through: 0, by: -4) {
                    buf[i] = hex[Int((suffix >> UInt32(shift)) & 0xf)]
                    i += 1
                }
            }
            return i
        }
    }

    /// Parses the wire form; nil when `text` is not shaped like an id this mock issues.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2 + 16 + 1 + 16, bytes[0] == UInt8(ascii: "0"), bytes[1] == UInt8(ascii: ":")
        else { return nil }
        guard let pct = bytes.firstIndex(of: UInt8(ascii: "%")), bytes.count - pct - 1 == 16 else { return nil }
        var micros: Int64 = 0
        for b in bytes[2..<pct] {
            guard b >= 48, b <= 57 else { return nil }
            let (m, o1) = micros.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(b - 48))
            if o1 || o2 { return nil }
            micros = s
        }
        guard pct - 2 >= 16 else { return nil }
        guard let hi = parseHex32(bytes[(pct + 1)..<(pct + 9)]), let lo = parseHex32(bytes[(pct + 9)...]),
            hi == lo
        else { return nil }
        self.init(micros: micros, suffix: hi)
    }
}

/// The per-project half of message ids: FNV-1a of the sender id.
public func messageIDSuffix(senderID: String) -> UInt32 {
    var h: UInt32 = 0x811c_9dc5
    for b in senderID.utf8 {
        h ^= UInt32(b)
        h = h &* 0x0100_0193
    }
    return h
}

/// Hands out strictly increasing microsecond stamps for message ids.
///
/// Ids must be unique even when a 1000-token multicast needs 1000 of them in one microsecond, so
/// the allocator runs ahead of the wall clock when it has to and falls back in step when idle.
/// A value: its owner keeps it under the lock that orders its sends.
public struct MessageIDAllocator: Sendable {
    private var last: Int64

    /// Creates an allocator that will never return a value at or below `floor` (the newest id in
    /// the store, so ids stay unique across restarts even if the wall clock went back).
    public init(floor: Int64 = 0) {
        last = floor
    }

    /// Reserves `count` consecutive stamps and returns the first.
    public mutating func reserve(_ count: Int, nowMicros: Int64) -> Int64 {
        let first = max(nowMicros, last + 1)
        last = first + Int64(count) - 1
        return first
    }
}

/// The multicast id for generator state `state`: a positive 63-bit number with 19 digits, as
/// real ones had. The caller advances the state (FCMServer's `newMulticastID()` does, atomically);
/// distinct states give distinct, well-spread ids (splitmix64).
public func multicastID(mixing state: UInt64) -> Int64 {
    var z = state
    z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
    z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
    z ^= z >> 31
    let span = UInt64(Int64.max) - 1_000_000_000_000_000_000 + 1
    return 1_000_000_000_000_000_000 + Int64(z % span)
}

/// The base64url alphabet (RFC 4648 section 5), as tokens and JWTs use it.
let base64URL: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

/// Alphabets for `randomString`.
public enum RandomAlphabet {
    public static let base64URL = FCMCore.base64URL
    public static let hex: [UInt8] = Array("0123456789abcdef".utf8)
    public static let lowercaseAlphanumeric: [UInt8] = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
    public static let digits: [UInt8] = Array("0123456789".utf8)
}

/// `count` characters drawn at random from `alphabet` with `rng` (ids, keys and tokens the mock
/// makes up). The caller brings the generator (the system's, `SystemRandomNumberGenerator`):
/// this module draws no randomness of its own.
public func randomString(_ count: Int, from alphabet: [UInt8], using rng: inout some RandomNumberGenerator) -> String {
    String(decoding: (0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }, as: UTF8.self)
}

/// A new registration token shaped like FCM's: an 11-character instance id, `:APA91b`, and
/// base64url noise, 152 characters in all, drawn with `rng`.
public func newRegistrationToken(using rng: inout some RandomNumberGenerator) -> String {
    var out = [UInt8]()
    out.reserveCapacity(152)
    for _ in 0..<11 { out.append(base64URL[Int(rng.next() & 63)]) }
    out.append(contentsOf: Array(":APA91b".utf8))
    while out.count < 152 { out.append(base64URL[Int(rng.next() & 63)]) }
    return String(decoding: out, as: UTF8.self)
}

/// A token derived from `seed`, for fixture devices that name none: loading the same fixture
/// twice must give the same token, or loading would not be idempotent.
public func deterministicRegistrationToken(seed: String) -> String {
    var state = UInt64(0xcbf2_9ce4_8422_2325)
    for b in seed.utf8 {
        state ^= UInt64(b)
        state = state &* 0x0000_0100_0000_01b3
    }
    var out = [UInt8]()
    func nextByte() -> UInt8 {
        // splitmix64: deterministic, well spread, no dependency.
        state = state &+ 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return base64URL[Int((z ^ (z >> 31)) & 63)]
    }
    for _ in 0..<11 { out.append(nextByte()) }
    out.append(contentsOf: Array(":APA91b".utf8))
    while out.count < 152 { out.append(nextByte()) }
    return String(decoding: out, as: UTF8.self)
}

/// Longest registration token the mock accepts; anything longer is `InvalidRegistration`.
public let maxTokenLength = 4096

/// Whether `token` is well formed: 1 to 4096 characters of `A-Z a-z 0-9 - _ : .`.
///
/// Real tokens are base64url with one colon; the mock also allows short readable tokens
/// (`demo-android-1`, `42` as in the seeds' plain-text example) so tests can name devices.
public func isWellFormedToken(_ token: String) -> Bool {
    var copy = token
    // Over contiguous UTF-8, every byte classified by arithmetic and the answers folded with
    // `&`, no branch per byte: the compiler turns the loop into vector code (a multicast checks
    // 1000 tokens of ~150 bytes each).
    return copy.withUTF8 { bytes in
        guard !bytes.isEmpty, bytes.count <= maxTokenLength else { return false }
        var all: UInt8 = 1
        let p = bytes.baseAddress!
        for i in 0..<bytes.count {
            let b = p[i]
            let letter: UInt8 = (b | 0x20) &- UInt8(ascii: "a") < 26 ? 1 : 0
            let digitOrColon: UInt8 = b &- UInt8(ascii: "0") < 11 ? 1 : 0  // 0-9 and ':', one after '9'
            let dashOrDot: UInt8 = b &- UInt8(ascii: "-") < 2 ? 1 : 0  // '-' and '.', side by side
            let underscore: UInt8 = b == UInt8(ascii: "_") ? 1 : 0
            all &= letter | digitOrColon | dashOrDot | underscore
        }
        return all == 1
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

private func parseHex32<S: Sequence>(_ s: S) -> UInt32? where S.Element == UInt8 {
    var v: UInt32 = 0
    var n = 0
    for b in s {
        let d: UInt32
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - 48)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - 87)
        default: return nil
        }
        v = v << 4 | d
        n += 1
    }
    return n == 8 ? v : nil
}

/// An installation id (FID): 22 characters of base64url, the first `c`, `d`, `e` or `f` (the
/// FID's top bits are fixed at `0111`, so its first base64url character is one of those).
public func isWellFormedInstallationID(_ fid: String) -> Bool {
    let bytes = Array(fid.utf8)
    guard bytes.count == 22, (UInt8(ascii: "c")...UInt8(ascii: "f")).contains(bytes[0]) else { return false }
    return bytes.allSatisfy { base64URL.contains($0) }
}

/// Web Push subscription ids: the opaque part of an endpoint (`{origin}/wp/{id}`).
public enum WebPushSubscriptionID {
    /// Length of a new id: 86 characters of base64url (64 random bytes), over the contract's 64.
    public static let length = 86

    /// A new opaque id, drawn with `rng`.
    public static func generate(using rng: inout some RandomNumberGenerator) -> String {
        randomString(length, from: RandomAlphabet.base64URL, using: &rng)
    }

    /// Whether `s` could be an id (base64url, 64 to 512 characters): anything else is unknown.
    public static func isWellFormed(_ s: String) -> Bool {
        let n = s.utf8.count
        return n >= 64 && n <= 512 && s.utf8.allSatisfy(isBase64URL)
    }
}

/// Whether `c` is a base64url character (RFC 4648 §5: A-Z a-z 0-9 - _).
@inlinable
public func isBase64URL(_ c: UInt8) -> Bool {
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
}
