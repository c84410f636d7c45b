import FCMCore

/// A JSON object body with typed accessors whose errors name the field.
struct Body {
    let object: JSONObject
    let path: String

    init(_ object: JSONObject, path: String) {
        self.object = object
        self.path = path
    }

    func allow(_ fields: Set<String>) throws(ControlError) {
        for k in object.keys where !fields.contains(k) {
            throw .badRequest("unknown field \"\(path)\(k)\"; allowed: \(fields.sorted().joined(separator: ", "))")
        }
    }

    func string(_ k: String) throws(ControlError) -> String? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw .badRequest("\(path)\(k) must be a string") }
        return s
    }

    func bool(_ k: String) throws(ControlError) -> Bool? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let b = v.boolValue else { throw .badRequest("\(path)\(k) must be true or false") }
        return b
    }

    func int(_ k: String) throws(ControlError) -> Int64? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let n = v.numberValue, n.isInteger, let i = n.int64 else { throw .badRequest("\(path)\(k) must be an integer") }
        return i
    }

    func array(_ k: String) throws(ControlError) -> [JSONValue]? {
        guard let v = object[k], !v.isNull else { return nil }
        guard let a = v.arrayValue else { throw .badRequest("\(path)\(k) must be an array") }
        return a
    }

    func stringArray(_ k: String) throws(ControlError) -> [String]? {
        guard let a = try array(k) else { return nil }
        var out: [String] = []
        for (i, v) in a.enumerated() {
            guard let s = v.stringValue else { throw .badRequest("\(path)\(k)[\(i)] must be a string") }
            out.append(s)
        }
        return out
    }

    func platform(_ k: String) throws(ControlError) -> Platform? {
        guard let s = try string(k) else { return nil }
        guard let p = Platform(rawValue: s) else { throw .badRequest("\(path)\(k) must be android, ios or web") }
        return p
    }
}

/// Decoded query arguments with the list conventions (`limit`, `cursor`).
struct Query {
    private var values: [String: String] = [:]

    init(_ raw: [(String, String?)]) throws(ControlError) {
        for (k, v) in raw {
            guard let key = FormBody.percentDecode(k.utf8, plusIsSpace: true),
                let value = FormBody.percentDecode((v ?? "").utf8, plusIsSpace: true)
            else { throw .badRequest("bad percent-encoding in the query string") }
            values[key] = value
        }
    }

    /// Whether `?name=true` (or a bare `?name`) is in the raw query.
    static func flag(_ raw: [(String, String?)], _ name: String) -> Bool {
        raw.contains { $0.0 == name && ($0.1 == nil || $0.1 == "true" || $0.1 == "1") }
    }

    subscript(_ k: String) -> String? {
        guard let v = values[k], !v.isEmpty else { return nil }
        return v
    }

    func int(_ k: String) throws(ControlError) -> Int64? {
        guard let s = self[k] else { return nil }
        guard let v = Int64(s) else { throw .badRequest("\(k) must be an integer") }
        return v
    }

    func double(_ k: String) throws(ControlError) -> Double? {
        guard let s = self[k] else { return nil }
        guard let v = Double(s), v.isFinite else { throw .badRequest("\(k) must be a number") }
        return v
    }

    /// `limit`: default 100, at most 1000.
    func limit() throws(ControlError) -> Int {
        guard let v = try int("limit") else { return 100 }
        guard (1...1000).contains(v) else { throw .badRequest("limit must be 1 to 1000") }
        return Int(v)
    }

    func cursor() throws(ControlError) -> Int64? {
        guard let s = self["cursor"] else { return nil }
        guard let v = Int64(s), v >= 0 else { throw .badRequest("cursor is not one this server gave out") }
        return v
    }
}
