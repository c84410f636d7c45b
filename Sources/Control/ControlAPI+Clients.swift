public import RoomKit
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// `/api/v1/clients`: real receiving clients (docs/real-clients.md): Firefox's uaids.
extension ControlAPI {
    /// `GET /api/v1/clients?kind=&connected=`: oldest first.
    public func clients(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        var kind: ClientKind?
        if let k = c.query["kind"] {
            guard let known = ClientKind(rawValue: k) else {
                throw .badRequest("kind must be one of \(ClientKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kind = known
        }
        var connected: Bool?
        switch c.query["connected"] {
        case nil: break
        case "true": connected = true
        case "false": connected = false
        case let v?: throw .badRequest("connected must be true or false, got '\(v)'")
        }
        // Paged as every list (`limit`, `cursor`), oldest first.
        return try paged(engine.clients(kind: kind, connected: connected), c.query) { $0 }
    }

    /// `GET /api/v1/clients/{id}`.
    public func client(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(try engine.client(c["id"]))
    }

    /// `POST /api/v1/clients/{id}:disconnect`, `{"backoff":true}` optional: closes the client's
    /// connection (autopush's back-off code with `backoff`); 200 with the client.
    public func disconnectClient(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        var backoff = false
        if !c.request.body.isEmpty {
            let body = try c.jsonBody()
            try body.allow(["backoff"])
            backoff = try body.bool("backoff") ?? false
        }
        _ = try engine.disconnectClient(c["id"], backoff: backoff)
        return ok(try engine.client(c["id"]))
    }

    /// `DELETE /api/v1/clients/{id}`: forgets the client with its devices and closes its
    /// connection; 204.
    public func deleteClient(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteClient(c["id"])
        return Self.noContent
    }
}
