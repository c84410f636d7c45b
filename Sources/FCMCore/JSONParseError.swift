// The error the JSON parser throws, with the json-simple style message the server reports.

/// Why and where a JSON text was rejected.
public struct JSONParseError: Error, Sendable, Equatable {
    /// The category of the problem.
    public enum Kind: Sendable, Equatable {
        case invalidUTF8, unexpectedEnd, unexpectedCharacter, duplicateKey(String), tooDeep,
             trailingData, invalidEscape, invalidNumber, controlCharacterInString, loneSurrogate
    }

    /// The category of the problem.
    public let kind: Kind
    /// The byte offset in the input where the problem was found.
    public let offset: Int
    /// What `message` names: the offending character, the bad byte in hex, or the depth limit.
    let detail: String

    init(kind: Kind, offset: Int, detail: String = "") {
        self.kind = kind
        self.offset = offset
        self.detail = detail
    }

    /// A one-line description in the style of the Java json-simple parser the real service used
    /// (the server prefixes it with `JSON_PARSING_ERROR: `).
    public var message: String {
        switch kind {
        case .unexpectedEnd:
            return "Unexpected token END OF FILE at position \(offset)."
        case .unexpectedCharacter, .trailingData, .invalidNumber, .invalidEscape, .controlCharacterInString:
            return "Unexpected character (\(detail)) at position \(offset)."
        case .invalidUTF8:
            return "Invalid UTF-8 byte \(detail) at position \(offset)."
        case .duplicateKey(let key):
            var quoted: [UInt8] = []
            appendJSONString(key, to: &quoted)
            return "Duplicate key \(String(decoding: quoted, as: UTF8.self)) at position \(offset)."
        case .tooDeep:
            return "Nesting deeper than \(detail) at position \(offset)."
        case .loneSurrogate:
            return "Unpaired surrogate at position \(offset)."
        }
    }
}

/// How an offending character appears in messages: itself when visible, `\uXXXX` otherwise,
/// so invisible characters such as a BOM or NBSP can still be seen in a log line.
func displayForm(of value: UInt32) -> String {
    guard let scalar = Unicode.Scalar(value) else { return "\\u" + hexDigits(value, width: 4) }
    let visible: Bool
    if value < 0x80 {
        visible = value >= 0x20 && value < 0x7F
    } else {
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator,
             .privateUse, .surrogate, .unassigned, .nonspacingMark, .spacingMark, .enclosingMark:
            visible = false
        default:
            visible = true
        }
    }
    if visible {
        return String(Character(scalar))
    }
    if value < 0x10000 {
        return "\\u" + hexDigits(value, width: 4)
    }
    let offsetValue = value - 0x10000
    return "\\u" + hexDigits(0xD800 + (offsetValue >> 10), width: 4)
        + "\\u" + hexDigits(0xDC00 + (offsetValue & 0x3FF), width: 4)
}

func hexDigits(_ value: UInt32, width: Int) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}
