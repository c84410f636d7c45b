import FCMCore
import FCMModel
@testable import APNs
import XCTest

/// Apple's store-and-forward as the APNs room hands it to the engine (docs/spec/apns.md section
/// 5), and a certificate's other apps.
final class APNsStorageTests: XCTestCase {
    private let apns = Transport.apns.tag

    /// An entry as the engine holds it: an APNs notification (held by its own rules, from APNs),
    /// else an FCM message sent over HTTP.
    private func entry(_ id: Int64, expiresAt: Int64 = 10_000, apns isAPNs: Bool = false, collapse: String? = nil) -> StoredEntry {
        StoredEntry(deliveryID: id, collapseKey: collapse, expiresAt: expiresAt, ownRules: isAPNs,
                    source: isAPNs ? apns : Transport.http.tag)
    }

    func testAnOfflineDeviceKeepsOnlyTheNewestNotificationAndItsFCMMessages() {
        var held = [entry(1), entry(2, apns: true), entry(3, collapse: "k")]
        let result = APNsRoom.holding.hold(entry(4, apns: true), &held, 500)
        XCTAssertEqual(result.changes, [StatusChange(deliveryID: 2, status: "replaced")])
        XCTAssertFalse(result.newDropped)
        XCTAssertEqual(result.purged, 0)
        XCTAssertEqual(held.map(\.deliveryID), [1, 3, 4], "FCM's messages stay, held by FCM's rules")
        XCTAssertTrue(APNsRoom.holding.replacesOnScreen)
    }

    func testExpiredEntriesLeaveFirstAsExpired() {
        var held = [entry(1, expiresAt: 100), entry(2, expiresAt: 100, apns: true), entry(3, apns: true)]
        let result = APNsStorage.store(entry(4, apns: true), in: &held, now: 100)
        XCTAssertEqual(result.changes, [StatusChange(deliveryID: 1, status: "expired"), StatusChange(deliveryID: 2, status: "expired"),
                                        StatusChange(deliveryID: 3, status: "replaced")])
        XCTAssertEqual(held.map(\.deliveryID), [4])
    }

    func testTransportTagsRoundTrip() {
        for t in Transport.allCases { XCTAssertEqual(Transport(tag: t.tag), t) }
        XCTAssertNil(Transport(tag: UInt8(Transport.allCases.count)))
    }

    func testACertificatesOtherAppsAreEachOnceCheckedAndBounded() throws {
        XCTAssertEqual(try APNsCertificate.otherApps(of: "com.a", ["com.b", "com.a", "com.b", "com.c"]), ["com.b", "com.c"])
        XCTAssertThrowsError(try APNsCertificate.otherApps(of: "com.a", ["has space"]))
        XCTAssertThrowsError(try APNsCertificate.otherApps(of: "com.a", (0...APNsCertificate.maxOtherApps).map { "com.o\($0)" }))
        XCTAssertEqual(try APNsCertificate.otherApps(of: "com.a", (1...APNsCertificate.maxOtherApps).map { "com.o\($0)" }).count, 63)
    }
}
