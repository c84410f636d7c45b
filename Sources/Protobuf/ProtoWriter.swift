// The protobuf wire format (proto2's encoding) as far as MCS and checkin need it: varints,
// fixed64, length-delimited fields. No reflection and no generated code: each message type writes
// its own fields in field-number order and reads them back through `ProtoReader`.

/// How a field's value is laid out on the wire (the low three bits of its key).
public enum ProtoWireType: UInt8, Sendable {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    /// Proto2 groups: never written, only skipped when an unknown field holds one.
    case startGroup = 3
    case endGroup = 4
    case fixed32 = 5
}

/// Builds one message's bytes, field by field, in the order called.
public struct ProtoWriter: Sendable {
    /// What has been written so far.
    public private(set) var bytes: [UInt8] = []

    public init() {}

    /// Appends `value` as a base-128 varint (1 to 10 bytes).
    public static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    private mutating func key(_ field: Int, _ type: ProtoWireType) {
        precondition(field > 0 && field <= ProtoReader.maxFieldNumber, "field number \(field) out of range")
        Self.appendVarint(UInt64(field) << 3 | UInt64(type.rawValue), to: &bytes)
    }

    /// A raw varint field (uint32, uint64, enum values).
    public mutating func varint(_ field: Int, _ value: UInt64) {
        key(field, .varint)
        Self.appendVarint(value, to: &bytes)
    }

    /// An `int32` field: a negative value is sign-extended to ten bytes, as protobuf does.
    public mutating func int32(_ field: Int, _ value: Int32) {
        varint(field, UInt64(bitPattern: Int64(value)))
    }

    /// An `int64` field (two's complement, no zigzag).
    public mutating func int64(_ field: Int, _ value: Int64) {
        varint(field, UInt64(bitPattern: value))
    }

    /// A `uint64` field.
    public mutating func uint64(_ field: Int, _ value: UInt64) {
        varint(field, value)
    }

    /// A `bool` field (one byte, 0 or 1).
    public mutating func bool(_ field: Int, _ value: Bool) {
        varint(field, value ? 1 : 0)
    }

    /// A `fixed64` field (eight bytes, little-endian).
    public mutating func fixed64(_ field: Int, _ value: UInt64) {
        key(field, .fixed64)
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    /// A `bytes` field.
    public mutating func bytes(_ field: Int, _ value: some Collection<UInt8>) {
        key(field, .lengthDelimited)
        Self.appendVarint(UInt64(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    /// A `string` field (UTF-8).
    public mutating func string(_ field: Int, _ value: String) {
        key(field, .lengthDelimited)
        Self.appendVarint(UInt64(value.utf8.count), to: &bytes)
        bytes.append(contentsOf: value.utf8)
    }

    /// A nested message field whose bytes are already encoded.
    public mutating func message(_ field: Int, _ encoded: [UInt8]) {
        bytes(field, encoded)
    }

    /// A nested message field written by `body`.
    public mutating func message(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        var inner = ProtoWriter()
        body(&inner)
        bytes(field, inner.bytes)
    }
}
