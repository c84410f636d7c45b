import Protobuf
import XCTest

/// The wire format against protobuf's documented encodings, every malformed input the reader
/// refuses, and random bytes (which must never crash it).
final class ProtobufTests: XCTestCase {
    private func fields(_ bytes: [UInt8]) throws -> [ProtoField] {
        var r = ProtoReader(bytes)
        var out: [ProtoField] = []
        while let f = try r.next() { out.append(f) }
        return out
    }

    private func error(_ bytes: [UInt8], maxDepth: Int = ProtoReader.defaultMaxDepth) -> ProtoError? {
        var r = ProtoReader(bytes, maxDepth: maxDepth)
        do {
            while try r.next() != nil {}
            return nil
        } catch {
            return error
        }
    }

    func testWriterMatchesProtobufsDocumentedBytes() {
        var w = ProtoWriter()
        w.varint(1, 150)  // the encoding guide's example
        w.string(2, "testing")
        XCTAssertEqual(w.bytes, [0x08, 0x96, 0x01, 0x12, 0x07] + Array("testing".utf8))

        var n = ProtoWriter()
        n.int32(1, -1)  // sign-extended to ten bytes
        XCTAssertEqual(n.bytes, [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])

        var f = ProtoWriter()
        f.fixed64(7, 0x0102_0304_0506_0708)
        XCTAssertEqual(f.bytes, [0x39, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])

        var b = ProtoWriter()
        b.bool(24, true)  // a two-byte key
        XCTAssertEqual(b.bytes, [0xC0, 0x01, 0x01])

        var m = ProtoWriter()
        m.message(3) { $0.varint(1, 150) }
        XCTAssertEqual(m.bytes, [0x1A, 0x03, 0x08, 0x96, 0x01])
    }

    func testEveryTypeRoundTrips() throws {
        var w = ProtoWriter()
        w.varint(1, 0)
        w.int32(2, Int32.min)
        w.int64(3, Int64.min)
        w.uint64(4, UInt64.max)
        w.bool(5, false)
        w.fixed64(6, UInt64.max - 1)
        w.string(7, "héllo")
        w.bytes(8, [0, 255])
        w.message(9) { $0.string(1, "inner") }
        w.int64(ProtoReader.maxFieldNumber, 42)
        let fs = try fields(w.bytes)
        XCTAssertEqual(fs.map(\.number), [1, 2, 3, 4, 5, 6, 7, 8, 9, ProtoReader.maxFieldNumber])
        XCTAssertEqual(fs[0].uint64, 0)
        XCTAssertEqual(fs[1].int32, Int32.min)
        XCTAssertEqual(fs[2].int64, Int64.min)
        XCTAssertEqual(fs[3].uint64, UInt64.max)
        XCTAssertEqual(fs[4].bool, false)
        XCTAssertEqual(fs[5].fixed64, UInt64.max - 1)
        XCTAssertNil(fs[5].uint64, "a fixed64 is no varint")
        XCTAssertEqual(fs[6].string, "héllo")
        XCTAssertEqual(fs[7].bytes.map(Array.init), [0, 255])
        XCTAssertNil(fs[7].int64, "bytes are no varint")
        var r = ProtoReader(w.bytes)
        var inner: ProtoReader?
        while let f = try r.next() {
            if f.number == 9 { inner = try r.nested(f) }
        }
        XCTAssertEqual(try inner?.next()?.string, "inner")
        XCTAssertEqual(fs[9].int64, 42)
    }

    func testUnknownWireTypesAreSkipped() throws {
        // fixed32 (field 2), a group (field 3) holding a varint and a nested group, then field 4.
        let bytes: [UInt8] = [0x08, 0x01, 0x15, 1, 2, 3, 4, 0x1B, 0x08, 0x05, 0x2B, 0x2C, 0x1C, 0x20, 0x07]
        let fs = try fields(bytes)
        XCTAssertEqual(fs.map(\.number), [1, 2, 4])
        XCTAssertEqual(fs[1].value, .fixed32(0x0403_0201))
        XCTAssertEqual(fs[2].uint64, 7)
    }

    func testMalformedInputIsRefused() {
        XCTAssertEqual(error([0x08]), .truncated, "a key without its value")
        XCTAssertEqual(error([0x08, 0x80]), .truncated, "a varint cut short")
        XCTAssertEqual(error([0x09, 1, 2, 3]), .truncated, "a fixed64 cut short")
        XCTAssertEqual(error([0x0D, 1, 2]), .truncated, "a fixed32 cut short")
        XCTAssertEqual(error([0x08] + [UInt8](repeating: 0xFF, count: 10) + [0x01]), .varintTooLong)
        XCTAssertNil(error([0x08] + [UInt8](repeating: 0xFF, count: 9) + [0x01]), "ten bytes are fine")
        XCTAssertEqual(error([0x0E, 0]), .badWireType(6))
        XCTAssertEqual(error([0x0F, 0]), .badWireType(7))
        XCTAssertEqual(error([0x00, 0]), .badFieldNumber(0))
        XCTAssertEqual(error([0x0A, 0x05, 1, 2]), .lengthPastEnd)
        XCTAssertEqual(error([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]), .lengthPastEnd,
                       "a huge length is judged before anything is allocated")
        XCTAssertEqual(error([0x0C]), .unmatchedEndGroup)
        XCTAssertEqual(error([0x0B, 0x14]), .unmatchedEndGroup, "a group ended by another field's key")
        XCTAssertEqual(error([0x0B, 0x08, 0x01]), .truncated, "a group never ended")
        // Field number 2^29 is one too many.
        var key: [UInt8] = []
        ProtoWriter.appendVarint(UInt64(ProtoReader.maxFieldNumber + 1) << 3, to: &key)
        XCTAssertEqual(error(key + [0]), .badFieldNumber(UInt64(ProtoReader.maxFieldNumber + 1)))
    }

    func testNestingStopsAtTheDepthLimit() throws {
        func nest(_ levels: Int) -> [UInt8] {
            var bytes: [UInt8] = [0x08, 0x01]
            for _ in 0..<levels {
                var w = ProtoWriter()
                w.message(1, bytes)
                bytes = w.bytes
            }
            return bytes
        }
        func walk(_ r: inout ProtoReader) throws(ProtoError) {
            while let f = try r.next() {
                if f.wireType == .lengthDelimited {
                    var inner = try r.nested(f)
                    try walk(&inner)
                }
            }
        }
        var ok = ProtoReader(nest(4), maxDepth: 4)
        XCTAssertNoThrow(try walk(&ok))
        var deep = ProtoReader(nest(5), maxDepth: 4)
        XCTAssertThrowsError(try walk(&deep)) { XCTAssertEqual($0 as? ProtoError, .tooDeep) }
        // Groups count too.
        let groups: [UInt8] = [0x0B, 0x0B, 0x0B, 0x0C, 0x0C, 0x0C]
        XCTAssertNil(error(groups, maxDepth: 3))
        XCTAssertEqual(error(groups, maxDepth: 2), .tooDeep)
    }

    /// Random bytes, and valid messages with random damage, never crash the reader.
    func testFuzzRandomBytesNeverCrash() {
        var rng = SystemRandomNumberGenerator()
        var valid = ProtoWriter()
        valid.string(1, "id")
        valid.message(8) { $0.string(1, "name"); $0.string(2, "value") }
        valid.fixed64(3, 99)
        valid.int64(16, 2)
        for round in 0..<50_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                bytes = valid.bytes
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
                if Bool.random(using: &rng) { bytes.removeLast(Int.random(in: 0..<bytes.count, using: &rng)) }
            }
            var r = ProtoReader(bytes, maxDepth: 8)
            func walk(_ r: inout ProtoReader) throws(ProtoError) {
                while let f = try r.next() {
                    _ = (f.int32, f.int64, f.bool, f.fixed64, f.string)
                    if f.wireType == .lengthDelimited, f.number % 2 == 0 {
                        var inner = try r.nested(f)
                        try walk(&inner)
                    }
                }
            }
            _ = try? walk(&r)
        }
    }
}
