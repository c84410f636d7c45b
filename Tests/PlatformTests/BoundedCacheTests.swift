import Platform
import XCTest

final class BoundedCacheTests: XCTestCase {
    func testRemembersUpToItsCapacityThenEmptiesBeforeTheNextNewKey() {
        let cache = BoundedCache<String, Int>(capacity: 3)
        for (i, k) in ["a", "b", "c"].enumerated() { cache.insert(i, for: k) }
        XCTAssertEqual(cache.count, 3)
        XCTAssertEqual(cache["b"], 1)
        // Replacing a key's value in a full table keeps the others.
        cache.insert(10, for: "a")
        XCTAssertEqual(cache.count, 3)
        XCTAssertEqual(cache["a"], 10)
        // A new key in a full table: emptied first, then only the new entry.
        cache.insert(4, for: "d")
        XCTAssertEqual(cache.count, 1)
        XCTAssertNil(cache["a"])
        XCTAssertEqual(cache["d"], 4)
    }

    func testValueOrMakeRemembersOnlyWhatWasMade() {
        let cache = BoundedCache<Int, String>(capacity: 10)
        var calls = 0
        XCTAssertNil(cache.value(for: 1) { calls += 1; return nil })
        XCTAssertEqual(cache.count, 0)
        XCTAssertEqual(cache.value(for: 1) { calls += 1; return "one" }, "one")
        XCTAssertEqual(cache.value(for: 1) { calls += 1; return "other" }, "one")
        XCTAssertEqual(calls, 2)
    }

    func testConcurrentInsertsNeverExceedTheCapacity() {
        let cache = BoundedCache<Int, Int>(capacity: 64)
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<2_000 {
                cache.insert(i, for: t * 10_000 + i)
                XCTAssertLessThanOrEqual(cache.count, 64)
            }
        }
    }
}
