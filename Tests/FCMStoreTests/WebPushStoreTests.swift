@testable import FCMStore
import Foundation
import XCTest

/// The Web Push tables' migration: a subscription row whose device is gone (the store of a
/// version that kept them) becomes the id of a deleted device's subscription, its keys dropped.
final class WebPushStoreTests: XCTestCase {
    func testRowsOfGoneDevicesBecomeDeletedIDs() throws {
        let dir = NSTemporaryDirectory() + "fcm-store-wp-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try SQLiteConnection(path: dir + "/t.sqlite")
        let step = try XCTUnwrap(Migrations.steps.firstIndex { $0.contains("CREATE TABLE web_push_deleted") })
        for sql in Migrations.steps[..<step] { try c.execute(sql) }
        // Device 1 is a web device; 2 was deleted; 3 is the id of a deleted web device given to
        // an android device after a restart.
        try c.execute("""
            INSERT INTO devices(id, token, sender_id, app, platform, state, online, created_at, last_seen_at) VALUES
                (1, 'web', 's', 'a', 'web', 'registered', 1, 0, 0),
                (3, 'android', 's', 'a', 'android', 'registered', 1, 0, 0);
            INSERT INTO web_push_subscriptions(device, push_id, private_key, public_key, auth) VALUES
                (1, 'live', x'01', x'02', x'03'), (2, 'deleted', x'01', x'02', x'03'), (3, 'reused', x'01', x'02', x'03');
            """)
        try c.execute(Migrations.steps[step])
        func count(_ sql: String) throws -> Int64? { try c.scalar(sql) }
        XCTAssertEqual(try count("SELECT count(*) FROM web_push_subscriptions WHERE push_id = 'live' AND device = 1"), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM web_push_subscriptions"), 1, "the gone devices' keys are dropped")
        XCTAssertEqual(try count("SELECT count(*) FROM web_push_deleted WHERE push_id IN ('deleted', 'reused')"), 2)
        XCTAssertEqual(try count("SELECT count(*) FROM web_push_deleted"), 2)
    }
}
