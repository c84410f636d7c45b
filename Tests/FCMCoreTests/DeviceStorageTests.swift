import XCTest

@testable import FCMCore

/// FCM's storage rules for offline devices (docs/spec/fcm-legacy.md section 6).
final class DeviceStorageTests: XCTestCase {
    func e(_ id: Int64, _ key: String? = nil, expires: Int64 = 1_000) -> StoredEntry {
        StoredEntry(deliveryID: id, collapseKey: key, expiresAt: expires)
    }

    func testSameCollapseKeyReplacesTheHeldMessage() {
        var held: [StoredEntry] = []
        XCTAssertEqual(DeviceStorage.store(e(1, "score"), in: &held, now: 0).changes, [])
        let r = DeviceStorage.store(e(2, "score"), in: &held, now: 0)
        XCTAssertEqual(r.changes, [StatusChange(deliveryID: 1, status: "collapsed")])
        XCTAssertFalse(r.newDropped)
        XCTAssertEqual(held.map(\.deliveryID), [2])
    }

    func testAFifthCollapseKeyEvictsTheOldestKey() {
        var held: [StoredEntry] = []
        for (i, k) in ["a", "b", "c", "d"].enumerated() { _ = DeviceStorage.store(e(Int64(i + 1), k), in: &held, now: 0) }
        _ = DeviceStorage.store(e(5), in: &held, now: 0)  // non-collapsible ones do not count as keys
        let r = DeviceStorage.store(e(6, "e"), in: &held, now: 0)
        XCTAssertEqual(r.changes, [StatusChange(deliveryID: 1, status: "dropped")])
        XCTAssertEqual(held.map(\.deliveryID), [2, 3, 4, 5, 6])
        // A held key still collapses rather than evicting.
        XCTAssertEqual(DeviceStorage.store(e(7, "c"), in: &held, now: 0).changes, [StatusChange(deliveryID: 3, status: "collapsed")])
    }

    /// A real client's device may hold more than the rules leave (what waited for room on its
    /// connection, or was unacknowledged when it ended, is held again whole): a newer message
    /// replaces every held one of its key, and keys go whole, oldest first, down to four with it.
    func testWhatIsHeldBeyondTheRulesIsCollapsedAndEvictedWhole() {
        var held = [e(1, "same"), e(2, "same"), e(3), e(4, "same")]
        let r = DeviceStorage.store(e(5, "same"), in: &held, now: 0)
        XCTAssertEqual(r.changes, [1, 2, 4].map { StatusChange(deliveryID: $0, status: "collapsed") })
        XCTAssertEqual(held.map(\.deliveryID), [3, 5])

        held = [e(1, "a"), e(2, "b"), e(3, "a"), e(4, "c"), e(5, "d"), e(6, "e"), e(7, "f")]
        let r2 = DeviceStorage.store(e(8, "g"), in: &held, now: 0)
        XCTAssertEqual(r2.changes, [1, 3, 2, 4].map { StatusChange(deliveryID: $0, status: "dropped") })
        XCTAssertEqual(held.map(\.deliveryID), [5, 6, 7, 8], "keys d, e, f and the new g: four")
    }

    func testTheHundredAndFirstNonCollapsibleMessageDiscardsEverything() {
        var held: [StoredEntry] = [e(900, "k")]
        for i in 1...100 {
            let r = DeviceStorage.store(e(Int64(i)), in: &held, now: 0)
            XCTAssertEqual(r.purged, 0)
        }
        let r = DeviceStorage.store(e(101), in: &held, now: 0)
        XCTAssertTrue(r.newDropped)
        XCTAssertEqual(r.purged, 102, "all held messages, the collapsible one and the new one included")
        XCTAssertEqual(r.changes.count, 101, "every held one is dropped; the new one is stored as dropped")
        XCTAssertTrue(r.changes.allSatisfy { $0.status == "dropped" })
        XCTAssertTrue(held.isEmpty)
    }

    func testNoticesAreNeitherCountedNorDropped() {
        var held = [StoredEntry(deliveryID: 1, collapseKey: nil, expiresAt: 1_000, isNotice: true)]
        for i in 2...101 { _ = DeviceStorage.store(e(Int64(i)), in: &held, now: 0) }
        XCTAssertEqual(held.count, 101, "100 messages and the notice: no purge yet")
        let r = DeviceStorage.store(e(102), in: &held, now: 0)
        XCTAssertEqual(r.purged, 101)
        XCTAssertEqual(held.map(\.deliveryID), [1])
    }

    func testExpiry() {
        var held = [e(1, expires: 10), e(2, "k", expires: 20), e(3, expires: 30)]
        XCTAssertEqual(DeviceStorage.count(held, now: 15), 2)
        XCTAssertEqual(DeviceStorage.expire(&held, now: 20), [StatusChange(deliveryID: 1, status: "expired"),
                                                               StatusChange(deliveryID: 2, status: "expired")])
        XCTAssertEqual(held.map(\.deliveryID), [3])
        // Storing first lets expired messages go, so they neither collapse nor count.
        var h2 = [e(1, "k", expires: 5)]
        let r = DeviceStorage.store(e(2, "k", expires: 50), in: &h2, now: 10)
        XCTAssertEqual(r.changes, [StatusChange(deliveryID: 1, status: "expired")])
    }

    func testEntriesHeldByTheirOwnRulesAreOutsideFCMsLimits() {
        var held = (0..<Int64(DeviceStorage.maxNonCollapsible)).map { StoredEntry(deliveryID: $0, collapseKey: nil, expiresAt: 1_000, ownRules: true) }
        held += [e(200, "a"), e(201, "b"), e(202, "c"), e(203, "d")]
        let r = DeviceStorage.store(e(300), in: &held, now: 10)
        XCTAssertEqual(r.changes, [])
        XCTAssertFalse(r.newDropped)
        let c = DeviceStorage.store(e(301, "e"), in: &held, now: 10)
        XCTAssertEqual(c.changes, [StatusChange(deliveryID: 200, status: "dropped")], "only FCM's collapse keys count")
    }
}

/// What a phone shows by collapse id, for a protocol whose rules replace on the screen.
final class ScreenTests: XCTestCase {
    func testTheScreenReplacesByCollapseIDAndForgetsTheOldestPastItsBound() {
        var screen = Screen()
        XCTAssertNil(screen.show(1, collapseID: "a"))
        XCTAssertNil(screen.show(2, collapseID: "b"))
        XCTAssertEqual(screen.show(3, collapseID: "a"), 1)
        XCTAssertEqual(screen.show(4, collapseID: "a"), 3)
        for i in 0..<Int64(Screen.capacity) { _ = screen.show(100 + i, collapseID: "c\(i)") }
        XCTAssertNil(screen.show(5, collapseID: "b"), "b, seen longest ago, was forgotten")
        XCTAssertEqual(screen.show(6, collapseID: "c63"), 163)
    }
}
