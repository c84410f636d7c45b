import RoomKit
public import FCMEngine
public import HTTPServer

/// The event stream's readers are HTTP streams.
extension HTTPStream: EventReader {}
