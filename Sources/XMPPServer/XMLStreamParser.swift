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
    /// Not well-formed XML, invalid UTF-8 (`invalid-xml`).
    case invalidXML(String)
    /// A DOCTYPE or entity declaration (`restricted-xml`): refused, so no billion laughs and no
    /// external entities.
    case restrictedXML
    /// A stanza over the size limit (`policy-violation`).
    case tooBig(Int)
    /// A stanza nested deeper, or made of more elements, than the limits (`policy-violation`):
    /// each element costs memory well beyond its bytes, and freeing a deep tree recurses.
    case tooComplex(String)
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
        // a stream claiming another encoding is not turned into valid text.
        parser = XML_ParserCreate("UTF-8")
        configure()
    }

    deinit { XML_ParserFree(parser) }

    /// Starts over for a new stream on the same connection (after SASL success).
    public func reset() {
        XML_ParserReset(parser, "UTF-8")
        stack = []
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
        XML_SetElementHandler(parser, startHandler, endHandler)
        XML_SetCharacterDataHandler(parser, textHandler)
        XML_SetEntityDeclHandler(parser, entityHandler)
        // Refusing every DOCTYPE and entity declaration leaves nothing to expand: no billion
        // laughs, no external entities.
        XML_SetStartDoctypeDeclHandler(parser, doctypeHandler)
    }

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
            return try fail(.invalidXML(message))
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

    fileprivate func start(_ name: String, _ attrs: [String: String]) {
        let isStream = name == "stream" || name.hasSuffix(":stream")
        if depth == 0 {
            // The document element must be the stream itself (SASL before the header is not).
            guard isStream else { return stop(.invalidXML("the stream must start with <stream:stream>, not <\(name)>")) }
            depth = 1
            events.append(.streamOpen(attrs))
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
        stack.append(XMLElement(name: name, attributes: attrs))
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

private let startHandler: XML_StartElementHandler = { data, name, attrs in
    guard let p = parserFrom(data), let name else { return }
    var dict: [String: String] = [:]
    if var a = attrs {
        while let k = a.pointee, let v = a.advanced(by: 1).pointee {
            dict[String(cString: k)] = String(cString: v)
            a = a.advanced(by: 2)
        }
    }
    p.start(String(cString: name), dict)
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
