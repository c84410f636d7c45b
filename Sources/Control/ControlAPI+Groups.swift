public import RoomKit
import FCMEngine
public import FCMModel
public import HTTPServer

/// `/api/v1/groups`: device groups (notification keys).
extension ControlAPI {
    /// `GET /api/v1/groups`.
    public func groups(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.groups(), c.query, Render.group)
    }

    /// `GET /api/v1/groups/{key}`.
    public func group(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.group(try engine.group(c["key"])))
    }
}
