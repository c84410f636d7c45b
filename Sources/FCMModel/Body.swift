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

    /// A whole number, also written with a fraction or an exponent (`3600.0`, `1e3`: what a
    /// test computing seconds in floating point sends); `1.5` is refused.
    public func int(_ k: String) throws(EngineError) -> Int64? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let n = v.numberValue else { throw .badRequest("\(path)\(k) must be an integer") }
        if let i = n.int64 { return i }
        guard !n.isInteger, let d = Double(n.text), d.rounded() == d, abs(d) < 9.0e15 else {
            throw .badRequest("\(path)\(k) must be an integer")
        }
        return Int64(d)
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
