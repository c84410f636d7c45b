import CExpat

/// What the stream parser found.
public enum XMLStreamEvent: Equatable, Sendable {
    /// The stream header (`<stream:stream …>`), with its attributes.
    case streamOpen([String: String])
    /// A complete top-level stanza.
    case stanza(XMLElement)
    /// `</stream:stream>`.
    case streamClose
}

/// Why the stream cannot go on (answered with a stream error, then the stream is closed).
public enum XMLStreamError: Error, Equatable, Sendable {
    /// Well-formed XML that is no XMPP stream: no stream header first, or one inside the stream
    /// (`invalid-xml`).
    case invalidXML(String)
    /// Not well-formed XML (mismatched tags, invalid UTF-8), or well-formed but breaking
    /// Namespaces in XML 1.0: an undeclared prefix, a prefix bound to the empty name, a misused
    /// `xml` or `xmlns` prefix, two colons in a name (`invalid-xml`, as fcm-legacy.md §5 has it).
    case notWellFormed(String)
    /// A stream header outside the stream namespace, or declaring a content namespace other than
    /// `jabber:client` (`invalid-namespace`).
    case invalidNamespace(String)
    /// A DOCTYPE or entity declaration, a comment or a processing instruction (`restricted-xml`,
    /// RFC 6120 11.1): refused, so no billion laughs and no
    /// external entities.
    case restrictedXML
    /// A stanza over the size limit (`policy-violation`).
    case tooBig(Int)
    /// A stanza nested deeper, or made of more elements, than the limits (`policy-violation`):
    /// each element costs memory well beyond its bytes, and freeing a deep tree recurses.
    case tooComplex(String)

    /// The stream error condition (RFC 6120 4.9.3) and text that answer it.
    public var streamError: (condition: String, text: String) {
        switch self {
        case .invalidXML(let why): ("invalid-xml", why)
        // The contract (fcm-legacy.md §5: "Malformed XML → invalid-xml") over RFC 6120's
        // `not-well-formed` (4.9.3.13): what CCS clients are tested against. The text says why.
        case .notWellFormed(let why): ("invalid-xml", why)
        // 4.8.1 names this condition for a header outside the stream namespace; 4.9.3.10 adds a
        // content namespace that is not supported.
        case .invalidNamespace(let why): ("invalid-namespace", why)
        case .restrictedXML: ("restricted-xml", "DTDs, entity declarations, comments and processing instructions are not allowed")
        case .tooBig(let limit): ("policy-violation", "a stanza may not exceed \(limit) bytes")
        case .tooComplex(let why): ("policy-violation", why)
        }
    }
}

/// Namespace names the stream parser and the listener check.
public enum XMPPNamespace {
    /// The stream namespace (RFC 6120 4.8.1): the stream header's and `<stream:error>`'s.
    public static let streams = "http://etherx.jabber.org/streams"
    /// The content namespace of client-to-server streams (RFC 6120 4.8.3).
    public static let client = "jabber:client"
    /// SASL negotiation (`<auth>`, `<success>`, `<failure>`).
    public static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
}

/// An incremental XMPP stream parser on expat: bytes in (split anywhere), stanzas out.
///
/// Not Sendable: one connection's reader thread owns it.
public final class XMLStreamParser {
    private var parser: XML_Parser
    private var stack: [XMLElement] = []
    private var events: [XMLStreamEvent] = []
    private var failure: XMLStreamError?
    /// Bytes fed since the stream (re)started.
    private var fed = 0
    /// Where the stanza being read began (in `fed`'s count): just after the last complete
    /// top-level item (the stream header, a stanza, whitespace between stanzas). Everything past
    /// it is one stanza in the making, counted in raw bytes whatever expat does with them: an
    /// unfinished start tag with megabytes of attributes is counted too.
    private var boundary = 0
    /// The stanza size limit; the connection lowers it until the client has authenticated.
    public var maxStanzaBytes: Int
    /// Element nesting allowed inside a stanza (FCM's deepest is `<iq><bind><resource>`).
    public static let maxDepth = 32
    /// Elements allowed in one stanza (FCM's have a handful).
    public static let maxElements = 1000
    /// Elements of the stanza being read so far.
    private var elements = 0
    /// Local names of stanzas after which parsing pauses: the rest of the bytes fed is kept
    /// (`takeLeftover()`) for the caller to feed after it has reacted, typically by `reset()`
    /// for a stream restart. A paused parser takes nothing more until `reset()`.
    public var pauseAfter: Set<String> = []
    private var paused = false
    private var leftover: [UInt8] = []

    /// A parser refusing stanzas over `maxStanzaBytes`.
    public init(maxStanzaBytes: Int = 1 << 20) {
        self.maxStanzaBytes = maxStanzaBytes
        // UTF-8 whatever the stream's XML declaration says: XMPP is UTF-8 only (RFC 6120), so
        // a stream claiming another encoding is not turned into valid text. Namespace processing
        // on: expat then refuses what is not namespace-well-formed (RFC 6120 11.3) with all it
        // takes (the prefixes in scope, the reserved prefixes and names, attributes compared once
        // expanded), rather than a second bookkeeping of declarations here; the names it reports
        // resolved, `writtenName` turns back into the names as written.
        parser = XML_ParserCreateNS("UTF-8", nameSeparator)
        configure()
    }

    deinit { XML_ParserFree(parser) }

    /// Starts over for a new stream on the same connection (after SASL success).
    public func reset() {
        XML_ParserReset(parser, "UTF-8")
        stack = []
        declarations = [:]
        events = []
        failure = nil
        fed = 0
        boundary = 0
        depth = 0
        elements = 0
        paused = false
        configure()
    }

    private func configure() {
        XML_SetUserData(parser, Unmanaged.passUnretained(self).toOpaque())
        // With the prefix as the third part of each name (reset clears it).
        XML_SetReturnNSTriplet(parser, 1)
        XML_SetStartNamespaceDeclHandler(parser, namespaceHandler)
        XML_SetElementHandler(parser, startHandler, endHandler)
        XML_SetCharacterDataHandler(parser, textHandler)
        XML_SetEntityDeclHandler(parser, entityHandler)
        // Refusing every DOCTYPE and entity declaration leaves nothing to expand: no billion
        // laughs, no external entities.
        XML_SetStartDoctypeDeclHandler(parser, doctypeHandler)
        // RFC 6120 11.1: comments and processing instructions are restricted XML too.
        XML_SetCommentHandler(parser, commentHandler)
        XML_SetProcessingInstructionHandler(parser, processingInstructionHandler)
    }

    /// Bytes of a stanza (or a tag) in the making wait: fed past the last complete top-level item.
    public var stanzaInTheMaking: Bool { fed > boundary }
    /// Where the last complete top-level item ended (in fed bytes): it moves with each stanza.
    public var completedThrough: Int { boundary }

    /// Feeds bytes; returns the events they completed.
    public func feed(_ bytes: [UInt8]) throws(XMLStreamError) -> [XMLStreamEvent] {
        if let failure { throw failure }
        if paused { return try fail(.invalidXML("input after a pause without a restart")) }
        let start = fed
        let status = bytes.withUnsafeBufferPointer { buf in
            buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: max(buf.count, 1)) {
                XML_Parse(parser, $0, Int32(buf.count), 0)
            }
        }
        if let failure { throw failure }
        if status == FCM_XML_STATUS_ERROR {
            let code = XML_GetErrorCode(parser)
            let message = XML_ErrorString(code).map { String(cString: $0) } ?? "not well-formed"
            // A header whose prefix is bound to nothing is in no namespace: the stream namespace
            // is what that client got wrong (4.8.1), more to the point than well-formedness.
            if code == XML_ERROR_UNBOUND_PREFIX && depth == 0 {
                return try fail(.invalidNamespace(Self.streamNamespaceRule + ", its prefix is not declared"))
            }
            // One condition for both: RFC 6120 4.9.3.13 covers [XML] and [XML-NAMES] alike, and
            // expat reports some namespace errors (two colons in a name) as plain syntax errors.
            return try fail(.notWellFormed(namespaceErrors.contains(code) ? "not namespace-well-formed: \(message)" : message))
        }
        if paused {
            // Stopped just after the pausing stanza: the rest of this chunk is the caller's.
            let used = max(0, min(bytes.count, boundary - start))
            leftover = Array(bytes[used...])
            fed = start + used
            defer { events = [] }
            return events
        }
        fed += bytes.count
        // What expat holds back (a stanza, or a tag, not finished yet) is bounded too.
        if fed - boundary > maxStanzaBytes { return try fail(.tooBig(maxStanzaBytes)) }
        defer { events = [] }
        return events
    }

    private func fail(_ e: XMLStreamError) throws(XMLStreamError) -> [XMLStreamEvent] {
        failure = e
        throw e
    }

    /// Records why the stream cannot go on (the first reason wins) and stops expat.
    private func stop(_ e: XMLStreamError) {
        if failure == nil { failure = e }
        XML_StopParser(parser, 0)
    }

    fileprivate func start(_ name: String, _ namespace: String?, _ attrs: [String: String]) {
        // The element's namespace declarations are attributes as written, as without namespace
        // processing.
        let element = XMLElement(name: name, namespace: namespace, attributes: attrs.merging(declarations) { a, _ in a })
        declarations = [:]
        let isStream = element.localName == "stream" && namespace == XMPPNamespace.streams
        if depth == 0 {
            // The document element must be the stream itself (SASL before the header is not).
            guard element.localName == "stream" else { return stop(.invalidXML("the stream must start with <stream:stream>, not <\(name)>")) }
            guard isStream else {
                return stop(.invalidNamespace(Self.streamNamespaceRule + ", not \(namespace ?? "none")"))
            }
            // A client's stream carries client stanzas; none declared is taken as that too.
            if let content = element.attributes["xmlns"], !content.isEmpty, content != XMPPNamespace.client {
                return stop(.invalidNamespace("the content namespace must be \(XMPPNamespace.client), not \(content)"))
            }
            depth = 1
            events.append(.streamOpen(element.attributes))
            markBoundaryAfterEvent()
            return
        }
        // A new stream header where a stanza belongs: only a SASL restart (a reset parser) may
        // open a stream again.
        if depth == 1 && isStream { return stop(.invalidXML("a stream header in the middle of a stream")) }
        depth += 1
        guard checkSize() else { return }
        elements += 1
        if depth - 1 > Self.maxDepth { return stop(.tooComplex("a stanza may not nest elements more than \(Self.maxDepth) deep")) }
        if elements > Self.maxElements { return stop(.tooComplex("a stanza may not have more than \(Self.maxElements) elements")) }
        stack.append(element)
    }

    private static let streamNamespaceRule = "the stream header must be in the namespace \(XMPPNamespace.streams)"

    /// Namespace declarations of the element about to start (expat reports them first).
    private var declarations: [String: String] = [:]

    fileprivate func declare(prefix: String?, namespace: String?) {
        declarations[prefix.map { "xmlns:" + $0 } ?? "xmlns"] = namespace ?? ""
    }

    /// The bytes after a pause (empty otherwise), once.
    public func takeLeftover() -> [UInt8] {
        defer { leftover = [] }
        return leftover
    }

    /// Offset (in `fed`'s count) of the event expat is reporting, from its own stream position.
    private func eventOffset() -> Int { Int(XML_GetCurrentByteIndex(parser)) }

    /// Moves the boundary just past the event being reported.
    private func markBoundaryAfterEvent() {
        boundary = eventOffset() + Int(XML_GetCurrentByteCount(parser))
    }

    /// Stops the parser when the stanza in the making has grown past the limit (inside one fed
    /// chunk; `feed` checks what is left over between chunks). True while within it.
    private func checkSize() -> Bool {
        guard eventOffset() + Int(XML_GetCurrentByteCount(parser)) - boundary > maxStanzaBytes else { return true }
        stop(.tooBig(maxStanzaBytes))
        return false
    }

    fileprivate func end(_ name: String) {
        if depth == 1 {
            depth = 0
            events.append(.streamClose)
            return
        }
        depth -= 1
        guard checkSize(), let done = stack.popLast() else { return }
        if stack.isEmpty {
            events.append(.stanza(done))
            elements = 0
            markBoundaryAfterEvent()
            if pauseAfter.contains(done.localName) {
                paused = true
                XML_StopParser(parser, 1)  // resumable: XML_Parse returns suspended, not an error
            }
        } else {
            stack[stack.count - 1].children.append(done)
        }
    }

    fileprivate func text(_ s: String) {
        // Whitespace between stanzas (keepalives) belongs to no element: the next stanza starts
        // after it.
        guard !stack.isEmpty else {
            markBoundaryAfterEvent()
            return
        }
        guard checkSize() else { return }
        stack[stack.count - 1].text += s
    }

    fileprivate func refuseDeclarations() {
        stop(.restrictedXML)
    }

    private var depth = 0
}

private func parserFrom(_ data: UnsafeMutableRawPointer?) -> XMLStreamParser? {
    data.map { Unmanaged<XMLStreamParser>.fromOpaque($0).takeUnretainedValue() }
}

/// Separates the parts of the names expat reports: U+0001 is in no name and in no namespace
/// name (XML 1.0 allows it nowhere, not even as a character reference), so the split is exact.
private let nameSeparator: CChar = 1

/// Expat's errors for input that is well-formed XML but not namespace-well-formed, named so in
/// the stream error's text.
private let namespaceErrors = [XML_ERROR_UNBOUND_PREFIX, XML_ERROR_UNDECLARING_PREFIX, XML_ERROR_RESERVED_PREFIX_XML,
                               XML_ERROR_RESERVED_PREFIX_XMLNS, XML_ERROR_RESERVED_NAMESPACE_URI]

/// A name as expat reports it (`namespace SEP local SEP prefix`, `namespace SEP local` for the
/// default namespace, `local` for none) as it was written (`prefix:local`), and its namespace.
private func writtenName(_ raw: UnsafePointer<CChar>) -> (name: String, namespace: String?) {
    let s = String(cString: raw)
    guard s.utf8.contains(UInt8(nameSeparator)) else { return (s, nil) }
    let parts = s.utf8.split(separator: UInt8(nameSeparator), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    return parts.count == 3 ? (parts[2] + ":" + parts[1], parts[0]) : (parts[1], parts[0])
}

private let startHandler: XML_StartElementHandler = { data, name, attrs in
    guard let p = parserFrom(data), let name else { return }
    var dict: [String: String] = [:]
    if var a = attrs {
        while let k = a.pointee, let v = a.advanced(by: 1).pointee {
            dict[writtenName(k).name] = String(cString: v)
            a = a.advanced(by: 2)
        }
    }
    let (written, namespace) = writtenName(name)
    p.start(written, namespace, dict)
}

private let namespaceHandler: XML_StartNamespaceDeclHandler = { data, prefix, uri in
    parserFrom(data)?.declare(prefix: prefix.map { String(cString: $0) }, namespace: uri.map { String(cString: $0) })
}

private let endHandler: XML_EndElementHandler = { data, name in
    guard let p = parserFrom(data), let name else { return }
    p.end(String(cString: name))
}

private let textHandler: XML_CharacterDataHandler = { data, s, len in
    guard let p = parserFrom(data), let s, len > 0 else { return }
    let text = s.withMemoryRebound(to: UInt8.self, capacity: Int(len)) {
        String(decoding: UnsafeBufferPointer(start: $0, count: Int(len)), as: UTF8.self)
    }
    p.text(text)
}

private let entityHandler: XML_EntityDeclHandler = { data, _, _, _, _, _, _, _, _ in
    parserFrom(data)?.refuseDeclarations()
}

private let doctypeHandler: XML_StartDoctypeDeclHandler = { data, _, _, _, _ in
    parserFrom(data)?.refuseDeclarations()
}

private let commentHandler: XML_CommentHandler = { data, _ in
    parserFrom(data)?.refuseDeclarations()
}

private let processingInstructionHandler: XML_ProcessingInstructionHandler = { data, _, _ in
    parserFrom(data)?.refuseDeclarations()
}
