
/// Matches a request's method and path against a route table (the table is in Routes.swift).
///
/// Patterns, compared with the path as sent (still percent-encoded):
/// - `/fcm/send`: a literal path, compared whole (with the literal paths of its length).
/// - `/api/v1/devices/{token}`: `{name}` takes one non-empty segment; `{name?}` takes one that
///   may be empty (`/iid/info/`).
/// - `/api/v1/devices/{token}:unregister`: the segment ends in `:unregister` after its last colon
///   (tokens contain colons themselves); `{name}` takes what comes before, possibly nothing.
///   A colon outside braces is literal: `/api/v1/xmpp:drain`.
/// - `/iid/...`: every path that starts with `/iid/`.
///
/// A literal pattern wins over `{…}` patterns, which are tried in table order, and those over
/// prefixes, longest first. An entry counts only when its method is the request's or `*`: with
/// another method, the path falls through to the next pattern that matches, in the end to its
/// surface's prefix, whose handler answers in that surface's format.
///
/// The matching itself is `RouteTable`, which is not generic: it answers an index into the
/// table. `Router` only maps that index to its handler, inline in the caller, so a route table in
/// another module costs no generic metadata look-ups per request.
public struct Router<Handler: Sendable>: Sendable {
    @usableFromInline let table: RouteTable
    @usableFromInline let handlers: [Handler]
    @usableFromInline let otherwise: Handler

    /// A router over `table`: (method or `*`, pattern, handler); `otherwise` answers what nothing
    /// matches. A malformed pattern, or a method and pattern given twice, stops the program (the
    /// table is written by hand).
    public init(_ table: [(String, String, Handler)], otherwise: Handler) {
        self.table = RouteTable(table.map { ($0.0, $0.1) })
        self.handlers = table.map(\.2)
        self.otherwise = otherwise
    }

    /// The handler for `method` and `path`, with the segments its pattern names.
    @inlinable
    public func match(_ method: String, _ path: String) -> (handler: Handler, params: PathParams) {
        let (index, params) = table.match(method, path)
        return (index.map { handlers[$0] } ?? otherwise, params)
    }
}

/// The route table's matcher (see `Router`): which entry of the table a method and path match.
@usableFromInline
struct RouteTable: Sendable {
    struct Entry: Sendable {
        let method: String
        let pattern: RoutePattern
        /// The entry's place in the table it was made from.
        let index: Int
    }

    /// Literal paths as UTF-8 and their entries. Found by a scan that compares a path only with
    /// those of its length: cheaper than hashing it, with a few dozen routes.
    private var exact: [(path: [UInt8], entries: [Entry])] = []
    /// `{…}` patterns by their first segment (`api` for `/api/v1/devices/{token}`), in table
    /// order: a request tries only those under its own first segment, not the whole control
    /// API's before the v1 send's. Every pattern begins with a literal segment (checked).
    private var patterned: [(head: [UInt8], entries: [Entry])] = []
    private var prefixed: [Entry] = []

    /// A table of (method or `*`, pattern).
    init(_ table: [(String, String)]) {
        var seen = Set<String>()
        for (index, (method, text)) in table.enumerated() {
            precondition(seen.insert(method + " " + text).inserted, "route given twice: \(method) \(text)")
            let e = Entry(method: method, pattern: RoutePattern(text), index: index)
            switch e.pattern.kind {
            case .literal:
                let bytes = Array(text.utf8)
                if let i = exact.firstIndex(where: { $0.path == bytes }) {
                    exact[i].entries.append(e)
                } else {
                    exact.append((bytes, [e]))
                }
            case .segments:
                let head = Array(Self.firstSegment(e.pattern.literalPrefix[...]).utf8)
                precondition(!head.isEmpty, "a pattern's first segment is literal: \(text)")
                if let i = patterned.firstIndex(where: { $0.head == head }) {
                    patterned[i].entries.append(e)
                } else {
                    patterned.append((head, [e]))
                }
            case .prefix: prefixed.append(e)
            }
        }
        // Stable: among prefixes of one length, the table's order.
        prefixed = prefixed.enumerated().sorted {
            ($0.element.pattern.literalPrefix.utf8.count, -$0.offset) > ($1.element.pattern.literalPrefix.utf8.count, -$1.offset)
        }.map(\.element)
    }

    /// The index of the entry `method` and `path` match (nil: none), with the segments its
    /// pattern names.
    @usableFromInline
    func match(_ method: String, _ path: String) -> (index: Int?, params: PathParams) {
        var text = path
        // On the path's contiguous UTF-8: which literal path it is, and which first segment's
        // patterns it may match.
        let (literal, head) = text.withUTF8 { b -> (Int?, Int?) in
            let literal = exact.firstIndex { $0.path.count == b.count && Self.equal($0.path, b[...]) }
            guard b.first == UInt8(ascii: "/") else { return (literal, nil) }
            let first = b[1...].prefix { $0 != UInt8(ascii: "/") }
            return (literal, patterned.firstIndex { $0.head.count == first.count && Self.equal($0.head, first) })
        }
        if let literal {
            for e in exact[literal].entries where e.accepts(method) { return (e.index, .none) }
        }
        // Split once, and only when some pattern could match.
        var segments: [Substring]?
        for e in head.map({ patterned[$0].entries }) ?? [] where e.accepts(method) && Self.hasPrefix(path, e.pattern.literalPrefix) {
            if let tail = e.pattern.tail {
                // One parameter between literal text (`/v1/projects/{project}/messages:send`):
                // matched on the bytes, without cutting the path into segments.
                if let value = e.pattern.captureBetween(path, tail: tail) {
                    return (e.index, PathParams(names: e.pattern.names, values: [value]))
                }
                continue
            }
            if segments == nil { segments = Self.segments(path) }
            if let values = e.pattern.capture(segments!) {
                return (e.index, PathParams(names: e.pattern.names, values: values))
            }
        }
        for e in prefixed where e.accepts(method) && Self.hasPrefix(path, e.pattern.literalPrefix) {
            return (e.index, .none)
        }
        return (nil, .none)
    }
}

extension RouteTable {
    /// Whether `bytes` are `expected`'s (the caller compared the counts).
    static func equal(_ expected: [UInt8], _ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        expected.withUnsafeBytes { $0.elementsEqual(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes))) }
    }

    /// Whether `path` starts with the bytes of `prefix`.
    static func hasPrefix(_ path: String, _ prefix: String) -> Bool {
        var path = path, prefix = prefix
        return path.withUTF8 { p in
            prefix.withUTF8 { q in p.count >= q.count && UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: p[..<q.count])).elementsEqual(UnsafeRawBufferPointer(q)) }
        }
    }

    /// The text between the leading `/` and the next one (empty for `/` or no leading slash).
    /// Paths are cut on their bytes: `/` is ASCII, and walking UTF-8 bytes costs a fraction of
    /// walking characters.
    static func firstSegment(_ path: Substring) -> Substring {
        let u = path.utf8
        guard u.first == UInt8(ascii: "/") else { return "" }
        let start = u.index(after: u.startIndex)
        return path[start..<(u[start...].firstIndex(of: UInt8(ascii: "/")) ?? u.endIndex)]
    }

    /// `path` cut at every `/` (empty pieces kept: `/a/b` is `["", "a", "b"]`).
    static func segments(_ path: String) -> [Substring] {
        // The slashes' byte offsets from the contiguous UTF-8, then one index each (an offset
        // into a native string's UTF-8 is found in constant time).
        var text = path
        let cuts = text.withUTF8 { bytes -> [Int] in
            var found: [Int] = []
            found.reserveCapacity(8)
            for (i, b) in bytes.enumerated() where b == UInt8(ascii: "/") { found.append(i) }
            return found
        }
        let u = text.utf8
        var out: [Substring] = []
        out.reserveCapacity(cuts.count + 1)
        var start = u.startIndex
        for cut in cuts {
            let slash = u.index(u.startIndex, offsetBy: cut)
            out.append(text[start..<slash])
            start = u.index(after: slash)
        }
        out.append(text[start..<u.endIndex])
        return out
    }
}

extension RouteTable.Entry {
    /// A HEAD request takes a GET route: the same answer's head, without its body (RFC 9110 §9.3.2).
    func accepts(_ m: String) -> Bool { method == "*" || method == m || (method == "GET" && m == "HEAD") }
}

/// One compiled path pattern (see `Router` and `RouteTable`).
struct RoutePattern: Sendable {
    enum Kind: Sendable { case literal, segments, prefix }

    enum Segment: Sendable {
        case literal(String)
        /// `{name}` (`allowsEmpty`: `{name?}`).
        case parameter(allowsEmpty: Bool)
        /// `{name}:verb`.
        case verb(String)
    }

    let kind: Kind
    /// The text before the first `{` (or the `...`): a path must start with it.
    let literalPrefix: String
    /// The segments as `split("/")` gives them, the leading empty one included.
    let segments: [Segment]
    /// The parameters' names, in order.
    let names: [String]
    /// For a pattern of one parameter (that may not be empty) between literal text, the text
    /// after it (`/messages:send`; empty when the parameter ends the pattern).
    let tail: [UInt8]?

    init(_ text: String) {
        precondition(text.hasPrefix("/"), "a route pattern starts with '/': \(text)")
        if text.hasSuffix("/...") {
            let prefix = String(text.dropLast(3))
            precondition(!prefix.contains("{"), "a prefix pattern has no parameters: \(text)")
            (kind, literalPrefix, segments, names, tail) = (.prefix, prefix, [], [], nil)
            return
        }
        precondition(!text.contains("..."), "'...' ends a pattern: \(text)")
        guard let brace = text.firstIndex(of: "{") else {
            (kind, literalPrefix, segments, names, tail) = (.literal, text, [], [], nil)
            return
        }
        var segments: [Segment] = []
        var names: [String] = []
        for s in text.split(separator: "/", omittingEmptySubsequences: false) {
            guard s.hasPrefix("{") else {
                precondition(!s.contains("{") && !s.contains("}"), "a parameter fills its segment: \(text)")
                segments.append(.literal(String(s)))
                continue
            }
            guard let close = s.firstIndex(of: "}") else { preconditionFailure("unclosed '{' in \(text)") }
            var name = s[s.index(after: s.startIndex)..<close]
            let rest = s[s.index(after: close)...]
            let allowsEmpty = name.hasSuffix("?")
            if allowsEmpty { name = name.dropLast() }
            precondition(!name.isEmpty, "a parameter needs a name: \(text)")
            if rest.isEmpty {
                segments.append(.parameter(allowsEmpty: allowsEmpty))
            } else {
                precondition(rest.hasPrefix(":") && rest.count > 1 && !rest.dropFirst().contains(":") && !allowsEmpty && !rest.contains("}"),
                             "after a parameter comes nothing or ':verb': \(text)")
                segments.append(.verb(String(rest.dropFirst())))
            }
            names.append(String(name))
        }
        (kind, literalPrefix, self.segments, self.names) = (.segments, String(text[..<brace]), segments, names)
        let parameters = segments.filter { if case .literal = $0 { false } else { true } }
        if parameters.count == 1, case .parameter(allowsEmpty: false) = parameters[0],
           let close = text.firstIndex(of: "}"), literalPrefix.hasSuffix("/") {
            tail = Array(text[text.index(after: close)...].utf8)
        } else {
            tail = nil
        }
    }

    /// The parameter's value when `path` is `literalPrefix`, then a non-empty run of bytes
    /// without `/`, then `tail`; else nil. (The caller checked the prefix.) Compared over the
    /// contiguous UTF-8: through `String.UTF8View`'s generic walk it cost 3,000 instructions.
    func captureBetween(_ path: String, tail: [UInt8]) -> Substring? {
        let head = literalPrefix.utf8.count, end = tail.count
        var text = path
        let fits = text.withUTF8 { b -> Bool in
            guard b.count > head + end else { return false }
            for i in 0..<end where b[b.count - end + i] != tail[i] { return false }
            for i in head..<(b.count - end) where b[i] == UInt8(ascii: "/") { return false }
            return true
        }
        guard fits else { return nil }
        let u = path.utf8
        return path[u.index(u.startIndex, offsetBy: head)..<u.index(u.endIndex, offsetBy: -end)]
    }

    /// The parameters' values if `path` (split on `/`) matches, else nil.
    func capture(_ path: [Substring]) -> [Substring]? {
        guard path.count == segments.count else { return nil }
        // Checked before anything is captured, so a miss allocates nothing.
        for (p, s) in zip(segments, path) {
            switch p {
            case .literal(let l): if s != l { return nil }
            case .parameter(let allowsEmpty): if s.isEmpty && !allowsEmpty { return nil }
            case .verb(let v): if Self.verbSplit(s)?.verb != v[...] { return nil }
            }
        }
        var values: [Substring] = []
        values.reserveCapacity(names.count)
        for (p, s) in zip(segments, path) {
            switch p {
            case .literal: break
            case .parameter: values.append(s)
            case .verb: values.append(Self.verbSplit(s)!.head)
            }
        }
        return values
    }

    /// A segment split at its last colon.
    private static func verbSplit(_ s: Substring) -> (head: Substring, verb: Substring)? {
        guard let colon = s.utf8.lastIndex(of: UInt8(ascii: ":")) else { return nil }
        return (s[..<colon], s[s.utf8.index(after: colon)...])
    }
}

/// The segments a pattern's `{name}`s matched, as sent (still percent-encoded).
public struct PathParams: Sendable {
    public static let none = PathParams(names: [], values: [])

    public let names: [String]
    public let values: [Substring]

    public subscript(_ name: String) -> Substring? {
        names.firstIndex(of: name).map { values[$0] }
    }
}
