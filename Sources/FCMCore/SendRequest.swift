/// `priority` of a downstream message.
public enum Priority: String, Sendable, Equatable {
    case normal, high
}

/// The body format of an HTTP send (seeds Tables 1 and 3); XMPP stanzas are always JSON.
public enum BodyFormat: String, Sendable, Equatable {
    case json, plain
}

/// Whom a send addresses (seeds Table 1 "targets").
public enum SendTarget: Sendable, Equatable {
    /// `to` a registration token (or a device group's notification key: the server tells them apart).
    case token(String)
    /// `registration_ids`: 1 to 1000 tokens.
    case multicast([String])
    /// `to: "/topics/NAME"`, kept as the bare name.
    case topic(String)
    /// `condition`: a topic expression.
    case condition(String)
    /// No target at all: every recipient fails with `MissingRegistration`.
    case missing

    /// The `target.kind` the control API shows.
    public var kind: String {
        switch self {
        case .token: return "token"
        case .multicast: return "multicast"
        case .topic: return "topic"
        case .condition: return "condition"
        case .missing: return "token"
        }
    }

    /// The `target.value` the control API shows.
    public var value: String? {
        switch self {
        case .token(let t): return t
        case .multicast(let ts): return ts.count == 1 ? ts[0] : "\(ts.count) tokens"
        case .topic(let t): return Topics.prefix + t
        case .condition(let c): return c
        case .missing: return nil
        }
    }

    /// The name of a topic target.
    public var topicName: String? {
        if case .topic(let name) = self { return name }
        return nil
    }

    /// Topic and condition sends are answered `{"message_id":N}` (seeds Table 6).
    public var isTopicOrCondition: Bool {
        switch self {
        case .topic, .condition: return true
        default: return false
        }
    }

    /// Why a topic name or condition is refused like a JSON syntax error (a 400 over HTTP, an
    /// `INVALID_JSON` nack over XMPP); nil when the target is fine.
    public func invalidReason(maxConditionOperators: Int) -> String? {
        switch self {
        case .topic(let name) where !Topics.isValidName(name):
            return "Topic name format is invalid"
        case .condition(let text) where Condition.parse(text, maxOperators: maxConditionOperators) == nil:
            return Condition.invalidMessage
        default:
            return nil
        }
    }

    /// The tokens addressed directly, in request order.
    public var tokens: [String] {
        switch self {
        case .token(let t): return [t]
        case .multicast(let ts): return ts
        default: return []
        }
    }
}

/// The options of a send (seeds Table 1 "options"), after validation.
public struct SendOptions: Sendable, Equatable {
    /// Seconds; 4 weeks when absent.
    public static let defaultTimeToLive: Int64 = 2_419_200

    public var collapseKey: String?
    /// As sent; `effectivePriority` applies the default.
    public var priority: Priority?
    public var timeToLive: Int64 = SendOptions.defaultTimeToLive
    public var restrictedPackageName: String?
    public var contentAvailable = false
    public var mutableContent = false
    public var dryRun = false
    public var delayWhileIdle: Bool?

    /// Default options.
    public init() {}
}

/// A send request after parsing and validation: what both listeners hand to the send path.
public struct SendRequest: Sendable {
    public var format: BodyFormat
    public var target: SendTarget
    public var options: SendOptions
    public var data: JSONObject?
    public var notification: JSONObject?
    /// A rule the whole message breaks (InvalidTtl, InvalidDataKey, MessageTooBig,
    /// MissingRegistration, InvalidParameters in plain text): every recipient fails with it, in
    /// an otherwise normal 200 answer, as the seeds' Table 9 says.
    public var messageError: FCMErrorCode?
    /// Why `messageError` was chosen, for the message record (never sent on the wire).
    public var messageErrorDetail: String?
    /// `access_token_auth: true` (firebase-admin sent a Bearer token instead of a server key).
    public var accessTokenAuth = false
    /// A v1 message's android, apns, webpush and fcm_options blocks; nil for a legacy send.
    public var platforms: PlatformConfigs?

    /// An empty request of `format`.
    public init(format: BodyFormat, target: SendTarget = .missing) {
        self.format = format
        self.target = target
        self.options = SendOptions()
    }

    /// Whether an Apple device gets it through APNs: with a notification payload or
    /// `content_available: true` (seeds Table 1); otherwise FCM delivers it itself, so the app's
    /// APNs credential does not matter.
    public var goesThroughAPNs: Bool { notification != nil || options.contentAvailable }

    /// Notification messages default to high priority, data messages to normal (seeds Table 1);
    /// a v1 message whose notification is only in its android block is a notification message
    /// to an Android device.
    public var effectivePriority: Priority {
        options.priority ?? (notification != nil || platforms?.android?["notification"]?.objectValue != nil ? .high : .normal)
    }
}

/// What parsing a send body gives.
public enum SendParseOutcome: Sendable {
    /// A request to run through the send path (possibly carrying a `messageError`).
    case request(SendRequest)
    /// HTTP 400 with this short plain-text reason (JSON only; the text has no trailing newline).
    case badRequest(String)
    /// HTTP 400 with `{"error":"InvalidParameters"}`: a parameter whose name is not part of the
    /// protocol. The detail goes to the message record and the body's `error_description`.
    case invalidParameters(String)
}
