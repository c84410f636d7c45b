/// Why bytes are not a protobuf message (or not the one expected).
public enum ProtoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes end inside a key, a varint or a fixed-size value.
    case truncated
    /// A varint longer than ten bytes.
    case varintTooLong
    /// Wire type 6 or 7, which protobuf does not define.
    case badWireType(UInt8)
    /// Field number 0, or one above 2^29 - 1.
    case badFieldNumber(UInt64)
    /// A length-delimited field claiming more bytes than remain.
    case lengthPastEnd
    /// Messages (or groups) nested deeper than the reader's limit.
    case tooDeep
    /// An end-group key with no group open, or for another field's group.
    case unmatchedEndGroup
    /// A proto2 `required` field is absent (message and field names as in the .proto).
    case missingRequired(message: String, field: String)

    public var description: String {
        switch self {
        case .truncated: "truncated"
        case .varintTooLong: "a varint over 10 bytes"
        case .badWireType(let t): "wire type \(t)"
        case .badFieldNumber(let n): "field number \(n)"
        case .lengthPastEnd: "a length past the end"
        case .tooDeep: "nested too deep"
        case .unmatchedEndGroup: "an unmatched end of group"
        case .missingRequired(let m, let f): "\(m) lacks its required \(f)"
        }
    }
}

/// One field's value as read from the wire.
public enum ProtoValue: Equatable, Sendable {
    case varint(UInt64)
    case fixed64(UInt64)
    case fixed32(UInt32)
    /// A length-delimited value: a string, bytes or a nested message.
    case bytes(ArraySlice<UInt8>)
}

/// One field: its number and value. The typed accessors give nil when the wire type is not the
/// one that type uses; protobuf treats such a field as unknown, and so do the decoders here.
public struct ProtoField: Equatable, Sendable {
    public let number: Int
    public let value: ProtoValue

    public init(number: Int, value: ProtoValue) {
        self.number = number
        self.value = value
    }

    public var wireType: ProtoWireType {
        switch value {
        case .varint: .varint
        case .fixed64: .fixed64
        case .fixed32: .fixed32
        case .bytes: .lengthDelimited
        }
    }

    /// A `uint64` (or enum, or raw varint).
    public var uint64: UInt64? {
        if case .varint(let v) = value { return v }
        return nil
    }
    /// An `int64` (two's complement).
    public var int64: Int64? { uint64.map { Int64(bitPattern: $0) } }
    /// An `int32`: the low 32 bits, as protobuf reads it.
    public var int32: Int32? { uint64.map { Int32(truncatingIfNeeded: $0) } }
    /// A `bool`: any nonzero varint is true.
    public var bool: Bool? { uint64.map { $0 != 0 } }
    /// A `fixed64`.
    public var fixed64: UInt64? {
        if case .fixed64(let v) = value { return v }
        return nil
    }
    /// A `bytes` value or a nested message's encoding.
    public var bytes: ArraySlice<UInt8>? {
        if case .bytes(let b) = value { return b }
        return nil
    }
    /// A `string`; bytes that are not UTF-8 are replaced (U+FFFD), as proto2 does not check them.
    public var string: String? { bytes.map { String(decoding: $0, as: UTF8.self) } }
}

/// Reads one message's fields in wire order. Everything is checked before it is used: a length
/// never reaches past the end, a varint stops at ten bytes, and nesting (`nested`, groups being
/// skipped) stops at `maxDepth`. Unknown fields are the caller's to ignore; groups are skipped
/// here, since no message read by this project has one.
public struct ProtoReader: Sendable {
    /// The largest field number protobuf allows.
    public static let maxFieldNumber = (1 << 29) - 1
    /// How deep messages may nest by default (protobuf's own default is 100; MCS needs 3).
    public static let defaultMaxDepth = 32

    private let buffer: [UInt8]
    private var position: Int
    private let end: Int
    /// How deep this reader's message sits (0: the outermost).
    public let depth: Int
    public let maxDepth: Int

    /// A reader of the message that is all of `bytes`.
    public init(_ bytes: [UInt8], maxDepth: Int = ProtoReader.defaultMaxDepth) {
        self.init(buffer: bytes, range: bytes.startIndex..<bytes.endIndex, depth: 0, maxDepth: maxDepth)
    }

    /// A reader of the message that is all of `bytes` (a slice of a larger buffer, unread).
    public init(_ bytes: ArraySlice<UInt8>, maxDepth: Int = ProtoReader.defaultMaxDepth) {
        self.init(Array(bytes), maxDepth: maxDepth)
    }

    private init(buffer: [UInt8], range: Range<Int>, depth: Int, maxDepth: Int) {
        self.buffer = buffer
        self.position = range.lowerBound
        self.end = range.upperBound
        self.depth = depth
        self.maxDepth = maxDepth
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { position >= end }

    /// The next field, or nil at the end of the message.
    public mutating func next() throws(ProtoError) -> ProtoField? {
        while position < end {
            let (number, type) = try readKey()
            switch type {
            case .varint:
                return ProtoField(number: number, value: .varint(try readVarint()))
            case .fixed64:
                return ProtoField(number: number, value: .fixed64(try readFixed(8)))
            case .fixed32:
                return ProtoField(number: number, value: .fixed32(UInt32(try readFixed(4))))
            case .lengthDelimited:
                let length = try readVarint()
                guard length <= UInt64(end - position) else { throw .lengthPastEnd }
                let start = position
                position += Int(length)
                return ProtoField(number: number, value: .bytes(buffer[start..<position]))
            case .startGroup:
                try skipGroup(number, depth: depth + 1)
            case .endGroup:
                throw .unmatchedEndGroup
            }
        }
        return nil
    }

    /// A reader of the nested message `field` holds, one level deeper; `.tooDeep` past the limit.
    /// A field that is not length-delimited reads as an empty message's worth of nothing: callers
    /// check `bytes` first when the difference matters.
    public func nested(_ field: ProtoField) throws(ProtoError) -> ProtoReader {
        guard depth + 1 <= maxDepth else { throw .tooDeep }
        guard case .bytes(let b) = field.value else {
            return ProtoReader(buffer: [], range: 0..<0, depth: depth + 1, maxDepth: maxDepth)
        }
        return ProtoReader(buffer: buffer, range: b.startIndex..<b.endIndex, depth: depth + 1, maxDepth: maxDepth)
    }

    /// Reads every field to the end, checking only that the bytes are well formed (a nested
    /// message no one reads, such as a ClientEvent, is still judged as protobuf would).
    public mutating func skipAll() throws(ProtoError) {
        while try next() != nil {}
    }

    private mutating func readKey() throws(ProtoError) -> (Int, ProtoWireType) {
        let key = try readVarint()
        guard let type = ProtoWireType(rawValue: UInt8(key & 7)) else { throw .badWireType(UInt8(key & 7)) }
        let number = key >> 3
        guard number > 0 && number <= UInt64(Self.maxFieldNumber) else { throw .badFieldNumber(number) }
        return (Int(number), type)
    }

    private mutating func readVarint() throws(ProtoError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        for _ in 0..<10 {
            guard position < end else { throw .truncated }
            let b = buffer[position]
            position += 1
            result |= UInt64(b & 0x7F) << shift  // bits past the 64th fall off, as in protobuf
            if b < 0x80 { return result }
            shift += 7
        }
        throw .varintTooLong
    }

    private mutating func readFixed(_ n: Int) throws(ProtoError) -> UInt64 {
        guard end - position >= n else { throw .truncated }
        var v: UInt64 = 0
        for i in 0..<n { v |= UInt64(buffer[position + i]) << (8 * UInt64(i)) }
        position += n
        return v
    }

    /// Skips a group's fields up to its end-group key (groups inside it too).
    private mutating func skipGroup(_ number: Int, depth: Int) throws(ProtoError) {
        guard depth <= maxDepth else { throw .tooDeep }
        while true {
            guard position < end else { throw .truncated }
            let (n, type) = try readKey()
            switch type {
            case .varint: _ = try readVarint()
            case .fixed64: _ = try readFixed(8)
            case .fixed32: _ = try readFixed(4)
            case .lengthDelimited:
                let length = try readVarint()
                guard length <= UInt64(end - position) else { throw .lengthPastEnd }
                position += Int(length)
            case .startGroup: try skipGroup(n, depth: depth + 1)
            case .endGroup:
                guard n == number else { throw .unmatchedEndGroup }
                return
            }
        }
    }
}
