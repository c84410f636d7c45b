public import FCMCore
// Decodes and validates an HTTP v1 `messages:send` body (docs/spec/fcm-v1.md sections 1 and 2)
// into a `V1Send`: proto3 JSON decoding in V1Decoder.swift, the message rules in V1Rules.swift.

/// Turns a `messages:send` body into a send or Google's 400 answer. Pure: no I/O, no state.
public enum V1Parser {
    /// Most payload bytes (data + notification, keys and values, as `SendParser.payloadSize`
    /// counts them) a v1 message may carry, whatever its target.
    public static let maxPayloadBytes = 4096

    /// Parses a body's bytes. Malformed JSON is `invalidPayload` with Google's
    /// `Invalid JSON payload received. <reason>\n<context>\n<caret>` text and no violations.
    public static func parse(_ body: [UInt8]) -> V1ParseOutcome {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            return .invalidPayload(message: malformedMessage(error, body), violations: [])
        }
        return parse(value)
    }

    /// Parses an already-decoded body.
    public static func parse(_ value: JSONValue) -> V1ParseOutcome {
        guard case .object(let root) = value else {
            return .invalidPayload(
                message: "Invalid JSON payload received. Unknown name \"\": Root element must be a message.",
                violations: [])
        }
        let request: JSONObject
        do {
            request = try V1Decoder.decode(root, as: V1Schema.sendRequest, at: "")
        } catch {
            let violations = error.field.map { [FieldViolation(field: $0, description: error.message)] } ?? []
            return .invalidPayload(message: error.message, violations: violations)
        }
        let message = request["message"]?.objectValue ?? JSONObject()
        let validateOnly = request["validate_only"]?.boolValue ?? false
        do {
            return .send(try build(message, validateOnly: validateOnly))
        } catch {
            return .invalidArgument(message: error.message,
                                    violations: [FieldViolation(field: error.field, description: error.description)])
        }
    }

    /// Checks every rule of the decoded message and builds the send.
    static func build(_ decoded: JSONObject, validateOnly: Bool) throws(V1RuleError) -> V1Send {
        let message = V1MessageParts(decoded)
        var request = SendRequest(format: .json)
        var byFID = false
        (request.target, byFID) = try V1Rules.target(of: message)
        try V1Rules.check(message)
        if let data = message.data, data.count > 0 { request.data = data }
        if let notification = message.notification, notification.count > 0 { request.notification = notification }
        if let android = message.android {
            request.options.collapseKey = android["collapse_key"]?.stringValue
            request.options.priority = android["priority"]?.stringValue.flatMap(Priority.init(rawValue:))
            request.options.restrictedPackageName = android["restricted_package_name"]?.stringValue
            if let ttl = android["ttl"]?.stringValue, case .success(let d) = V1Duration.parse(ttl) {
                request.options.timeToLive = d.wholeSeconds
            }
        }
        request.options.dryRun = validateOnly
        request.platforms = PlatformConfigs(
            android: message.android, apns: message.apns, webpush: message.webpush, fcmOptions: message.fcmOptions)
        let size = SendParser.payloadSize(data: request.data, notification: request.notification)
        if size > maxPayloadBytes {
            throw V1RuleError(message: "Message is too big", field: "message",
                              description: "The message payload (data and notification) is \(size) bytes; the limit is \(maxPayloadBytes) bytes.")
        }
        return V1Send(request: request, byFID: byFID, validateOnly: validateOnly)
    }

    // MARK: - Malformed JSON

    /// Google's text for a body that is not JSON: the reason, then up to 20 bytes either side of
    /// the offending byte and a caret under it.
    static func malformedMessage(_ error: JSONParseError, _ body: [UInt8]) -> String {
        let reason: String
        switch error.kind {
        case .unexpectedEnd: reason = "Unexpected end of string. Expected a value."
        case .unexpectedCharacter, .controlCharacterInString: reason = "Unexpected token."
        case .trailingData: reason = "Parsing terminated before end of input."
        case .invalidNumber: reason = "Unable to parse number."
        case .invalidEscape: reason = "Invalid escape sequence."
        case .invalidUTF8: reason = "Encountered non UTF-8 code points."
        case .loneSurrogate: reason = "Invalid unicode code point."
        case .tooDeep: reason = "Message too deep. Max recursion depth reached."
        case .duplicateKey(let key): reason = "Duplicate key \"\(V1Decoder.clip(key))\"."
        }
        let context = 20
        let at = min(max(error.offset, 0), body.count)
        let begin = max(at - context, 0)
        let end = min(at + context, body.count)
        // Line breaks inside the excerpt would move the caret off its column.
        let excerpt = body[begin..<end].map { $0 == 10 || $0 == 13 || $0 == 9 ? UInt8(ascii: " ") : $0 }
        let segment = String(decoding: excerpt, as: UTF8.self)
        // The caret sits under the offending character: count the characters before it.
        let prefix = String(decoding: excerpt[0..<(at - begin)], as: UTF8.self)
        return "Invalid JSON payload received. \(reason)\n\(segment)\n"
            + String(repeating: " ", count: prefix.count) + "^"
    }
}
