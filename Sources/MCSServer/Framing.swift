// MCS framing with no I/O: the version byte, then packets of one tag byte, a varint32 size and a
// protobuf payload. The reader judges each packet from its tag and size before its payload is
// waited for, so nothing larger than the limit is ever buffered; it is unit-tested and fuzzed
// directly.

import Protobuf

/// Encodes one packet: the tag byte, the payload's size as a varint, the payload.
public func mcsPacket(_ message: some MCSPacketMessage) -> [UInt8] {
    mcsPacket(tag: message.tag.rawValue, payload: message.encode())
}

/// Encodes one packet from a raw tag and payload (tests write packets the server must refuse).
public func mcsPacket(tag: UInt8, payload: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [tag]
    ProtoWriter.appendVarint(UInt64(payload.count), to: &out)
    out += payload
    return out
}

extension MCSPacketMessage {
    var tag: MCSTag { Self.tag }
}

/// Reads one side's stream: its version byte, then its packets. A tag outside `MCSTag`, a size
/// varint over five bytes, a size over `maxPacketBytes` or a version other than 41 is a failure,
/// found as soon as the bytes that show it arrive.
public struct MCSFrameReader: Sendable {
    public enum Event: Equatable, Sendable {
        case packet(MCSTag, [UInt8])
        case failure(String)
    }

    public let maxPacketBytes: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var versionRead = false
    private var failed = false

    public init(maxPacketBytes: Int = 64 << 10) {
        self.maxPacketBytes = maxPacketBytes
    }

    /// Adds bytes read from the stream.
    public mutating func feed(_ bytes: some Collection<UInt8>) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Lets the buffer go when every byte in it was read (an idle connection then holds none).
    public mutating func releaseIfDrained() {
        if start > 0 && start == buffer.count {
            buffer = []
            start = 0
        }
    }

    /// How many bytes are held, unread.
    public var pendingBytes: Int { buffer.count - start }

    /// The next packet, a failure (after which nothing more is read), or nil when more bytes are
    /// needed.
    public mutating func next() -> Event? {
        guard !failed else { return nil }
        if !versionRead {
            guard start < buffer.count else { return nil }
            let v = buffer[start]
            guard v == mcsVersion else { return fail("version \(v), not \(mcsVersion)") }
            start += 1
            versionRead = true
        }
        guard start < buffer.count else { return nil }
        let rawTag = buffer[start]
        guard let tag = MCSTag(rawValue: rawTag) else { return fail("unknown tag \(rawTag)") }
        var size: UInt64 = 0
        var i = start + 1
        var shift: UInt64 = 0
        while true {
            guard i < buffer.count else {
                return i - start - 1 >= 5 ? fail("a size varint over 5 bytes") : nil
            }
            if i - start - 1 >= 5 { return fail("a size varint over 5 bytes") }
            let b = buffer[i]
            size |= UInt64(b & 0x7F) << shift
            i += 1
            if b < 0x80 { break }
            shift += 7
        }
        guard size <= UInt64(maxPacketBytes) else { return fail("a packet of \(size) bytes, over \(maxPacketBytes)") }
        guard buffer.count - i >= Int(size) else { return nil }
        let payload = Array(buffer[i..<(i + Int(size))])
        start = i + Int(size)
        return .packet(tag, payload)
    }

    private mutating func fail(_ reason: String) -> Event {
        failed = true
        buffer = []
        start = 0
        return .failure(reason)
    }
}
