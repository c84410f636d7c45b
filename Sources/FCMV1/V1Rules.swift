import FCMCore
// The rules a decoded v1 message must keep (docs/spec/fcm-v1.md section 1), each broken rule a
// 400 INVALID_ARGUMENT naming the field. Messages are Google's where known ("Recipient of the
// message is not set.", "The registration token is not a valid FCM registration token",
// "Message is too big"); the others follow the same plain style.

/// A broken rule: the answer's `message`, and the one BadRequest violation.
struct V1RuleError: Error, Equatable {
    let message: String
    let field: String
    let description: String

    init(message: String, field: String, description: String) {
        self.message = message
        self.field = field
        self.description = description
    }

    /// A rule whose answer and violation say the same thing.
    init(_ message: String, field: String) {
        self.init(message: message, field: field, description: message)
    }
}

/// The members of a decoded message (snake_case names) that the rules and the send read, found
/// in one pass over it. A member of the wrong JSON type is left nil (the decoder already
/// refused those).
struct V1MessageParts {
    var token: String?
    var fid: String?
    var topic: String?
    var condition: String?
    var data: JSONObject?
    var notification: JSONObject?
    var android: JSONObject?
    var apns: JSONObject?
    var webpush: JSONObject?
    var fcmOptions: JSONObject?

    private static let type = V1Schema.message
    private static let tokenField = type.fieldIndex(named: "token")!
    private static let fidField = type.fieldIndex(named: "fid")!
    private static let topicField = type.fieldIndex(named: "topic")!
    private static let conditionField = type.fieldIndex(named: "condition")!
    private static let dataField = type.fieldIndex(named: "data")!
    private static let notificationField = type.fieldIndex(named: "notification")!
    private static let androidField = type.fieldIndex(named: "android")!
    private static let apnsField = type.fieldIndex(named: "apns")!
    private static let webpushField = type.fieldIndex(named: "webpush")!
    private static let fcmOptionsField = type.fieldIndex(named: "fcm_options")!

    init(_ message: JSONObject) {
        for m in message.members {
            switch Self.type.fieldIndex(named: m.key) {
            case Self.tokenField: token = m.value.stringValue
            case Self.fidField: fid = m.value.stringValue
            case Self.topicField: topic = m.value.stringValue
            case Self.conditionField: condition = m.value.stringValue
            case Self.dataField: data = m.value.objectValue
            case Self.notificationField: notification = m.value.objectValue
            case Self.androidField: android = m.value.objectValue
            case Self.apnsField: apns = m.value.objectValue
            case Self.webpushField: webpush = m.value.objectValue
            case Self.fcmOptionsField: fcmOptions = m.value.objectValue
            default: break
            }
        }
    }
}

/// The rules of section 1, over a message already decoded by V1Decoder (snake_case names), and
/// the shapes they check (fid, analytics label, https URL, colour), for the server to reuse.
public enum V1Rules {
    /// Most topics a condition may name, each at most once.
    static let maxConditionTopics = 5
    /// Largest android `ttl`: four weeks.
    static let maxTTLSeconds: Int64 = SendParser.maxTimeToLive

    // MARK: - Target

    /// The recipient: exactly one of token, fid, topic, condition (the decoder already refused
    /// two of them). An fid is addressed as a token, with `byFID`.
    static func target(of message: V1MessageParts) throws(V1RuleError) -> (SendTarget, Bool) {
        if let token = message.token {
            guard isWellFormedToken(token) else {
                throw V1RuleError(message: "The registration token is not a valid FCM registration token",
                                  field: "message.token", description: "Invalid registration token")
            }
            return (.token(token), false)
        }
        if let fid = message.fid {
            guard isValidFID(fid) else {
                throw V1RuleError(message: "The Firebase installation ID is not a valid FID", field: "message.fid",
                                  description: "Invalid FID: expected 22 base64url characters, the first one c, d, e or f")
            }
            return (.token(fid), true)
        }
        if let topic = message.topic {
            let name = Topics.name(topic)
            guard Topics.isValidName(name) else {
                throw V1RuleError(message: "Invalid topic name", field: "message.topic",
                                  description: "Topic name must match [a-zA-Z0-9-_.~%]{1,900}, after an optional /topics/ prefix")
            }
            return (.topic(name), false)
        }
        if let condition = message.condition {
            try checkCondition(condition)
            return (.condition(condition), false)
        }
        throw V1RuleError("Recipient of the message is not set.", field: "message")
    }

    /// An installation id as v1's parser reads one (`isWellFormedInstallationID`).
    public static func isValidFID(_ fid: String) -> Bool { isWellFormedInstallationID(fid) }

    static func checkCondition(_ text: String) throws(V1RuleError) {
        func fail(_ description: String) -> V1RuleError {
            V1RuleError(message: Condition.invalidMessage, field: "message.condition", description: description)
        }
        guard text.utf8.count <= 10_000, let parsed = Condition.parse(text, maxOperators: 64) else {
            throw fail("Invalid condition expression: expected 'topic' in topics terms joined by && and ||")
        }
        var topics: [String] = []
        collectTopics(parsed, into: &topics)
        if topics.count > maxConditionTopics {
            throw fail("A condition may name at most \(maxConditionTopics) topics; this one names \(topics.count)")
        }
        var seen = Set<String>()
        for t in topics where !seen.insert(Topics.key(t)).inserted {
            throw fail("Topic '\(t)' appears more than once in the condition")
        }
    }

    static func collectTopics(_ c: Condition, into topics: inout [String]) {
        switch c {
        case .topic(let t): topics.append(t)
        case .and(let a, let b), .or(let a, let b):
            collectTopics(a, into: &topics)
            collectTopics(b, into: &topics)
        }
    }

    // MARK: - Payload and platform blocks

    /// Every rule but the target and the size, in the message's field order.
    static func check(_ message: V1MessageParts) throws(V1RuleError) {
        if let data = message.data { try checkDataKeys(data, at: "message.data") }
        if let n = message.notification {
            try checkImage(n["image"], at: "message.notification.image")
        }
        if let android = message.android { try checkAndroid(android) }
        if let apns = message.apns { try checkAPNs(apns) }
        if let webpush = message.webpush { try checkWebpush(webpush) }
        if let options = message.fcmOptions {
            try checkAnalyticsLabel(options, at: "message.fcm_options")
        }
    }

    /// v1 reserves the legacy words (`from`, `message_type`, `google…`, `gcm…`) and `notification`.
    public static func isReservedDataKey(_ key: String) -> Bool {
        SendParser.isReservedDataKey(key, orNotification: true)
    }

    static func checkDataKeys(_ data: JSONObject, at path: String) throws(V1RuleError) {
        for m in data.members where isReservedDataKey(m.key) {
            throw V1RuleError(
                message: "Invalid data payload key: \(V1Decoder.clip(m.key))", field: path,
                description: "The key \"\(V1Decoder.clip(m.key))\" is reserved: data keys may not be from, notification or message_type, nor start with google or gcm")
        }
    }

    static func checkAndroid(_ android: JSONObject) throws(V1RuleError) {
        if let ttl = android["ttl"]?.stringValue, case .success(let d) = V1Duration.parse(ttl) {
            if d.isNegative || d.seconds > maxTTLSeconds || (d.seconds == maxTTLSeconds && d.nanos > 0) {
                throw V1RuleError(message: "Invalid value for ttl: \(ttl) is not between 0s and \(maxTTLSeconds)s",
                                  field: "message.android.ttl",
                                  description: "ttl must be a duration from 0s to \(maxTTLSeconds)s (4 weeks)")
            }
        }
        if let data = android["data"]?.objectValue { try checkDataKeys(data, at: "message.android.data") }
        if let n = android["notification"]?.objectValue {
            let path = "message.android.notification"
            if let color = n["color"]?.stringValue, !isRGBColor(color) {
                throw V1RuleError(message: "Invalid color: \"\(V1Decoder.clip(color))\"", field: path + ".color",
                                  description: "color must be in the form #rrggbb")
            }
            if let count = n["notification_count"]?.numberValue?.int64, count < 0 {
                throw V1RuleError(message: "Invalid notification_count: \(count)", field: path + ".notification_count",
                                  description: "notification_count must not be negative")
            }
            try checkImage(n["image"], at: path + ".image")
        }
        if let options = android["fcm_options"]?.objectValue {
            try checkAnalyticsLabel(options, at: "message.android.fcm_options")
        }
    }

    static func checkAPNs(_ apns: JSONObject) throws(V1RuleError) {
        if let headers = apns["headers"]?.objectValue {
            for m in headers.members where m.key.lowercased() == "apns-priority" {
                let value = m.value.stringValue ?? ""
                guard value == "5" || value == "10" else {
                    throw V1RuleError(message: "Invalid apns-priority: \"\(V1Decoder.clip(value))\"", field: "message.apns.headers",
                                      description: "apns-priority must be \"5\" or \"10\"")
                }
            }
        }
        if let payload = apns["payload"]?.objectValue, let aps = payload["aps"] {
            guard case .object = aps else {
                throw V1RuleError(message: "Invalid APNs payload: aps must be an object", field: "message.apns.payload.aps",
                                  description: "aps must be a JSON object")
            }
        }
        if let options = apns["fcm_options"]?.objectValue {
            try checkAnalyticsLabel(options, at: "message.apns.fcm_options")
            try checkImage(options["image"], at: "message.apns.fcm_options.image")
        }
    }

    static func checkWebpush(_ webpush: JSONObject) throws(V1RuleError) {
        if let data = webpush["data"]?.objectValue { try checkDataKeys(data, at: "message.webpush.data") }
        if let options = webpush["fcm_options"]?.objectValue {
            if let link = options["link"]?.stringValue, !isHTTPS(link) {
                throw V1RuleError(message: "Invalid link: \"\(V1Decoder.clip(link))\"", field: "message.webpush.fcm_options.link",
                                  description: "link must be an HTTPS URL")
            }
            try checkAnalyticsLabel(options, at: "message.webpush.fcm_options")
        }
    }

    // MARK: - Shared shapes

    static func checkAnalyticsLabel(_ options: JSONObject, at path: String) throws(V1RuleError) {
        guard let label = options["analytics_label"]?.stringValue else { return }
        guard isValidAnalyticsLabel(label) else {
            throw V1RuleError(message: "Invalid analytics label: \"\(V1Decoder.clip(label))\"", field: path + ".analytics_label",
                              description: "analytics_label must match ^[a-zA-Z0-9-_.~%]{1,50}$")
        }
    }

    /// `^[a-zA-Z0-9-_.~%]{1,50}$`: the topic alphabet, 50 characters at most.
    public static func isValidAnalyticsLabel(_ label: String) -> Bool {
        label.utf8.count <= 50 && Topics.isValidName(label)
    }

    static func checkImage(_ value: JSONValue?, at path: String) throws(V1RuleError) {
        guard let url = value?.stringValue else { return }
        guard isHTTPS(url) else {
            throw V1RuleError(message: "Invalid image URL: \"\(V1Decoder.clip(url))\"", field: path,
                              description: "image must be an HTTPS URL")
        }
    }

    /// `https://` and a host (ASCII case-insensitive scheme), no spaces or control characters.
    public static func isHTTPS(_ url: String) -> Bool {
        guard hasPrefixIgnoringCase(url.utf8, "https://") else { return false }
        let rest = url.utf8.dropFirst(8)
        guard let first = rest.first, first != UInt8(ascii: "/") else { return false }
        return !url.utf8.contains { $0 <= 32 || $0 == 127 }
    }

    /// `#rrggbb`, hex digits in either case.
    public static func isRGBColor(_ color: String) -> Bool {
        let bytes = Array(color.utf8)
        guard bytes.count == 7, bytes[0] == UInt8(ascii: "#") else { return false }
        return bytes.dropFirst().allSatisfy { FormBody.hexValue($0) != nil }
    }
}
