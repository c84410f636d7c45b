@testable import FCMEngine
@testable import FCMServer
import FCMStore
import XCTest

/// The in-memory part of a device's inbox index (`DeviceInbox`): which ids go to the store, when
/// they leave memory, and what counts and pages see meanwhile.
final class DeviceInboxTests: XCTestCase {
    private let size = InboxChunk.size

    func testAFullChunkGoesOnceAndLeavesMemoryWhenStored() {
        var d = DeviceInbox()
        for id in 1...Int64(size - 1) { XCTAssertFalse(d.append(id)) }
        XCTAssertTrue(d.append(Int64(size)), "the 64th id fills a chunk")
        let chunks = d.nextChunks()
        XCTAssertEqual(chunks, [Array(1...Int64(size))])
        // Until it is stored, it stays in memory and no second chunk is taken.
        for id in Int64(size + 1)...Int64(2 * size + 5) { XCTAssertFalse(d.append(id)) }
        XCTAssertEqual(d.nextChunks(), [])
        XCTAssertEqual(d.recent(after: 0).count, 2 * size + 5)
        // A completion for another chunk (from before a reset) changes nothing.
        d.chunksStored(through: 999, count: 1)
        XCTAssertEqual(d.recent.count, 2 * size + 5)
        d.chunksStored(through: Int64(size), count: 1)
        XCTAssertEqual(d.recent.first, Int64(size + 1))
        XCTAssertEqual(d.chunkedThrough, Int64(size))
        XCTAssertEqual(d.countBound(after: 0), 2 * size + 5, "chunked plus recent")
        XCTAssertEqual(d.countBound(after: Int64(size + 10)), size - 5, "exact past the chunks")
        XCTAssertEqual(d.nextChunks(), [Array(Int64(size + 1)...Int64(2 * size))], "the next full one is taken now")
    }

    func testAHugeLoadedListIsChunkedAllAtOnceAndShrinks() {
        var d = DeviceInbox()
        for id in 1...Int64(100 * size + 3) { _ = d.append(id) }
        let chunks = d.nextChunks()
        XCTAssertEqual(chunks.count, 100)
        XCTAssertEqual(chunks.last?.last, Int64(100 * size))
        d.chunksStored(through: Int64(100 * size), count: 100)
        XCTAssertEqual(d.recent, [Int64(100 * size + 1), Int64(100 * size + 2), Int64(100 * size + 3)])
        XCTAssertLessThanOrEqual(d.recent.capacity, 2 * size, "the loaded list's room went back")
        XCTAssertEqual(d.chunkedCount, 100 * size)
    }

    func testPrunedIdsLeaveMemoryAndTheCount() {
        var d = DeviceInbox()
        for id in 1...Int64(size + 10) { _ = d.append(id) }
        _ = d.nextChunks()
        d.chunksStored(through: Int64(size), count: 1)
        // Two chunked ids and three in memory pruned.
        d.forget([3, 7, Int64(size + 1), Int64(size + 2), Int64(size + 9)])
        XCTAssertEqual(d.recent, [Int64(size + 3), Int64(size + 4), Int64(size + 5), Int64(size + 6), Int64(size + 7),
                                  Int64(size + 8), Int64(size + 10)])
        XCTAssertEqual(d.chunkedCount, size - 2)
    }
}
