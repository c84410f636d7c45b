import RoomKit
import FCMModel
import HTTPServer

/// A fault naming a group or Instance ID path (`when.path`), answered as the legacy send path
/// answers one: a status with its plain-text reason (a 503 always with `Retry-After`), a dropped
/// connection, or the normal answer after a delay.
enum PathFaults {
    static func answer(_ fault: RequestFault?, to responder: HTTPResponder, otherwise answer: () -> HTTPResponse) {
        // No error of their own: `Engine.pathFault` fires none there.
        FaultAnswer.send(fault, to: responder, status: FCMSendRoute.faultStatus, error: { _ in answer() }, otherwise: answer)
    }
}
