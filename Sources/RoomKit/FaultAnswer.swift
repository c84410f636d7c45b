public import FCMModel
public import HTTPServer

/// A request-wide fault a room answers a call with, whatever the call: its status in the room's
/// shape, the room's own error it names, a dropped connection, or the normal answer that much
/// later.
public enum FaultAnswer {
    /// Sends what `fault` makes of a call (`status` for a status with its `Retry-After`, `error`
    /// for an error of the room's own); the normal answer (`answer`) at once when none fired.
    public static func send(_ fault: RequestFault?, to responder: HTTPResponder, status: (Int, Int64?) -> HTTPResponse,
                            error: (String) -> HTTPResponse, otherwise answer: () -> HTTPResponse) {
        switch fault {
        case .status(let code, let retry, _)?: responder.send(status(code, retry))
        case .protocolError(let name, _)?: responder.send(error(name))
        case .drop?: responder.send(.dropConnection)
        case .delay(let ms, _)?: responder.send(answer(), afterMillis: Int(ms))
        case nil: responder.send(answer())
        }
    }
}
