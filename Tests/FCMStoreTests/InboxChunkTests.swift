import FCMStore
import XCTest

/// The inbox chunks' id encoding (`Store+Inbox.swift`): ascending ids as deltas in LEB128.
final class InboxChunkTests: XCTestCase {
    func testRoundTripsMessageIDStamps() {
        // Microsecond stamps a few apart, a second apart, an hour apart.
        let base: Int64 = 1_796_000_000_000_000
        let ids = [base, base + 1, base + 2, base + 1_000_000, base + 3_600_000_000, base + 3_600_000_001]
        let bytes = InboxChunk.encode(ids)
        XCTAssertEqual(InboxChunk.decode(bytes), ids)
        // The first id takes 8 bytes, the deltas 1, 1, 3, 5 and 1.
        XCTAssertEqual(bytes.count, 8 + 1 + 1 + 3 + 5 + 1)
    }

    func testRoundTripsExtremes() {
        for ids: [Int64] in [[], [0], [1], [Int64.max], [0, Int64.max], [Int64.min, 0, Int64.max], Array(1...64)] {
            XCTAssertEqual(InboxChunk.decode(InboxChunk.encode(ids)), ids, "\(ids)")
        }
    }

    func testAFullChunkOfCloseIDsIsSmall() {
        let ids = (0..<Int64(InboxChunk.size)).map { 1_796_000_000_000_000 + $0 * 100 }
        XCTAssertLessThan(InboxChunk.encode(ids).count, 8 + 2 * InboxChunk.size)
    }

    func testADamagedChunkLosesOnlyItsTail() {
        let ids: [Int64] = [1_000_000, 1_000_200, 1_000_400]
        var bytes = InboxChunk.encode(ids)
        bytes.removeLast()
        XCTAssertEqual(InboxChunk.decode(bytes), Array(ids.prefix(2)), "a cut varint is dropped")
        XCTAssertEqual(InboxChunk.decode([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), [],
                       "an overlong varint ends the chunk instead of overflowing")
    }
}
