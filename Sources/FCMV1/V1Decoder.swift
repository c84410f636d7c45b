import FCMCore
// Proto3 JSON decoding of a v1 body against V1Schema, with Google's error texts (the ESF proto
// converter's: `Unknown name "foo" at 'message.android': Cannot find field.`,
// `Invalid value at 'message.data[0].value' (TYPE_STRING), 1`, …). The output is the same JSON
// with snake_case names, `null` members dropped, enums lower-cased, ints as numbers.

/// A body that is not the Message JSON: answered `invalidPayload` with one violation at `field`
/// (nil when the error has no location, as for a non-object body).
struct V1PayloadError: Error, Equatable {
    let message: String
    let field: String?
}

/// Decodes one JSON object against a message type. Pure.
struct V1Decoder {
    /// Longest value text quoted back in an error message; the rest is cut with `…`.
    static let maxShownValue = 256

    /// The decoded object: snake_case names, nulls dropped, values normalized.
    static func decode(_ obj: JSONObject, as type: V1MessageType, at path: String) throws(V1PayloadError) -> JSONObject {
        try decodeIfChanged(obj, as: type, at: path) ?? obj
    }

    /// The decoded object, or nil when it is the object itself: every key already the field's
    /// proto name, no nulls, every value as it decodes. Most bodies are that, so nothing is
    /// copied for them.
    static func decodeIfChanged(_ obj: JSONObject, as type: V1MessageType, at path: String) throws(V1PayloadError) -> JSONObject? {
        var out: [JSONObject.Member]?  // made at the first member that differs
        var seen: UInt64 = 0  // by field index
        var oneofsSet: UInt64 = 0  // by oneof index
        for (i, m) in obj.members.enumerated() {
            guard let index = type.fieldIndex(named: m.key) else {
                throw unknownName(m.key, at: path, "Cannot find field.")
            }
            let field = type.fields[index]
            if m.value.isNull {
                if out == nil { out = Array(obj.members[..<i]) }
                continue
            }
            guard seen & (1 << UInt64(index)) == 0 else {
                // Set before under its other spelling (the parser refuses a key given twice).
                let first = obj.members.first { $0.key != m.key && !$0.value.isNull && type.fieldIndex(named: $0.key) == index }?.key ?? field.name
                throw V1PayloadError(
                    message: "Invalid JSON payload received. Field \"\(field.name)\" at '\(path)' is set twice, as \"\(first)\" and as \"\(m.key)\".",
                    field: path)
            }
            seen |= 1 << UInt64(index)
            let oneof = type.oneofIndex[index]
            if oneof >= 0 {
                guard oneofsSet & (1 << UInt64(oneof)) == 0 else {
                    let name = type.oneofs[oneof]
                    throw invalidValue(at: path, "oneof", "oneof field '\(name)' is already set. Cannot set '\(m.key)'")
                }
                oneofsSet |= 1 << UInt64(oneof)
            }
            let changed = try decodeValueIfChanged(m.value, kind: field.kind, key: m.key, name: field.name, holder: path)
            if out == nil, changed != nil || m.key.utf8.count != field.name.utf8.count {
                // Another spelling is never the same length as the proto name (camelCase drops
                // the underscores).
                out = Array(obj.members[..<i])
            }
            if out != nil {
                out!.append(JSONObject.Member(key: field.name, value: changed ?? m.value))
            }
        }
        return out.map { JSONObject(uniqueMembers: $0) }
    }

    /// A member's decoded value, or nil when it is the value as sent. Strings and maps of
    /// strings, nearly every member of a body, are checked here without building their path.
    static func decodeValueIfChanged(_ value: JSONValue, kind: V1FieldKind, key: String, name: String, holder: String) throws(V1PayloadError) -> JSONValue? {
        switch (kind, value) {
        case (.string, .string):
            return nil
        case (.stringMap, .object(let obj)) where obj.members.allSatisfy({ if case .string = $0.value { true } else { false } }):
            return nil
        default:
            let path = holder.isEmpty ? name : holder + "." + name
            switch (kind, value) {
            case (.message(let type), .object(let obj)):
                return try decodeIfChanged(obj, as: type, at: path).map { .object($0) }
            case (.structValue, .object):
                return nil
            default:
                let decoded = try decodeValue(value, kind: kind, key: key, at: path, holder: holder)
                if case .object = value { return decoded }  // a map with its nulls dropped
                return decoded == value ? nil : decoded
            }
        }
    }

    static func decodeValue(_ value: JSONValue, kind: V1FieldKind, key: String, at path: String, holder: String) throws(V1PayloadError) -> JSONValue {
        if case .array(let items) = value {
            switch kind {
            case .repeated(let element):
                var out: [JSONValue] = []
                out.reserveCapacity(items.count)
                for (i, item) in items.enumerated() {
                    out.append(try decodeScalar(item, kind: element, key: key, at: "\(path)[\(i)]"))
                }
                return .array(out)
            case .stringMap:
                throw invalidValue(at: path, "Map", "Cannot bind a list to map.")
            default:
                throw unknownName(key, at: holder, "Proto field is not repeating, cannot start list.")
            }
        }
        if case .repeated(let element) = kind {
            // Proto3 JSON converters take a lone value for a repeated field as a list of one.
            return .array([try decodeScalar(value, kind: element, key: key, at: path)])
        }
        return try decodeScalar(value, kind: kind, key: key, at: path)
    }

    static func decodeScalar(_ value: JSONValue, kind: V1FieldKind, key: String, at path: String) throws(V1PayloadError) -> JSONValue {
        switch kind {
        case .string:
            guard case .string = value else { throw wrongType(value, at: path, "TYPE_STRING") }
            return value
        case .bool:
            // firebase-admin-python encodes AndroidNotification's booleans as 1 and 0.
            switch value {
            case .bool: return value
            case .string("true"), .string("1"): return .bool(true)
            case .string("false"), .string("0"): return .bool(false)
            case .number(let n) where n.int64 == 1: return .bool(true)
            case .number(let n) where n.int64 == 0: return .bool(false)
            default: throw wrongType(value, at: path, "TYPE_BOOL")
            }
        case .int32:
            guard let n = int32(value) else { throw wrongType(value, at: path, "TYPE_INT32") }
            return .number(JSONNumber(Int(n)))
        case .float:
            switch value {
            case .number(let n) where n.double?.isFinite == true: return value
            case .string(let s):
                if let n = JSONNumber(validating: s), n.double?.isFinite == true { return .number(n) }
            default: break
            }
            throw wrongType(value, at: path, "TYPE_FLOAT")
        case .enumeration(let names):
            guard let name = enumName(value, names) else { throw wrongType(value, at: path, "TYPE_ENUM") }
            return .string(name.lowercased())
        case .duration:
            guard case .string(let s) = value else {
                throw invalidValue(at: path, "type.googleapis.com/google.protobuf.Duration",
                                   "Field '\(key)', Invalid data type for duration, value is \(shown(value))")
            }
            switch V1Duration.parse(s) {
            case .success: return value
            case .failure(let reason):
                throw invalidValue(at: path, "type.googleapis.com/google.protobuf.Duration", "Field '\(key)', \(reason.text)")
            }
        case .timestamp:
            guard case .string(let s) = value else {
                throw invalidValue(at: path, "type.googleapis.com/google.protobuf.Timestamp",
                                   "Field '\(key)', Invalid data type for timestamp, value is \(shown(value))")
            }
            guard s.utf8.count <= 64, parseRFC3339(s) != nil else {
                throw invalidValue(at: path, "type.googleapis.com/google.protobuf.Timestamp",
                                   "Field '\(key)', Invalid time format: \(clip(s))")
            }
            return value
        case .message(let type):
            guard case .object(let obj) = value else { throw invalidValue(at: path, type.typeURL, shown(value)) }
            return .object(try decode(obj, as: type, at: path))
        case .stringMap(let entryType):
            guard case .object(let obj) = value else {
                throw invalidValue(at: path, "type.googleapis.com/" + entryType, shown(value))
            }
            // Keys are unique already (the parser refuses a repeated one): a map of strings only,
            // the usual case, is kept as it is; nulls are dropped.
            var hasNull = false
            for (i, m) in obj.members.enumerated() {
                switch m.value {
                case .string: continue
                case .null: hasNull = true
                default: throw wrongType(m.value, at: "\(path)[\(i)].value", "TYPE_STRING")
                }
            }
            guard hasNull else { return value }
            return .object(JSONObject(obj.members.lazy.filter { !$0.value.isNull }.map { ($0.key, $0.value) }))
        case .structValue:
            guard case .object = value else {
                throw invalidValue(at: path, "type.googleapis.com/google.protobuf.Struct", shown(value))
            }
            return value
        case .repeated(let element):
            return try decodeValue(value, kind: .repeated(element), key: key, at: path, holder: path)
        }
    }

    /// An int32 from a JSON number (integral, in range) or a decimal string.
    static func int32(_ value: JSONValue) -> Int32? {
        switch value {
        case .number(let n):
            if let i = n.int64 { return Int32(exactly: i) }
            guard let d = n.double, d.isFinite, d == d.rounded() else { return nil }
            return Int32(exactly: d)
        case .string(let s):
            return Int32(s)
        default:
            return nil
        }
    }

    /// The enum value's name: by name in any case (`-` read as `_`, as the proto converter
    /// normalizes), or by its number, given as a number or a decimal string.
    static func enumName(_ value: JSONValue, _ names: [String]) -> String? {
        let number: Int?
        switch value {
        case .string(let s):
            let normalized = String(s.uppercased().map { $0 == "-" ? "_" : $0 })
            if let name = names.first(where: { $0 == normalized }) { return name }
            number = Int(s)
        case .number(let n):
            number = n.int64.map { Int($0) }
        default:
            return nil
        }
        guard let number, names.indices.contains(number) else { return nil }
        return names[number]
    }

    // MARK: - Google's error texts

    /// `Invalid JSON payload received. Unknown name "foo" at 'message.android': Cannot find field.`
    /// The converter reports the name in snake_case, whatever the spelling sent.
    static func unknownName(_ name: String, at path: String, _ reason: String) -> V1PayloadError {
        let location = path.isEmpty ? "" : " at '\(path)'"
        return V1PayloadError(
            message: "Invalid JSON payload received. Unknown name \"\(clip(snakeCase(name)))\"\(location): \(reason)",
            field: path)
    }

    /// `Invalid value at 'PATH' (TYPE), VALUE`.
    static func invalidValue(at path: String, _ type: String, _ value: String) -> V1PayloadError {
        V1PayloadError(message: "Invalid value at '\(path)' (\(type)), \(value)", field: path)
    }

    static func wrongType(_ value: JSONValue, at path: String, _ type: String) -> V1PayloadError {
        if case .object = value {
            return invalidValue(at: path, type, "Starting an object on a scalar field")
        }
        return invalidValue(at: path, type, shown(value))
    }

    /// A value as the converter quotes it: strings in double quotes (unescaped), other values
    /// as their JSON text.
    static func shown(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): return "\"" + clip(s) + "\""
        default: return clip(value.serialized())
        }
    }

    static func clip(_ s: String) -> String {
        s.utf8.count > maxShownValue ? s.utf8Prefix(maxShownValue) + "…" : s
    }

    /// `fooBar` → `foo_bar`, as the proto converter prints an unknown name.
    static func snakeCase(_ name: String) -> String {
        var out = ""
        let chars = Array(name)
        for (i, ch) in chars.enumerated() {
            if ch.isASCII, ch.isUppercase {
                let prev = i > 0 ? chars[i - 1] : nil
                let next = i + 1 < chars.count ? chars[i + 1] : nil
                if let prev, prev != "_",
                   prev.isLowercase || prev.isNumber || (next?.isLowercase ?? false) {
                    out.append("_")
                }
                out += ch.lowercased()
            } else {
                out.append(ch)
            }
        }
        return out
    }
}

/// A `google.protobuf.Duration` in proto3 JSON: `"<seconds>[.<fraction>]s"`, optionally negative.
public struct V1Duration: Sendable, Equatable {
    /// Largest magnitude a Duration may have: 10,000 years.
    public static let maxSeconds: Int64 = 315_576_000_000

    public let seconds: Int64
    /// Same sign as `seconds` (or the sign of the text when `seconds` is 0).
    public let nanos: Int32

    /// Why a duration text was refused, in the converter's words.
    public enum Failure: Error, Equatable {
        case noSuffix, badSeconds, badNanos, outOfRange

        public var text: String {
            switch self {
            case .noSuffix: return "Illegal duration format; duration must end with 's'"
            case .badSeconds: return "Invalid duration format, failed to parse seconds"
            case .badNanos: return "Invalid duration format, failed to parse nanos seconds"
            case .outOfRange: return "Duration value exceeds limits"
            }
        }
    }

    /// Parses `3.5s`, `-1s`, `0.000000001s`: digits, then at most 9 fraction digits.
    public static func parse(_ text: String) -> Result<V1Duration, Failure> {
        var bytes = Array(text.utf8)
        guard bytes.last == UInt8(ascii: "s") else { return .failure(.noSuffix) }
        bytes.removeLast()
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes.removeFirst()
        }
        let dot = bytes.firstIndex(of: UInt8(ascii: "."))
        let secondDigits = bytes[..<(dot ?? bytes.count)]
        guard !secondDigits.isEmpty, secondDigits.count <= 12, secondDigits.allSatisfy(isDigit) else {
            return .failure(.badSeconds)
        }
        var seconds: Int64 = 0
        for b in secondDigits { seconds = seconds * 10 + Int64(b - 48) }
        var nanos: Int32 = 0
        if let dot {
            let fraction = bytes[(dot + 1)...]
            guard fraction.count <= 9, fraction.allSatisfy(isDigit) else { return .failure(.badNanos) }
            for b in fraction { nanos = nanos * 10 + Int32(b - 48) }
            for _ in fraction.count..<9 { nanos *= 10 }
        }
        guard seconds <= maxSeconds else { return .failure(.outOfRange) }
        return .success(V1Duration(seconds: negative ? -seconds : seconds, nanos: negative ? -nanos : nanos))
    }

    /// Whole seconds, the fraction dropped (toward zero).
    public var wholeSeconds: Int64 { seconds }

    /// Whether the duration is negative.
    public var isNegative: Bool { seconds < 0 || nanos < 0 }
}
