public import RoomKit
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// `/api/v1/faults`: injected failures.
extension ControlAPI {
    /// `POST /api/v1/faults`.
    public func addFault(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let fault = try Fault.parse(try c.jsonBody(), protocolErrors: engine.faultErrors)
        return ok(engine.addFault(fault).json, status: 201)
    }

    /// `GET /api/v1/faults`.
    public func faults(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.faults(), c.query) { $0.json }
    }

    /// `DELETE /api/v1/faults`: every one.
    public func deleteFaults(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteFault(nil)
        return Self.noContent
    }

    /// `DELETE /api/v1/faults/{id}`.
    public func deleteFault(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteFault(c["id"])
        return Self.noContent
    }
}
