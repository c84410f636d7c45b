import XCTest
@testable import CCS
import FCMCore
@testable import FCMLegacy

/// Each room's wire form of FCM's error codes: the XMPP nack's code (CCS) and the plain-text
/// format's HTTP status (the legacy room).
final class RoomErrorFormsTests: XCTestCase {
    func testErrorCodesMapToXMPP() {
        XCTAssertEqual(FCMErrorCode.notRegistered.xmppCode, "DEVICE_UNREGISTERED")
        XCTAssertEqual(FCMErrorCode.invalidRegistration.xmppCode, "BAD_REGISTRATION")
        XCTAssertEqual(FCMErrorCode.mismatchSenderId.xmppCode, "SENDER_ID_MISMATCH")
        XCTAssertEqual(FCMErrorCode.invalidTtl.xmppCode, "INVALID_JSON")
    }

    func testPlainTextStatuses() {
        XCTAssertEqual(FCMErrorCode.unavailable.plainTextStatus, 503)
        XCTAssertEqual(FCMErrorCode.internalServerError.plainTextStatus, 500)
        XCTAssertNil(FCMErrorCode.notRegistered.plainTextStatus)
    }
}
