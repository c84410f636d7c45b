import RoomKit
import FCMModel
import HTTPServer

/// A fault naming a group or Instance ID path (`when.path`), answered as the legacy send path
/// answers one: a status with its plain-text reason (a 503 always with `Retry-After`), a dropped
/// connection, or the normal answer after a delay.
enum PathFaults {
    static func answer(_ fault: RequestFault?, to responder: HTTPResponder, otherwise answer: () -> HTTPResponse) {
        switch fault {
        case .status(let code, let retry, _)?:
            responder.send(FCMSendRoute.faultStatus(code, retryAfter: retry))
        case .drop?:
            responder.send(.dropConnection)
        case .delay(let ms, _)?:
            responder.send(answer(), afterMillis: Int(ms))
        default:
            responder.send(answer())
        }
    }
}
