import HTTPServer
import FCMCore
@testable import FCMV1
@testable import FCMEngine
@testable import FCMServer
import XCTest

/// The pure mapping from the engine's outcomes to v1 answers (`V1Error`), row by row.
final class V1ErrorMappingTests: XCTestCase {
    func testEveryLegacyErrorHasItsV1Row() {
        let rows: [(FCMErrorCode, Int, String, String?)] = [
            (.notRegistered, 404, "NOT_FOUND", "UNREGISTERED"),
            (.mismatchSenderId, 403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"),
            (.invalidApnsCredential, 401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"),
            (.authenticationFailed, 401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"),
            (.invalidRegistration, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.invalidPackageName, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.deviceMessageRateExceeded, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
            (.topicsMessageRateExceeded, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
            (.unavailable, 503, "UNAVAILABLE", "UNAVAILABLE"),
            (.internalServerError, 500, "INTERNAL", "INTERNAL"),
            (.missingRegistration, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.invalidParameters, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.messageTooBig, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.invalidDataKey, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
            (.invalidTtl, 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        ]
        XCTAssertEqual(Set(rows.map(\.0.rawValue)), Set(FCMErrorCode.allCases.map(\.rawValue)), "every code has a row")
        for (code, http, status, fcm) in rows {
            let e = V1Error(code)
            XCTAssertEqual(e.code, http, code.rawValue)
            XCTAssertEqual(e.status, status, code.rawValue)
            XCTAssertEqual(e.fcmError, fcm, code.rawValue)
            XCTAssertEqual(e.recordedError, fcm ?? status, code.rawValue)
            XCTAssertEqual(e.response.headers.first { $0.0 == "Retry-After" }?.1, code == .unavailable ? "10" : nil, code.rawValue)
        }
        XCTAssertEqual(V1Error(.invalidRegistration, targetField: "message.fid").violations.map(\.field), ["message.fid"])
    }

    func testFaultStatuses() {
        let rows: [(Int, Int64?, String, String?, String?)] = [
            (503, 7, "UNAVAILABLE", "UNAVAILABLE", "7"),
            (503, nil, "UNAVAILABLE", "UNAVAILABLE", "10"),
            (500, nil, "INTERNAL", "INTERNAL", nil),
            (500, 5, "INTERNAL", "INTERNAL", "5"),
            (429, nil, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", nil),
            (429, 30, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "30"),
            (400, nil, "INVALID_ARGUMENT", nil, nil),
            (401, nil, "UNAUTHENTICATED", nil, nil),
            (403, nil, "PERMISSION_DENIED", nil, nil),
            (404, nil, "NOT_FOUND", nil, nil),
            (409, nil, "ABORTED", nil, nil),
            (416, nil, "OUT_OF_RANGE", nil, nil),
            (418, nil, "FAILED_PRECONDITION", nil, nil),
            (499, nil, "CANCELLED", nil, nil),
            (501, nil, "UNIMPLEMENTED", nil, nil),
            (502, 3, "UNKNOWN", nil, "3"),
            (504, nil, "DEADLINE_EXCEEDED", nil, nil),
        ]
        for (http, retry, status, fcm, header) in rows {
            let e = V1Error.fault(status: http, retryAfter: retry)
            XCTAssertEqual(e.code, http)
            XCTAssertEqual(e.status, status, "\(http)")
            XCTAssertEqual(e.fcmError, fcm, "\(http)")
            XCTAssertEqual(e.response.headers.first { $0.0 == "Retry-After" }?.1, header, "\(http)")
        }
    }

    func testTheBodyIsGooglesShapeInGooglesOrder() {
        let e = V1Error.invalidArgument("bad", [FieldViolation(field: "message.a", description: "x \"y\""),
                                               FieldViolation(field: "message.b", description: "z")])
        XCTAssertEqual(e.body, #"{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"},{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.a","description":"x \"y\""},{"field":"message.b","description":"z"}]}]}}"#)
        XCTAssertEqual(V1Error.notFound.body, #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}"#)
        XCTAssertEqual(V1Error.invalidPayload("p", [FieldViolation(field: "message", description: "d")]).body,
                       #"{"error":{"code":400,"message":"p","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message","description":"d"}]}]}}"#)
        XCTAssertEqual(V1Error.unauthenticated.response.headers.first { $0.0 == "WWW-Authenticate" }?.1,
                       #"Bearer realm="https://accounts.google.com/""#)
    }
}
