import FCMEngine
public import FCMModel
public import FCMCore
public import HTTPServer

extension PathParams {
    /// Every value percent-decoded (`+` stays a plus), or the 400 `bad percent-encoding in path`.
    public func decoded() throws(ControlError) -> PathArguments {
        var out: [String] = []
        out.reserveCapacity(values.count)
        for v in values { out.append(try decode(v)) }
        return PathArguments(names: names, values: out)
    }
}

/// Path parameters, decoded.
public struct PathArguments: Sendable {
    public static let none = PathArguments(names: [], values: [])

    public let names: [String]
    public let values: [String]

    /// The value of `{name}`; the name must be one of the route's.
    public subscript(_ name: String) -> String {
        guard let i = names.firstIndex(of: name) else { preconditionFailure("no parameter {\(name)} in this route") }
        return values[i]
    }
}

/// One percent-encoded segment of a request path, decoded (`+` stays a plus). Inlinable: a
/// generic called from every room, which would otherwise run unspecialized.
@inlinable
public func decode<S: StringProtocol>(_ s: S) throws(ControlError) -> String {
    // Most path values have no escape at all: copied as they are.
    let escaped = s.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "%")) } ?? s.utf8.contains(UInt8(ascii: "%"))
    if !escaped { return String(s) }
    guard let v = FormBody.percentDecode(s.utf8, plusIsSpace: false) else { throw .badRequest("bad percent-encoding in path") }
    return v
}
