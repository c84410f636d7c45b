import FCMCore
// The shape of an HTTP v1 `messages:send` body (docs/spec/fcm-v1.md section 1): the message
// types firebase-admin 7.7 encodes, as a table the proto3 JSON decoder (V1Decoder.swift) walks.
// Field names are the proto names (snake_case); the lowerCamelCase spelling is derived.

/// The JSON type of one field, as proto3 JSON maps it.
indirect enum V1FieldKind: Sendable {
    case string
    case bool
    /// An `int32`: a JSON number or a decimal string.
    case int32
    /// A `float`: a JSON number or a numeric string.
    case float
    /// A proto enum: its value names in upper case; `typeName` is its full proto name.
    case enumeration([String])
    /// `google.protobuf.Duration`: `"<seconds>[.<fraction>]s"`.
    case duration
    /// `google.protobuf.Timestamp`: RFC 3339.
    case timestamp
    /// A nested message.
    case message(V1MessageType)
    /// `map<string, string>`; `entryType` names the map entry for error messages.
    case stringMap(entryType: String)
    /// `google.protobuf.Struct`: any JSON object, kept as sent.
    case structValue
    /// `repeated` of the element kind.
    case repeated(V1FieldKind)
}

/// One field of a message type.
struct V1Field: Sendable {
    let name: String
    let camelName: String
    let kind: V1FieldKind
    /// The oneof the field belongs to, if any (`target` for the message's recipient).
    let oneof: String?

    init(_ name: String, _ kind: V1FieldKind, oneof: String? = nil) {
        self.name = name
        self.camelName = V1Field.lowerCamel(name)
        self.kind = kind
        self.oneof = oneof
    }

    /// `restricted_package_name` → `restrictedPackageName`, as protoc derives JSON names.
    static func lowerCamel(_ snake: String) -> String {
        var out = ""
        var upper = false
        for ch in snake {
            if ch == "_" {
                upper = true
            } else if upper {
                out += ch.uppercased()
                upper = false
            } else {
                out.append(ch)
            }
        }
        return out
    }
}

/// A message type: its full proto name (for `Invalid value at … (type.googleapis.com/NAME)`)
/// and its fields.
final class V1MessageType: Sendable {
    let typeName: String
    let fields: [V1Field]
    /// Each field's two spellings as UTF-8, in table order: every member of every v1 body is
    /// looked up here, by its bytes (a proto field name matches exactly, not by Unicode
    /// equivalence), a short scan that beats hashing the key for a handful of fields.
    private let spellings: [(bytes: [UInt8], field: Int)]
    /// The oneofs the fields belong to, by name (a field's `oneofIndex` indexes it).
    let oneofs: [String]
    /// Per field, the index of its oneof in `oneofs`, or -1.
    let oneofIndex: [Int]

    init(_ typeName: String, _ fields: [V1Field]) {
        precondition(fields.count <= 64, "the decoder keeps one bit a field in a UInt64")
        self.typeName = typeName
        self.fields = fields
        var spellings: [(bytes: [UInt8], field: Int)] = []
        for (i, f) in fields.enumerated() {
            spellings.append((Array(f.name.utf8), i))
            if f.camelName != f.name { spellings.append((Array(f.camelName.utf8), i)) }
        }
        self.spellings = spellings
        var oneofs: [String] = []
        self.oneofIndex = fields.map { f in
            guard let o = f.oneof else { return -1 }
            if let i = oneofs.firstIndex(of: o) { return i }
            oneofs.append(o)
            return oneofs.count - 1
        }
        self.oneofs = oneofs
    }

    var typeURL: String { "type.googleapis.com/" + typeName }

    /// The index in `fields` of the field named `key` in either spelling, compared as bytes.
    func fieldIndex(named key: String) -> Int? {
        var key = key
        return key.withUTF8 { k -> Int? in
            for s in spellings where s.bytes.count == k.count {
                if s.bytes.withUnsafeBytes({ $0.elementsEqual(UnsafeRawBufferPointer(k)) }) { return s.field }
            }
            return nil
        }
    }

    /// The field named `key` in either spelling.
    func field(named key: String) -> V1Field? {
        fieldIndex(named: key).map { fields[$0] }
    }
}

/// The v1 message types (FCM v1 REST reference: `Message`, `AndroidConfig`, `ApnsConfig`,
/// `WebpushConfig`, …), limited to what firebase-admin 7.7 sends.
enum V1Schema {
    static let pkg = "google.firebase.fcm.v1."

    static let notification = V1MessageType(pkg + "Notification", [
        V1Field("title", .string), V1Field("body", .string), V1Field("image", .string),
    ])

    static let color = V1MessageType("google.type.Color", [
        V1Field("red", .float), V1Field("green", .float), V1Field("blue", .float),
        V1Field("alpha", .float),
    ])

    static let lightSettings = V1MessageType(pkg + "LightSettings", [
        V1Field("color", .message(color)), V1Field("light_on_duration", .duration),
        V1Field("light_off_duration", .duration),
    ])

    static let notificationPriorities = [
        "PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH",
        "PRIORITY_MAX",
    ]
    static let visibilities = ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"]
    static let proxies = ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]
    static let androidPriorities = ["NORMAL", "HIGH"]

    static let androidNotification = V1MessageType(pkg + "AndroidNotification", [
        V1Field("title", .string), V1Field("body", .string), V1Field("icon", .string),
        V1Field("color", .string), V1Field("sound", .string), V1Field("tag", .string),
        V1Field("click_action", .string), V1Field("body_loc_key", .string),
        V1Field("body_loc_args", .repeated(.string)), V1Field("title_loc_key", .string),
        V1Field("title_loc_args", .repeated(.string)), V1Field("channel_id", .string),
        V1Field("ticker", .string), V1Field("sticky", .bool), V1Field("event_time", .timestamp),
        V1Field("local_only", .bool), V1Field("notification_priority", .enumeration(notificationPriorities)),
        V1Field("default_sound", .bool), V1Field("default_vibrate_timings", .bool),
        V1Field("default_light_settings", .bool), V1Field("vibrate_timings", .repeated(.duration)),
        V1Field("visibility", .enumeration(visibilities)), V1Field("notification_count", .int32),
        V1Field("light_settings", .message(lightSettings)), V1Field("image", .string),
        V1Field("proxy", .enumeration(proxies)),
    ])

    static let androidFCMOptions = V1MessageType(pkg + "AndroidFcmOptions", [
        V1Field("analytics_label", .string),
    ])

    static let android = V1MessageType(pkg + "AndroidConfig", [
        V1Field("collapse_key", .string), V1Field("priority", .enumeration(androidPriorities)),
        V1Field("ttl", .duration), V1Field("restricted_package_name", .string),
        V1Field("data", .stringMap(entryType: pkg + "AndroidConfig.DataEntry")),
        V1Field("notification", .message(androidNotification)),
        V1Field("fcm_options", .message(androidFCMOptions)), V1Field("direct_boot_ok", .bool),
        V1Field("bandwidth_constrained_ok", .bool), V1Field("restricted_satellite_ok", .bool),
    ])

    static let apnsFCMOptions = V1MessageType(pkg + "ApnsFcmOptions", [
        V1Field("analytics_label", .string), V1Field("image", .string),
    ])

    static let apns = V1MessageType(pkg + "ApnsConfig", [
        V1Field("headers", .stringMap(entryType: pkg + "ApnsConfig.HeadersEntry")),
        V1Field("payload", .structValue), V1Field("fcm_options", .message(apnsFCMOptions)),
        V1Field("live_activity_token", .string),
    ])

    static let webpushFCMOptions = V1MessageType(pkg + "WebpushFcmOptions", [
        V1Field("link", .string), V1Field("analytics_label", .string),
    ])

    static let webpush = V1MessageType(pkg + "WebpushConfig", [
        V1Field("headers", .stringMap(entryType: pkg + "WebpushConfig.HeadersEntry")),
        V1Field("data", .stringMap(entryType: pkg + "WebpushConfig.DataEntry")),
        V1Field("notification", .structValue), V1Field("fcm_options", .message(webpushFCMOptions)),
    ])

    static let fcmOptions = V1MessageType(pkg + "FcmOptions", [V1Field("analytics_label", .string)])

    static let message = V1MessageType(pkg + "Message", [
        V1Field("data", .stringMap(entryType: pkg + "Message.DataEntry")),
        V1Field("notification", .message(notification)), V1Field("android", .message(android)),
        V1Field("webpush", .message(webpush)), V1Field("apns", .message(apns)),
        V1Field("fcm_options", .message(fcmOptions)),
        V1Field("token", .string, oneof: "target"), V1Field("topic", .string, oneof: "target"),
        V1Field("condition", .string, oneof: "target"), V1Field("fid", .string, oneof: "target"),
    ])

    static let sendRequest = V1MessageType(pkg + "SendMessageRequest", [
        V1Field("validate_only", .bool), V1Field("message", .message(message)),
    ])
}
