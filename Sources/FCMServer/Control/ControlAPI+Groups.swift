import FCMEngine
import HTTPServer

/// `/api/v1/groups`: device groups (notification keys).
extension ControlAPI {
    /// `GET /api/v1/groups`.
    func groups(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.groups(), c.query, Render.group)
    }

    /// `GET /api/v1/groups/{key}`.
    func group(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.group(try engine.group(c["key"])))
    }
}
