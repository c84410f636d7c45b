package import FCMCore

/// A fault injected through the control API: FCM misbehaving on purpose. The control room
/// reads and shows it (its JSON); the engine keeps and fires it.
public struct Fault: Sendable {
    /// What a fault does when it fires.
    package enum Action: Sendable, Equatable {
        /// Answer the whole request with this status (and how long to wait, when given).
        case status(Int, retryAfter: Int64?)
        /// Fail the matching recipients with this error inside a normal answer.
        case error(FCMErrorCode)
        /// Answer with this error of the room's own (an APNs reason: `FaultErrors`).
        case protocolError(String)
        /// Answer normally, this many milliseconds late.
        case delay(Int64)
        /// Drop the connection without an answer.
        case closeConnection
    }

    package var id: String
    package var transport: String?
    package var path: String?
    package var senderID: String?
    package var token: String?
    package var topic: String?
    package var action: Action
    /// How many more times it fires; nil: until deleted.
    package var remaining: Int64?
    package var fired: Int64 = 0
    package var createdAt: Int64

    /// The request-level part of `when`: transport, path, sender and topic (the token is checked
    /// per recipient, or against any recipient for request-level actions).
    package func matches(transport t: Transport, path p: String, senderID s: String?, topic: String?) -> Bool {
        guard names(transport: t) else { return false }
        if let path, path != p { return false }
        if let senderID, senderID != s { return false }
        // Topic names match without regard to case, as sends match subscribers.
        if let want = self.topic, Topics.key(want) != topic.map(Topics.key) { return false }
        return true
    }

    /// Whether `when.transport` takes transport `t`: `t` itself, `any`, or none given.
    package func names(transport t: Transport) -> Bool {
        transport == nil || transport == "any" || transport == t.rawValue
    }

    package init(id: String, action: Action, createdAt: Int64) {
        self.id = id
        self.action = action
        self.createdAt = createdAt
    }
}
