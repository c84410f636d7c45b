/// Turns HTTP send bodies (JSON, seeds Table 1; plain text, seeds Table 3) into `SendRequest`s,
/// applying every validation rule of the protocol. Pure: no I/O, no state.
public enum SendParser {
    /// Most registration ids one multicast may carry.
    public static let maxRegistrationIDs = 1000
    /// Payload limit (data + notification, keys and values) for token and group messages.
    public static let maxPayloadBytes = 4096
    /// Payload limit for topic and condition messages.
    public static let maxTopicPayloadBytes = 2048
    /// Largest `time_to_live`: four weeks.
    public static let maxTimeToLive: Int64 = 2_419_200

    /// Top-level fields of a JSON send body, each with a slot in `Fields`. Anything else is
    /// `InvalidParameters`, so a typo such as `time_to_leave` is caught instead of silently ignored.
    enum Field: Int, CaseIterable {
        case to, registrationIDs, condition, notificationKey, collapseKey, priority, contentAvailable, mutableContent,
             timeToLive, restrictedPackageName, dryRun, data, notification, delayWhileIdle, accessTokenAuth

        var name: String { Self.names[rawValue] }

        static let names = ["to", "registration_ids", "condition", "notification_key", "collapse_key", "priority",
                            "content_available", "mutable_content", "time_to_live", "restricted_package_name", "dry_run",
                            "data", "notification", "delay_while_idle", "access_token_auth"]
        private static let nameBytes: [[UInt8]] = names.map { Array($0.utf8) }

        /// The field a member name is (compared as bytes, as JSON keys are), or nil.
        init?(_ key: String) {
            var key = key
            let found = key.withUTF8 { k -> Int? in
                for (i, name) in Self.nameBytes.enumerated() where name.count == k.count && name.elementsEqual(k) { return i }
                return nil
            }
            guard let found else { return nil }
            self.init(rawValue: found)
        }
    }

    /// The top-level members of a send body by field: one pass over the object instead of a
    /// look-up per field.
    struct Fields {
        private var slots: [JSONValue?] = Array(repeating: nil, count: Field.names.count)
        subscript(_ f: Field) -> JSONValue? {
            get { slots[f.rawValue] }
            set { slots[f.rawValue] = newValue }
        }
    }

    /// Parses a JSON body (already known to be `application/json`).
    public static func parseJSON(_ body: [UInt8]) -> SendParseOutcome {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            return .badRequest("JSON_PARSING_ERROR: " + error.message)
        }
        return parseJSON(value)
    }

    /// Parses an already-decoded JSON send body.
    public static func parseJSON(_ value: JSONValue, extraFields: Set<String> = []) -> SendParseOutcome {
        guard case .object(let obj) = value else {
            return .badRequest("JSON_PARSING_ERROR: Expected a JSON object, got \(value.typeName).")
        }
        var fields = Fields()
        for m in obj.members {
            if let f = Field(m.key) {
                fields[f] = m.value
            } else if !extraFields.contains(m.key) {
                return .invalidParameters("Unknown parameter \"\(m.key)\"")
            }
        }
        var req = SendRequest(format: .json)

        // Targets: exactly one of to / registration_ids / condition / notification_key.
        // The first target given, and how many were (no array for the usual one).
        var target: SendTarget?
        var targetCount = 0
        func add(_ t: SendTarget) {
            if target == nil { target = t }
            targetCount += 1
        }
        for field in [Field.to, .notificationKey] {
            guard let v = fields[field] else { continue }
            guard case .string(let s) = v else { return .badRequest(typeError(field.name, "java.lang.String", v)) }
            if s.hasPrefix(Topics.prefix) {
                add(.topic(String(s.dropFirst(8))))
            } else {
                add(.token(s))
            }
        }
        if let v = fields[.registrationIDs] {
            guard case .array(let items) = v else { return .badRequest("\"registration_ids\" field is not a JSON array") }
            if items.count > maxRegistrationIDs {
                return .badRequest("Number of messages on bulk (\(items.count)) exceeds maximum allowed (\(maxRegistrationIDs))")
            }
            var tokens: [String] = []
            tokens.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                guard case .string(let s) = item else {
                    return .badRequest(typeError("registration_ids[\(i)]", "java.lang.String", item))
                }
                tokens.append(s)
            }
            add(.multicast(tokens))
        }
        if let v = fields[.condition] {
            guard case .string(let s) = v else { return .badRequest(typeError("condition", "java.lang.String", v)) }
            add(.condition(s))
        }
        if targetCount > 1 {
            return .badRequest("Must use either \"registration_ids\" field or \"to\" field or \"condition\", not more than one")
        }
        req.target = target ?? .missing

        // Options, by type first: a wrong JSON type is a 400 for the whole request.
        var ttl: JSONNumber?
        do throws(FieldError) {
            req.options.collapseKey = try string(fields, .collapseKey)
            req.options.restrictedPackageName = try string(fields, .restrictedPackageName)
            if let p = try string(fields, .priority) {
                guard let prio = Priority(rawValue: p) else {
                    return .badRequest("Field \"priority\" must be \"normal\" or \"high\": \(p)")
                }
                req.options.priority = prio
            }
            req.options.contentAvailable = try bool(fields, .contentAvailable) ?? false
            req.options.mutableContent = try bool(fields, .mutableContent) ?? false
            req.options.dryRun = try bool(fields, .dryRun) ?? false
            req.options.delayWhileIdle = try bool(fields, .delayWhileIdle)
            req.accessTokenAuth = try bool(fields, .accessTokenAuth) ?? false
            if let v = fields[.timeToLive] {
                guard case .number(let n) = v else { throw FieldError(typeError("time_to_live", "java.lang.Number", v)) }
                ttl = n
            }
            if let v = fields[.data] {
                guard case .object(let d) = v else { throw FieldError(typeError("data", "object", v)) }
                req.data = d
            }
            if let v = fields[.notification] {
                guard case .object(let n) = v else { throw FieldError(typeError("notification", "object", v)) }
                try checkNotification(n)
                req.notification = n
            }
        } catch {
            return .badRequest(error.reason)
        }

        // Rules the whole message breaks: 200 with the error on every recipient.
        if case .missing = req.target {
            req.messageError = .missingRegistration
        } else if case .multicast(let ts) = req.target, ts.isEmpty {
            req.messageError = .missingRegistration
            req.messageErrorDetail = "\"registration_ids\" is empty"
        } else if let ttl {
            if let v = ttl.int64, ttl.isInteger, (0...maxTimeToLive).contains(v) {
                req.options.timeToLive = v
            } else {
                req.messageError = .invalidTtl
                req.messageErrorDetail = "time_to_live \(ttl.text) is not an integer in 0...\(maxTimeToLive)"
            }
        }
        applyPayloadRules(&req)
        return .request(req)
    }

    /// Parses a plain-text (form-encoded) body, seeds Table 3. Plain text has no 400 answer
    /// (the seeds' Table 4: 400 is for JSON only), so every problem becomes an `Error=` code.
    public static func parsePlain(_ body: [UInt8]) -> SendParseOutcome {
        var req = SendRequest(format: .plain)
        func fail(_ code: FCMErrorCode, _ detail: String) -> SendParseOutcome {
            req.messageError = code
            req.messageErrorDetail = detail
            return .request(req)
        }
        guard let pairs = FormBody.parse(body) else {
            return fail(.invalidParameters, "body is not valid form encoding (bad percent escape or UTF-8)")
        }
        var seen = Set<String>()
        var data = JSONObject()
        var ttlText: String?
        for (key, value) in pairs {
            guard seen.insert(key).inserted else {
                return fail(.invalidParameters, "parameter \"\(key)\" given more than once")
            }
            if key.hasPrefix("data.") {
                data[String(key.dropFirst(5))] = .string(value)
                continue
            }
            switch key {
            case "registration_id": req.target = .token(value)
            case "collapse_key": req.options.collapseKey = value
            case "time_to_live": ttlText = value
            case "restricted_package_name": req.options.restrictedPackageName = value
            case "dry_run", "delay_while_idle":
                guard let b = plainBool(value) else {
                    return fail(.invalidParameters, "\(key) must be true or false: \(value)")
                }
                if key == "dry_run" { req.options.dryRun = b } else { req.options.delayWhileIdle = b }
            default:
                return fail(.invalidParameters, "Unknown parameter \"\(key)\"")
            }
        }
        if data.count > 0 { req.data = data }
        if case .missing = req.target {
            return fail(.missingRegistration, "no registration_id")
        }
        if let t = ttlText {
            if let v = Int64(t), (0...maxTimeToLive).contains(v) {
                req.options.timeToLive = v
            } else {
                return fail(.invalidTtl, "time_to_live \(t) is not an integer in 0...\(maxTimeToLive)")
            }
        }
        applyPayloadRules(&req)
        return .request(req)
    }

    /// InvalidDataKey and MessageTooBig, shared by both formats and by XMPP.
    public static func applyPayloadRules(_ req: inout SendRequest) {
        guard req.messageError == nil else { return }
        if let data = req.data {
            for m in data.members where isReservedDataKey(m.key) {
                req.messageError = .invalidDataKey
                req.messageErrorDetail = "data key \"\(m.key)\" is reserved"
                return
            }
        }
        // FCM's own words are allowed in the payload, but FCM's value wins (seeds Table 9,
        // InvalidDataKey): a `collapse_key` entry carries the message's collapse key when it has one.
        if let key = req.options.collapseKey, req.data?["collapse_key"] != nil {
            req.data?["collapse_key"] = .string(key)
        }
        let size = payloadSize(data: req.data, notification: req.notification)
        let limit: Int
        switch req.target {
        case .topic, .condition: limit = maxTopicPayloadBytes
        default: limit = maxPayloadBytes
        }
        if size > limit {
            req.messageError = .messageTooBig
            req.messageErrorDetail = "payload is \(size) bytes, the limit is \(limit)"
        }
    }

    /// Data keys FCM keeps for itself: `from`, `message_type`, and anything starting with
    /// `google` or `gcm` (seeds Tables 1 and 9).
    public static func isReservedDataKey(_ key: String) -> Bool {
        isReservedDataKey(key, orNotification: false)
    }

    /// The same words compared as bytes, not as Swift characters (a combining mark after
    /// `google` does not hide the prefix), and with `orNotification` also `notification`, which
    /// HTTP v1 reserves too.
    @inlinable
    public static func isReservedDataKey(_ key: String, orNotification: Bool) -> Bool {
        var key = key
        return key.withUTF8 { k in
            switch k.first {
            case UInt8(ascii: "f"): return k.elementsEqual("from".utf8)
            case UInt8(ascii: "g"): return k.starts(with: "google".utf8) || k.starts(with: "gcm".utf8)
            case UInt8(ascii: "m"): return k.elementsEqual("message_type".utf8)
            case UInt8(ascii: "n"): return orNotification && k.elementsEqual("notification".utf8)
            default: return false
            }
        }
    }

    /// Bytes of the payload as FCM counted them: keys and values of `data` and `notification`
    /// (string values by their UTF-8 bytes, other values by their JSON text).
    public static func payloadSize(data: JSONObject?, notification: JSONObject?) -> Int {
        func size(_ obj: JSONObject?) -> Int {
            guard let obj else { return 0 }
            var total = 0
            for m in obj.members {
                total += m.key.utf8.count
                if case .string(let s) = m.value {
                    total += s.utf8.count
                } else {
                    total += m.value.serialized().utf8.count
                }
            }
            return total
        }
        // Two calls, not a loop over a two-element array (which would be allocated per send).
        return size(data) + size(notification)
    }

    /// Notification fields are strings (seeds Tables 2a-2c), except the `*_loc_args` (a JSON
    /// array, or an array written as a string) and `badge` (clients send numbers too).
    static func checkNotification(_ n: JSONObject) throws(FieldError) {
        for m in n.members {
            let field = "notification." + m.key
            switch m.key {
            case "body_loc_args", "title_loc_args":
                switch m.value {
                case .string: continue
                case .array(let items):
                    for item in items {
                        guard case .string = item else { throw FieldError(typeError(field, "array of java.lang.String", m.value)) }
                    }
                default: throw FieldError(typeError(field, "array", m.value))
                }
            case "badge":
                switch m.value {
                case .string, .number: continue
                default: throw FieldError(typeError(field, "java.lang.String", m.value))
                }
            default:
                // Platform-specific keys beyond the tables pass through, but must still be strings.
                guard case .string = m.value else { throw FieldError(typeError(field, "java.lang.String", m.value)) }
            }
        }
    }

    struct FieldError: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    static func string(_ fields: Fields, _ field: Field) throws(FieldError) -> String? {
        guard let v = fields[field] else { return nil }
        guard case .string(let s) = v else { throw FieldError(typeError(field.name, "java.lang.String", v)) }
        return s
    }

    static func bool(_ fields: Fields, _ field: Field) throws(FieldError) -> Bool? {
        guard let v = fields[field] else { return nil }
        guard case .bool(let b) = v else { throw FieldError(typeError(field.name, "java.lang.Boolean", v)) }
        return b
    }

    /// `Field "time_to_live" must be a JSON java.lang.Number: abc`, the real service's wording.
    static func typeError(_ field: String, _ type: String, _ value: JSONValue) -> String {
        let shown: String
        if case .string(let s) = value { shown = s } else { shown = value.serialized() }
        return "Field \"\(field)\" must be a JSON \(type): \(shown.count > 200 ? String(shown.prefix(200)) + "…" : shown)"
    }

    static func plainBool(_ s: String) -> Bool? {
        switch s {
        case "true", "1": return true
        case "false", "0": return false
        default: return nil
        }
    }
}

/// `application/x-www-form-urlencoded` bodies and query strings.
public enum FormBody {
    /// Splits and decodes `a=1&b=x%20y`; nil on a bad `%` escape or invalid UTF-8.
    /// `+` means a space. Empty segments (`a=1&&b=2`) are skipped.
    public static func parse(_ body: [UInt8]) -> [(String, String)]? {
        var out: [(String, String)] = []
        for part in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let eq = part.firstIndex(of: UInt8(ascii: "="))
            let rawKey = eq.map { part[part.startIndex..<$0] } ?? part[...]
            let rawValue = eq.map { part[part.index(after: $0)...] } ?? []
            guard let k = percentDecode(rawKey, plusIsSpace: true), let v = percentDecode(rawValue, plusIsSpace: true)
            else { return nil }
            out.append((k, v))
        }
        return out
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters (a path segment or a query
    /// value).
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += (b < 16 ? "%0" : "%") + String(b, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// Percent-decodes bytes into a String; nil on a bad escape or invalid UTF-8.
    public static func percentDecode<C: Collection>(_ bytes: C, plusIsSpace: Bool) -> String? where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        var it = bytes.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                out.append(hv << 4 | lv)
            } else if b == UInt8(ascii: "+") && plusIsSpace {
                out.append(UInt8(ascii: " "))
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    @inlinable
    public static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - 48
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - 87
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - 55
        default: return nil
        }
    }
}
