import FCMEngine
import FCMCore
import HTTPServer

/// `/api/v1/faults`: injected failures.
extension ControlAPI {
    /// `POST /api/v1/faults`.
    func addFault(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(try engine.addFault(try c.jsonBody()).json, status: 201)
    }

    /// `GET /api/v1/faults`.
    func faults(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.faults(), c.query) { $0.json }
    }

    /// `DELETE /api/v1/faults`: every one.
    func deleteFaults(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteFault(nil)
        return Self.noContent
    }

    /// `DELETE /api/v1/faults/{id}`.
    func deleteFault(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteFault(c["id"])
        return Self.noContent
    }
}
