/// An XML element of a stanza: name as written (with its prefix), attributes, text and children.
public struct XMLElement: Sendable, Equatable {
    public var name: String
    /// The namespace name the element is in (from its prefix, else the default namespace in
    /// scope), nil for none. Only parsed elements have one; `xml` writes the `xmlns` attributes.
    public var namespace: String?
    /// The attributes as written, namespace declarations (`xmlns`, `xmlns:p`) included.
    public var attributes: [String: String]
    public var children: [XMLElement]
    /// The element's own character data (concatenated).
    public var text: String

    public init(name: String, namespace: String? = nil, attributes: [String: String] = [:], children: [XMLElement] = [],
                text: String = "") {
        self.name = name
        self.namespace = namespace
        self.attributes = attributes
        self.children = children
        self.text = text
    }

    /// The name without its prefix (`stream:features` → `features`).
    public var localName: String {
        guard let colon = name.lastIndex(of: ":") else { return name }
        return String(name[name.index(after: colon)...])
    }

    /// The first child with this local name.
    public func child(_ local: String) -> XMLElement? { children.first { $0.localName == local } }

    /// The element as XML text (attributes sorted, so the output is stable).
    public var xml: String {
        var out = "<" + name
        for (k, v) in attributes.sorted(by: { $0.key < $1.key }) { out += " \(k)=\"\(xmlEscape(v))\"" }
        if children.isEmpty && text.isEmpty { return out + "/>" }
        out += ">" + xmlEscapeText(text)
        for c in children { out += c.xml }
        return out + "</\(name)>"
    }
}

/// Escapes an attribute value (`&`, `<`, `>`, both quotes).
public func xmlEscape(_ s: String) -> String { escape(s, quotes: true) }

/// Escapes element content (`&`, `<`, `>`): quotes stay as they are, so JSON payloads read as
/// they do on the wire of the real service.
public func xmlEscapeText(_ s: String) -> String { escape(s, quotes: false) }

private func escape(_ s: String, quotes: Bool) -> String {
    var copy = s
    return copy.withUTF8 { bytes -> String in
        // The common case has nothing to escape: no copy at all.
        guard bytes.contains(where: { $0 == 38 || $0 == 60 || $0 == 62 || (quotes && ($0 == 34 || $0 == 39)) }) else { return s }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 32)
        for b in bytes {
            switch b {
            case 38: out.append(contentsOf: [38, 97, 109, 112, 59])  // &amp;
            case 60: out.append(contentsOf: [38, 108, 116, 59])  // &lt;
            case 62: out.append(contentsOf: [38, 103, 116, 59])  // &gt;
            case 34 where quotes: out.append(contentsOf: [38, 113, 117, 111, 116, 59])  // &quot;
            case 39 where quotes: out.append(contentsOf: [38, 97, 112, 111, 115, 59])  // &apos;
            default: out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Standard base64 (RFC 4648), for SASL PLAIN.
public enum Base64 {
    /// Decodes; nil on any character outside the alphabet or bad padding. Whitespace is ignored.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for b in text.utf8 {
            switch b {
            case 65...90: values.append(b - 65)
            case 97...122: values.append(b - 71)
            case 48...57: values.append(b + 4)
            case 43: values.append(62)
            case 47: values.append(63)
            case 61: padding += 1; continue
            case 32, 9, 10, 13: continue
            default: return nil
            }
            if padding > 0 { return nil }
        }
        guard (values.count + padding) % 4 == 0, padding <= 2 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i + 1 < values.count {
            let a = values[i], b = values[i + 1]
            out.append(a << 2 | b >> 4)
            if i + 2 < values.count { out.append((b & 0xf) << 4 | values[i + 2] >> 2) }
            if i + 3 < values.count { out.append((values[i + 2] & 0x3) << 6 | values[i + 3]) }
            i += 4
        }
        return out
    }

    /// Encodes bytes.
    public static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = bytes[i], b1 = n > 1 ? bytes[i + 1] : 0, b2 = n > 2 ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(n > 1 ? alphabet[Int((b1 & 0xf) << 2 | b2 >> 6)] : 61)
            out.append(n > 2 ? alphabet[Int(b2 & 0x3f)] : 61)
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
