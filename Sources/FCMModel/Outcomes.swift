/// The outcome for one token of a batch subscription change (the Instance ID room words them).
public enum BatchOutcome: Sendable, Equatable {
    case ok
    /// No device has the token (or it is not the sender's).
    case notFound
    /// The token or topic is malformed.
    case invalidArgument
    /// The device is subscribed to as many topics as a device may be.
    case tooManyTopics
}

/// What a v1 topic subscription change came to.
public enum V1SubscriptionOutcome: Sendable, Equatable {
    case ok
    /// No such token or fid, or its app was uninstalled.
    case unregistered
    /// The device belongs to another project.
    case senderMismatch
    /// Unsubscribing a topic the device does not have.
    case notSubscribed
    /// The device is at the most topics a device may have.
    case tooManyTopics
}

/// What a push's target is, as the push endpoint looks it up (`Engine.webPushTarget`); the Web
/// Push room words each.
public enum WebPushTarget: Sendable {
    /// Deliverable: the device and its subscription.
    case active(Device, WebPushSubscription)
    /// No subscription has this id (or a reset forgot it).
    case unknown
    /// The subscription takes no more pushes: ended, or its device uninstalled, replaced or deleted.
    case gone(WebPushGone, senderID: String?)
}

/// Why a subscription takes no more pushes.
public enum WebPushGone: Sendable, Equatable {
    /// Its device was deleted.
    case deviceDeleted
    /// The subscription was ended (the user revoked the permission).
    case ended
    /// Its device is uninstalled or its token replaced (the device's state).
    case device(DeviceState)
}

/// A device-group operation's failure, and its sentence (the legacy room answers `{"error": message}`).
public struct GroupError: Error, Sendable {
    /// Refused as asked, or the store failed (the legacy room words each).
    public enum Kind: Sendable, Equatable { case refused, storeFailed }
    public var kind: Kind
    public var message: String
    package static func bad(_ m: String) -> GroupError { GroupError(kind: .refused, message: m) }

    package init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }
}
