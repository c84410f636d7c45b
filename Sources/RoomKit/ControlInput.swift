import FCMEngine
public import FCMModel
import FCMCore

/// Decoded query arguments with the list conventions (`limit`, `cursor`).
public struct Query: Sendable {
    private var values: [String: String] = [:]

    public init(_ raw: [(String, String?)]) throws(ControlError) {
        for (k, v) in raw {
            guard let key = FormBody.percentDecode(k.utf8, plusIsSpace: true),
                let value = FormBody.percentDecode((v ?? "").utf8, plusIsSpace: true)
            else { throw .badRequest("bad percent-encoding in the query string") }
            values[key] = value
        }
    }

    /// Refuses a query naming anything but `names` (and the control token's `access_token`): a
    /// filter this call does not have, or a misspelt one, would otherwise be passed over and
    /// the answer read as filtered.
    public func allowOnly(_ names: Set<String>) throws(ControlError) {
        let unknown = values.keys.filter { !names.contains($0) && $0 != "access_token" }.sorted()
        guard let first = unknown.first else { return }
        throw .badRequest("unknown query parameter '\(first)': this call takes \(names.sorted().joined(separator: ", "))")
    }

    /// Whether `?name=true` (or a bare `?name`) is in the raw query.
    public static func flag(_ raw: [(String, String?)], _ name: String) -> Bool {
        raw.contains { $0.0 == name && ($0.1 == nil || $0.1 == "true" || $0.1 == "1") }
    }

    public subscript(_ k: String) -> String? {
        guard let v = values[k], !v.isEmpty else { return nil }
        return v
    }

    public func int(_ k: String) throws(ControlError) -> Int64? {
        guard let s = self[k] else { return nil }
        guard let v = Int64(s) else { throw .badRequest("\(k) must be an integer") }
        return v
    }

    public func double(_ k: String) throws(ControlError) -> Double? {
        guard let s = self[k] else { return nil }
        guard let v = Double(s), v.isFinite else { throw .badRequest("\(k) must be a number") }
        return v
    }

    /// `limit`: default 100, at most 1000.
    public func limit() throws(ControlError) -> Int {
        guard let v = try int("limit") else { return 100 }
        guard (1...1000).contains(v) else { throw .badRequest("limit must be 1 to 1000") }
        return Int(v)
    }

    public func cursor() throws(ControlError) -> Int64? {
        guard let s = self["cursor"] else { return nil }
        guard let v = Int64(s), v >= 0 else { throw .badRequest("cursor is not one this server gave out") }
        return v
    }
}
