public import FCMCore

/// A JSON object body with typed accessors whose errors name the field.
public struct Body {
    public let object: JSONObject
    public let path: String

    public init(_ object: JSONObject, path: String) {
        self.object = object
        self.path = path
    }

    public func allow(_ fields: Set<String>) throws(EngineError) {
        for k in object.keys where !fields.contains(k) {
            throw .badRequest("unknown field \"\(path)\(k)\"; allowed: \(fields.sorted().joined(separator: ", "))")
        }
    }

    public func string(_ k: String) throws(EngineError) -> String? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw .badRequest("\(path)\(k) must be a string") }
        return s
    }

    public func bool(_ k: String) throws(EngineError) -> Bool? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let b = v.boolValue else { throw .badRequest("\(path)\(k) must be true or false") }
        return b
    }

    /// A whole number, also written with a fraction or an exponent (`3600.0`, `3.6e3`: what a
    /// test computing seconds in floating point sends); `1.5` (or `3600.0000001`) is refused.
    public func int(_ k: String) throws(EngineError) -> Int64? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let n = v.numberValue, let i = n.int64 ?? Self.whole(n.text) else { throw .badRequest("\(path)\(k) must be an integer") }
        return i
    }

    /// The value of a JSON number's text when it is whole and fits in `Int64`, decided on its
    /// decimal digits (never through a `Double`, which would round `3600.0000000000001` to 3600).
    static func whole(_ text: String) -> Int64? {
        var t = Substring(text)
        let negative = t.first == "-"
        if negative { t = t.dropFirst() }
        var exponent = 0
        if let e = t.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let x = Int(t[t.index(after: e)...].drop { $0 == "+" }), abs(x) < 100 else { return nil }
            exponent = x
            t = t[..<e]
        }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return nil }
        let fraction = parts.count == 2 ? parts[1] : ""
        var digits = Array((parts[0] + fraction).drop { $0 == "0" })
        let shift = exponent - fraction.count
        if shift >= 0 {
            digits += Array(repeating: "0", count: digits.isEmpty ? 0 : shift)
        } else {
            let cut = min(-shift, digits.count)
            guard digits.suffix(cut).allSatisfy({ $0 == "0" }) else { return nil }
            digits.removeLast(cut)
        }
        guard digits.count <= 19, let magnitude = Int64(digits.isEmpty ? "0" : String(digits)) else { return nil }
        return negative ? -magnitude : magnitude
    }

    public func array(_ k: String) throws(EngineError) -> [JSONValue]? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let a = v.arrayValue else { throw .badRequest("\(path)\(k) must be an array") }
        return a
    }

    public func stringArray(_ k: String) throws(EngineError) -> [String]? {
        guard let a = try array(k) else { return nil }
        var out: [String] = []
        for (i, v) in a.enumerated() {
            guard let s = v.stringValue else { throw .badRequest("\(path)\(k)[\(i)] must be a string") }
            out.append(s)
        }
        return out
    }

    public func platform(_ k: String) throws(EngineError) -> Platform? {
        guard let s = try string(k) else { return nil }
        guard let p = Platform(rawValue: s) else { throw .badRequest("\(path)\(k) must be android, ios or web") }
        return p
    }
}
