import FCMCore

/// Mozilla's autopush protocol's messages (docs/real-clients.md): what a browser sends, read, and
/// what the mock answers, written as compact JSON in the order autopush writes its members.
enum AutopushMessage {
    /// A client message, read: its `messageType` (nil for `{}`, a ping) and its members.
    struct Incoming {
        let type: String?
        let object: JSONObject
        var isPing: Bool { type == nil && object.count == 0 }

        func string(_ name: String) -> String? { object[name]?.stringValue }
        func int(_ name: String) -> Int? { object[name]?.numberValue?.int64.map(Int.init) }
    }

    /// Why a text frame is no client message: close 1007 with this reason.
    static func parse(_ text: String) -> Result<Incoming, AutopushClose> {
        guard let value = try? JSONParser.parse(Array(text.utf8)) else { return .failure(.invalidPayload("the message is not JSON")) }
        guard let o = value.objectValue else { return .failure(.invalidPayload("the message is not a JSON object")) }
        if let t = o["messageType"], t.stringValue == nil { return .failure(.invalidPayload("messageType must be a string")) }
        return .success(Incoming(type: o["messageType"]?.stringValue, object: o))
    }

    /// Whether `s` is a channel id as autopush takes it: a lowercase, dashed UUID.
    static func isChannelID(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        guard bytes.count == 36 else { return false }
        for (i, c) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) {
                return false
            }
        }
        return true
    }

    /// Whether `s` could be a uaid the mock issued: 32 lowercase hexadecimal digits.
    static func isUAID(_ s: String) -> Bool {
        s.utf8.count == 32 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    // MARK: Answers

    static func hello(uaid: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("messageType"); w.value("hello")
        w.key("uaid"); w.value(uaid)
        w.key("status"); w.value(200)
        w.key("use_webpush"); w.value(true)
        w.key("broadcasts"); w.beginObject(); w.endObject()
        w.endObject()
        return w.string
    }

    static func registered(channelID: String, endpoint: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("messageType"); w.value("register")
        w.key("channelID"); w.value(channelID)
        w.key("status"); w.value(200)
        w.key("pushEndpoint"); w.value(endpoint)
        w.endObject()
        return w.string
    }

    static func unregistered(channelID: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("messageType"); w.value("unregister")
        w.key("channelID"); w.value(channelID)
        w.key("status"); w.value(200)
        w.endObject()
        return w.string
    }

    /// A refused request, in autopush's shape.
    static func refused(_ type: String, channelID: String?, status: Int, reason: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("messageType"); w.value(type)
        if let channelID { w.key("channelID"); w.value(channelID) }
        w.key("status"); w.value(status)
        w.key("reason"); w.value(reason)
        w.endObject()
        return w.string
    }

    /// A push: its body base64url without padding and its coding's headers; neither for a push
    /// without a body.
    static func notification(channelID: String, version: String, body: [UInt8]?, fields: [(String, String)]) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("messageType"); w.value("notification")
        w.key("channelID"); w.value(channelID)
        w.key("version"); w.value(version)
        if let body, !body.isEmpty {
            w.key("data"); w.value(base64URLEncode(body))
            w.key("headers"); w.beginObject()
            for (name, value) in fields {
                w.key(name); w.value(value)
            }
            w.endObject()
        }
        w.endObject()
        return w.string
    }

}

/// A close the room decides, with its RFC 6455 code and reason.
enum AutopushClose: Error {
    /// 1007: the text is no JSON object.
    case invalidPayload(String)
    /// 1008: against the protocol (no hello first, an unknown messageType).
    case policy(String)
    /// 1000: the protocol's own end (a refused hello).
    case normal(String)

    var code: UInt16 {
        switch self {
        case .invalidPayload: 1007
        case .policy: 1008
        case .normal: 1000
        }
    }

    var reason: String {
        switch self {
        case .invalidPayload(let r), .policy(let r), .normal(let r): r
        }
    }
}
