import XCTest
import FCMModel
import FCMCore
@testable import FCMEngine

/// The `client_delivery` column's stored form (`ClientDelivery.stored()`) turns back into exactly
/// the object `json()` writes, in every state a delivery reaches; a store written before it
/// (the object itself) and a dropped push's reason are shown as before.
final class ClientDeliveryFormTests: XCTestCase {
    private func delivery(_ kind: ClientKind) -> ClientDelivery {
        ClientDelivery(kind: kind, connectionID: "conn \"7\"", version: "0:1796572124123456%a1b2c3d4", firstSentAt: 1_796_572_124_123,
                       sends: 2, entry: StoredEntry(deliveryID: 1_796_572_124_123_456, collapseKey: nil, expiresAt: 1_800_000_000_000))
    }

    private func assertRoundTrip(_ cd: ClientDelivery, file: StaticString = #filePath, line: UInt = #line) {
        let stored = cd.stored()
        XCTAssertEqual(stored.utf8.first, UInt8(ascii: "["), file: file, line: line)
        XCTAssertLessThan(stored.utf8.count, cd.json().utf8.count, file: file, line: line)
        XCTAssertEqual(ClientDelivery.shown(stored).clientDelivery, cd.json(), file: file, line: line)
        XCTAssertNil(ClientDelivery.shown(stored).errorDetail, file: file, line: line)
    }

    func testEveryStateComesBackAsTheObject() throws {
        var sent = delivery(.gcm)
        assertRoundTrip(sent)
        XCTAssertEqual(sent.json(), #"{"kind":"mcs","connection_id":"conn \"7\"","persistent_id":"0:1796572124123456%a1b2c3d4","#
                       + #""first_sent_at":"2026-12-06T15:48:44.123Z","sends":2,"ack":null,"rejection":null,"via":null,"#
                       + #""encryption":null,"plaintext":null}"#)

        sent.ack = ("selective_ack", nil, 1_796_572_124_200)
        assertRoundTrip(sent)
        XCTAssertTrue(try XCTUnwrap(ClientDelivery.shown(sent.stored()).clientDelivery)
            .contains(#""ack":{"by":"selective_ack","code":null,"at":"2026-12-06T15:48:44.200Z"}"#))

        var autopush = delivery(.autopush)
        autopush.ack = ("ack", 100, 1_796_572_124_300)
        assertRoundTrip(autopush)
        XCTAssertTrue(autopush.json().contains(#""version":"0:1796572124123456%a1b2c3d4""#))

        var rejected = delivery(.autopush)
        rejected.ack = ("ack", 301, 1_796_572_124_300)
        rejected.rejection = (301, "the push handler threw", 1_796_572_124_300)
        assertRoundTrip(rejected)

        var nacked = delivery(.autopush)
        nacked.rejection = (101, "the browser could not \"decrypt\" it", 1_796_572_124_400)
        assertRoundTrip(nacked)

        var relayed = delivery(.fcm)
        relayed.via = "wp:https://example.test/#channel"
        relayed.encryption = "aesgcm"
        relayed.plaintext = #"{"data":{"a":"b","n":"1.50"},"from":"123","fcmMessageId":"m\u00e9"}"#
        relayed.ack = ("stream_ack", nil, 1_796_572_124_500)
        assertRoundTrip(relayed)
        XCTAssertTrue(try XCTUnwrap(ClientDelivery.shown(relayed.stored()).clientDelivery).hasSuffix(#""plaintext":"# + relayed.plaintext! + "}"))
    }

    func testOlderFormsAreShownAsTheyWere() {
        let object = delivery(.gcm).json()
        XCTAssertEqual(ClientDelivery.shown(object).clientDelivery, object)
        XCTAssertEqual(ClientDelivery.shown(ClientDelivery.droppedJSON).errorDetail, "the channel unregistered")
        XCTAssertNil(ClientDelivery.shown(ClientDelivery.droppedJSON).clientDelivery)
        XCTAssertNil(ClientDelivery.shown(nil).clientDelivery)
        XCTAssertNil(ClientDelivery.shown("[1,2]").clientDelivery, "an array of another shape shows nothing")
    }
}
