// RFC 6455 framing with no I/O: a reader that takes frames out of the loop's input buffer one at
// a time and says what each meant, the frames the server writes, and the UTF-8 check that spans
// a fragmented message. The connection (HTTP1Connection+WebSocket.swift) owns the bytes, the
// clock and the handler; everything here is pure, so it is unit-tested and fuzzed directly.

/// Opcodes (RFC 6455 §5.2).
enum WebSocketOpcode {
    static let continuation: UInt8 = 0x0
    static let text: UInt8 = 0x1
    static let binary: UInt8 = 0x2
    static let close: UInt8 = 0x8
    static let ping: UInt8 = 0x9
    static let pong: UInt8 = 0xA
}

/// What one complete frame from the client meant.
enum WebSocketEvent: Equatable {
    /// A whole text message (one frame, or the last fragment of several), valid UTF-8.
    case text(String)
    /// A data frame that completes no message (a fragment before the last).
    case fragment
    case ping([UInt8])
    case pong
    /// The client's close frame: its code (nil when it sent none) and reason.
    case close(code: UInt16?, reason: String)
    /// The client broke the protocol or a limit: the connection closes with `code`.
    case failure(code: UInt16, reason: String)
}

/// Reads the client's frames. `next` is given the unread bytes and takes at most one frame (or, in
/// the closing state, part of one being skipped); nothing is kept but the message being
/// reassembled, which is bounded by `maxMessageBytes`, and a frame is judged from its header
/// before its payload is waited for.
struct WebSocketReader {
    let maxMessageBytes: Int
    /// Set once the server has sent its close frame: from then on only the client's close frame
    /// matters, and every other frame's payload is dropped as it arrives, never held.
    var closing = false
    /// A fragmented text message is open (its first frame came without FIN).
    private var inMessage = false
    private var message: [UInt8] = []
    /// Frames of the open message so far: bounded too (`maxFragments`), since empty continuation
    /// frames add no bytes and would keep a message open for ever.
    private var fragments = 0
    static let maxFragments = 1024
    private var utf8 = UTF8Validator()
    /// Payload bytes of a frame being skipped (closing state) not yet arrived.
    private var skipLeft: UInt64 = 0
    /// A frame's length could not be skipped: nothing after it can be read as frames.
    private var unreadable = false

    init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// A frame's header: its fields, and how many bytes it took.
    struct Header {
        var fin: Bool
        var rsv: UInt8
        var opcode: UInt8
        var masked: Bool
        var length: UInt64
        var mask: (UInt8, UInt8, UInt8, UInt8)
        var size: Int
    }

    /// The header at the start of `b`; nil until all of it has arrived. A 64-bit length with its
    /// top bit set comes back as is (the caller refuses it).
    static func header(_ b: UnsafeBufferPointer<UInt8>) -> Header? {
        guard b.count >= 2 else { return nil }
        var h = Header(fin: b[0] & 0x80 != 0, rsv: (b[0] >> 4) & 0x7, opcode: b[0] & 0x0F, masked: b[1] & 0x80 != 0,
                       length: UInt64(b[1] & 0x7F), mask: (0, 0, 0, 0), size: 2)
        if h.length == 126 {
            guard b.count >= 4 else { return nil }
            h.length = UInt64(b[2]) << 8 | UInt64(b[3])
            h.size = 4
        } else if h.length == 127 {
            guard b.count >= 10 else { return nil }
            h.length = (2..<10).reduce(UInt64(0)) { $0 << 8 | UInt64(b[$1]) }
            h.size = 10
        }
        if h.masked {
            guard b.count >= h.size + 4 else { return nil }
            h.mask = (b[h.size], b[h.size + 1], b[h.size + 2], b[h.size + 3])
            h.size += 4
        }
        return h
    }

    /// Takes at most one frame from the start of `b`: how many bytes it used, and what the frame
    /// meant (nil: the frame is not complete yet, or its payload is being skipped).
    ///
    /// A `.failure` leaves the reader closing, the refused frame's payload to be skipped, so the
    /// client's close frame can still be found behind it (a length that cannot be skipped, with
    /// its top bit set, leaves nothing readable: every byte after it is dropped).
    mutating func next(_ b: UnsafeBufferPointer<UInt8>) -> (used: Int, event: WebSocketEvent?) {
        if unreadable { return (b.count, nil) }
        if skipLeft > 0 {
            let n = Int(Swift.min(skipLeft, UInt64(b.count)))
            skipLeft -= UInt64(n)
            return (n, nil)
        }
        guard let h = Self.header(b) else { return (0, nil) }
        if h.length >> 63 != 0 {
            unreadable = true
            return (b.count, closing ? nil : .failure(code: 1002, reason: "frame length with its top bit set"))
        }
        if closing && !(h.opcode == WebSocketOpcode.close && h.length <= 125) {
            // Only the close frame is waited for; the rest is dropped as it comes.
            skipLeft = h.length
            return (h.size, nil)
        }
        if !closing, let refusal = refusal(h) {
            fail()
            skipLeft = h.length
            return (h.size, .failure(code: refusal.code, reason: refusal.reason))
        }
        let total = h.size + Int(h.length)
        guard b.count >= total else { return (0, nil) }
        var payload = Array(b[h.size..<total])
        if h.masked {
            let m = [h.mask.0, h.mask.1, h.mask.2, h.mask.3]
            for i in payload.indices { payload[i] ^= m[i & 3] }
        }
        let e = event(h, payload)
        if case .failure = e { fail() }
        return (total, e)
    }

    /// After a refusal: closing, the message given up.
    private mutating func fail() {
        closing = true
        inMessage = false
        message = []
        utf8 = UTF8Validator()
    }

    /// Why a frame must not be read further, judged from its header alone; nil when it may.
    private func refusal(_ h: Header) -> (code: UInt16, reason: String)? {
        let isControl = h.opcode & 0x8 != 0
        if !h.masked { return (1002, "frames from the client must be masked") }
        if h.rsv != 0 { return (1002, "reserved bits set (no extension was agreed)") }
        switch h.opcode {
        case WebSocketOpcode.continuation, WebSocketOpcode.text, WebSocketOpcode.binary,
             WebSocketOpcode.close, WebSocketOpcode.ping, WebSocketOpcode.pong: break
        default: return (1002, "unknown opcode \(h.opcode)")
        }
        if isControl {
            if !h.fin { return (1002, "fragmented control frame") }
            if h.length > 125 { return (1002, "control frame payload over 125 bytes") }
            return nil
        }
        if h.opcode == WebSocketOpcode.continuation && !inMessage { return (1002, "continuation frame without a message") }
        if h.opcode != WebSocketOpcode.continuation && inMessage { return (1002, "new message inside a fragmented one") }
        if h.opcode == WebSocketOpcode.binary { return (1003, "binary messages are not accepted") }
        if h.length > UInt64(maxMessageBytes) || UInt64(message.count) + h.length > UInt64(maxMessageBytes) {
            return (1009, "message over \(maxMessageBytes) bytes")
        }
        return nil
    }

    /// What a complete frame, its payload unmasked, means.
    private mutating func event(_ h: Header, _ payload: [UInt8]) -> WebSocketEvent {
        switch h.opcode {
        case WebSocketOpcode.ping: return .ping(payload)
        case WebSocketOpcode.pong: return .pong
        case WebSocketOpcode.close: return Self.close(payload)
        default: break
        }
        // Text, or its continuation.
        guard utf8.feed(payload) else { return .failure(code: 1007, reason: "text is not valid UTF-8") }
        if !h.fin {
            inMessage = true
            fragments += 1
            guard fragments <= Self.maxFragments else {
                return .failure(code: 1009, reason: "a message in more than \(Self.maxFragments) fragments")
            }
            message.append(contentsOf: payload)
            return .fragment
        }
        fragments = 0
        guard utf8.isComplete else { return .failure(code: 1007, reason: "text is not valid UTF-8") }
        let whole: [UInt8]
        if inMessage {
            message.append(contentsOf: payload)
            whole = message
            message = []
            inMessage = false
        } else {
            whole = payload
        }
        utf8 = UTF8Validator()
        return .text(String(decoding: whole, as: UTF8.self))
    }

    /// A close frame's payload: nothing, or a valid code and a UTF-8 reason.
    static func close(_ payload: [UInt8]) -> WebSocketEvent {
        if payload.isEmpty { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { return .failure(code: 1002, reason: "close frame of one byte") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard isValidReceivedCode(code) else { return .failure(code: 1002, reason: "invalid close code \(code)") }
        var check = UTF8Validator()
        let reason = Array(payload[2...])
        guard check.feed(reason), check.isComplete else { return .failure(code: 1002, reason: "close reason is not valid UTF-8") }
        return .close(code: code, reason: String(decoding: reason, as: UTF8.self))
    }

    /// Codes a close frame may carry on the wire (RFC 6455 §7.4 and IANA's registry): 1004-1006
    /// and 1015 are reserved, 1016-2999 unassigned, 3000-4999 for libraries and applications.
    static func isValidReceivedCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }
}

/// Strict UTF-8 (Unicode's Table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF),
/// checked piece by piece, so a character split between fragments is judged whole.
struct UTF8Validator {
    /// Continuation bytes still expected for the character begun.
    private var needed = 0
    /// The range the next continuation byte must fall in (narrower only right after the lead).
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF

    /// False at the first byte that cannot continue valid UTF-8.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> Bool {
        for b in bytes {
            if needed > 0 {
                guard b >= low && b <= high else { return false }
                needed -= 1
                low = 0x80
                high = 0xBF
                continue
            }
            switch b {
            case 0x00...0x7F: continue
            case 0xC2...0xDF: needed = 1
            case 0xE0: (needed, low) = (2, 0xA0)
            case 0xE1...0xEC, 0xEE...0xEF: needed = 2
            case 0xED: (needed, high) = (2, 0x9F)
            case 0xF0: (needed, low) = (3, 0x90)
            case 0xF1...0xF3: needed = 3
            case 0xF4: (needed, high) = (3, 0x8F)
            default: return false
            }
        }
        return true
    }

    /// No character is left half-way.
    var isComplete: Bool { needed == 0 }
}

/// The frames the server writes: never masked, never fragmented.
enum WebSocketFrames {
    /// Appends one final frame of `opcode` carrying `payload`.
    static func append(opcode: UInt8, payload: some Collection<UInt8>, into out: inout [UInt8]) {
        out.append(0x80 | opcode)
        let n = payload.count
        if n < 126 {
            out.append(UInt8(n))
        } else if n <= 0xFFFF {
            out.append(126)
            out.append(UInt8(n >> 8))
            out.append(UInt8(n & 0xFF))
        } else {
            out.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(n) >> UInt64(shift))) }
        }
        out.append(contentsOf: payload)
    }

    /// A close frame's payload: `code` (none: empty) and `reason`, cut to the 123 bytes a control
    /// frame leaves it, on a character boundary.
    static func closePayload(code: UInt16?, reason: String) -> [UInt8] {
        guard let code else { return [] }
        var out: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
        out.append(contentsOf: truncated(reason, toBytes: 123).utf8)
        return out
    }

    /// The longest prefix of `text` of at most `limit` UTF-8 bytes that ends between Unicode
    /// scalars (so it is valid UTF-8 on its own).
    static func truncated(_ text: String, toBytes limit: Int) -> Substring {
        if text.utf8.count <= limit { return text[...] }
        let scalars = text.unicodeScalars
        var bytes = 0
        var end = scalars.startIndex
        while end < scalars.endIndex {
            let n = UTF8.width(scalars[end])
            if bytes + n > limit { break }
            bytes += n
            end = scalars.index(after: end)
        }
        return Substring(scalars[..<end])
    }
}
