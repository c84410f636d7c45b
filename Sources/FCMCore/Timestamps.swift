// Timestamps as FCM writes them. Pure rules: the time comes in as a number from a clock the
// caller owns (Platform's MockClock), so FCMCore reads no clock itself.

/// RFC 3339 in UTC with milliseconds, `2024-05-30T12:34:56.789Z`.
public func rfc3339(millis: Int64) -> String {
    // Any 64-bit number: the arithmetic below stays in range within ±2^60 ms (36 million years).
    let millis = min(max(millis, -(1 << 60)), 1 << 60)
    let secs = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
    let ms = Int(millis - secs * 1000)
    let days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400
    let rem = Int(secs - days * 86400)
    // Civil-from-days (Howard Hinnant's algorithm): exact for every date, no tables.
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = Int(doy - (153 * mp + 2) / 5 + 1)
    let m = Int(mp < 10 ? mp + 3 : mp - 9)
    let y = Int(yoe + era * 400 + (m <= 2 ? 1 : 0))
    // Written into 24 bytes (a year past 9999 takes its own form): no string is built per field.
    guard (0...9999).contains(y) else {
        func p(_ v: Int, _ w: Int) -> String {
            let s = String(v)
            return s.count >= w ? s : String(repeating: "0", count: w - s.count) + s
        }
        return "\(p(y, 4))-\(p(m, 2))-\(p(d, 2))T\(p(rem / 3600, 2)):\(p(rem / 60 % 60, 2)):\(p(rem % 60, 2)).\(p(ms, 3))Z"
    }
    return String(unsafeUninitializedCapacity: 24) { b in
        @inline(__always) func put(_ v: Int, _ width: Int, at i: Int) {
            var v = v
            for k in stride(from: i + width - 1, through: i, by: -1) {
                b[k] = UInt8(truncatingIfNeeded: 48 + v % 10)
                v /= 10
            }
        }
        put(y, 4, at: 0); b[4] = 45
        put(m, 2, at: 5); b[7] = 45
        put(d, 2, at: 8); b[10] = 84
        put(rem / 3600, 2, at: 11); b[13] = 58
        put(rem / 60 % 60, 2, at: 14); b[16] = 58
        put(rem % 60, 2, at: 17); b[19] = 46
        put(ms, 3, at: 20); b[23] = 90
        return 24
    }
}

/// Parses the RFC 3339 forms the control API accepts (`since=`): UTC `Z` or a numeric offset,
/// optional fraction. Returns milliseconds since the epoch.
public func parseRFC3339(_ text: String) -> Int64? {
    let b = Array(text.utf8)
    func num(_ r: Range<Int>) -> Int? {
        guard r.upperBound <= b.count else { return nil }
        var v = 0
        for i in r {
            guard b[i] >= 48, b[i] <= 57 else { return nil }
            v = v * 10 + Int(b[i] - 48)
        }
        return v
    }
    guard b.count >= 20, let y = num(0..<4), b[4] == 45, let mo = num(5..<7), b[7] == 45, let d = num(8..<10),
        b[10] == 84 || b[10] == 116, let h = num(11..<13), b[13] == 58, let mi = num(14..<16), b[16] == 58,
        let s = num(17..<19), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
    else { return nil }
    var i = 19
    var ms = 0
    if i < b.count, b[i] == 46 {
        i += 1
        var digits = 0
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            if digits < 3 { ms = ms * 10 + Int(b[i] - 48) }
            digits += 1
            i += 1
        }
        guard digits > 0 else { return nil }
        for _ in min(digits, 3)..<3 { ms *= 10 }
    }
    guard i < b.count else { return nil }
    var offset = 0
    if b[i] == 90 || b[i] == 122 {
        i += 1
    } else if b[i] == 43 || b[i] == 45, let oh = num((i + 1)..<(i + 3)), i + 3 < b.count, b[i + 3] == 58,
        let om = num((i + 4)..<(i + 6))
    {
        offset = (oh * 60 + om) * 60 * (b[i] == 43 ? 1 : -1)
        i += 6
    } else {
        return nil
    }
    guard i == b.count else { return nil }
    // Days-from-civil, the inverse of the algorithm in rfc3339(millis:).
    let yy = mo <= 2 ? y - 1 : y
    let era = (yy >= 0 ? yy : yy - 399) / 400
    let yoe = yy - era * 400
    let doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    let days = Int64(era * 146_097 + doe - 719_468)
    let secs = days * 86400 + Int64(h * 3600 + mi * 60 + s - offset)
    return secs * 1000 + Int64(ms)
}
