import FCMCore
import FCMModel
@testable import APNs
import XCTest

/// Apple's store-and-forward as the APNs room hands it to the engine (docs/spec/apns.md section
/// 5), and a certificate's other apps; the screen's bound (FCMCore's `Screen`).
final class APNsStorageTests: XCTestCase {
    private func entry(_ id: Int64, expiresAt: Int64 = 10_000, apns: Bool = false, collapse: String? = nil) -> StoredEntry {
        StoredEntry(deliveryID: id, collapseKey: collapse, expiresAt: expiresAt, isAPNs: apns)
    }

    func testAnOfflineDeviceKeepsOnlyTheNewestNotificationAndItsFCMMessages() {
        var held = [entry(1), entry(2, apns: true), entry(3, collapse: "k")]
        let changes = APNsRoom.holding.hold(entry(4), &held, 500)
        XCTAssertEqual(changes, [StatusChange(deliveryID: 2, status: "replaced")])
        XCTAssertEqual(held.map(\.deliveryID), [1, 3, 4])
        XCTAssertEqual(held.map(\.isAPNs), [false, false, true], "the new one is held by Apple's rule, FCM's by FCM's")
        XCTAssertTrue(APNsRoom.holding.replacesOnScreen)
    }

    func testExpiredEntriesLeaveFirstAsExpired() {
        var held = [entry(1, expiresAt: 100), entry(2, expiresAt: 100, apns: true), entry(3, apns: true)]
        let changes = APNsStorage.store(entry(4), in: &held, now: 100)
        XCTAssertEqual(changes, [StatusChange(deliveryID: 1, status: "expired"), StatusChange(deliveryID: 2, status: "expired"),
                                 StatusChange(deliveryID: 3, status: "replaced")])
        XCTAssertEqual(held.map(\.deliveryID), [4])
    }

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

    func testACertificatesOtherAppsAreEachOnceCheckedAndBounded() throws {
        XCTAssertEqual(try APNsCertificate.otherApps(of: "com.a", ["com.b", "com.a", "com.b", "com.c"]), ["com.b", "com.c"])
        XCTAssertThrowsError(try APNsCertificate.otherApps(of: "com.a", ["has space"]))
        XCTAssertThrowsError(try APNsCertificate.otherApps(of: "com.a", (0...APNsCertificate.maxOtherApps).map { "com.o\($0)" }))
        XCTAssertEqual(try APNsCertificate.otherApps(of: "com.a", (1...APNsCertificate.maxOtherApps).map { "com.o\($0)" }).count, 63)
    }
}
