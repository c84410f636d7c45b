@testable import GCM
import MCSServer
import XCTest

/// The MCS room's ledger of written pushes by packet number: an acknowledgement by number
/// settles what was recorded up to it, and one read before its write was recorded settles that
/// write when it is (the loop can write a packet and read its acknowledgement first).
final class PacketLedgerTests: XCTestCase {
    func testAnAcknowledgementSettlesWhatWasRecordedUpToIt() {
        var l = PacketLedger()
        XCTAssertNil(l.record(2, version: "a"))
        XCTAssertNil(l.record(3, version: "b"))
        XCTAssertNil(l.record(5, version: "c"))
        XCTAssertEqual(l.acknowledge(through: 3, by: (.iqStanza, 13)), ["a", "b"])
        XCTAssertEqual(l.acknowledge(through: 3, by: (.iqStanza, 13)), [], "settled once")
        XCTAssertEqual(l.written, [5: "c"])
    }

    func testAnAcknowledgementReadBeforeItsWriteWasRecordedSettlesItWhenRecorded() {
        var l = PacketLedger()
        XCTAssertEqual(l.acknowledge(through: 4, by: (.heartbeatAck, nil)), [])
        let early = l.record(4, version: "a")
        XCTAssertEqual(early?.through, 4)
        XCTAssertEqual(early?.tag, .heartbeatAck)
        XCTAssertTrue(l.written.isEmpty, "settled, not kept")
        XCTAssertNil(l.record(5, version: "b"), "a later packet waits for its own acknowledgement")
        // A lower count later does not lower what was acknowledged.
        XCTAssertEqual(l.acknowledge(through: 2, by: (.iqStanza, 13)), [])
        XCTAssertEqual(l.ackedThrough, 4)
    }

    func testASelectiveAckTakesItsVersionsOff() {
        var l = PacketLedger()
        _ = l.record(2, version: "a")
        _ = l.record(3, version: "b")
        l.forget(["a", "x"])
        XCTAssertEqual(l.written, [3: "b"])
    }
}
