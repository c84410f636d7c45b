import Platform
import XCTest

/// The two glibc malloc settings the server relies on for flat memory (design.md, "Memory"):
/// both reach the C library and take effect.
final class MallocTests: XCTestCase {
    func testArenaLimitIsAccepted() {
        XCTAssertTrue(SystemIO.limitMallocArenas(2), "glibc's mallopt(M_ARENA_MAX) is found and accepts the value")
    }

    func testFreedPagesGoBack() {
        // Many small blocks (below the mmap threshold, so they live in the heap), all freed:
        // their pages are free memory malloc_trim can give back.
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<20_000 {
            let p = UnsafeMutableRawPointer.allocate(byteCount: 4000, alignment: 16)
            p.initializeMemory(as: UInt8.self, repeating: 1, count: 4000)
            blocks.append(p)
        }
        for p in blocks { p.deallocate() }
        XCTAssertTrue(SystemIO.releaseFreedMemory(), "80 MB freed in the heap: some of it went back")
    }
}
