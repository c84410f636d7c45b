public import RoomKit
import FCMEngine
public import FCMModel
public import HTTPServer

/// `/api/v1/xmpp`: the open XMPP (CCS) connections.
extension ControlAPI {
    /// `GET /api/v1/xmpp/connections`.
    public func connections(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(xmppConnections(), c.query) { $0 }
    }

    /// `POST /api/v1/xmpp:drain`: every connection.
    public func drainAll(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.list(xmppDrain(nil), next: nil))
    }

    /// `POST /api/v1/xmpp/connections/{id}:drain`.
    public func drain(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let id = c["id"]
        guard let first = xmppDrain(id).first else {
            throw .notFound("no open connection '\(id)' that is not draining already")
        }
        return ok(first)
    }
}
