// The bridge between libnghttp2's C callbacks and `HTTP2Connection`: each callback finds its
// connection through `user_data` (the connection, unretained: `run()` keeps it alive while the
// session exists) and captures nothing, so none can inherit an actor.

import Synchronization
import CNGHTTP2
import Glibc
import Platform

extension HTTP2Connection {
    /// Registers the callbacks below.
    func installCallbacks(_ cbs: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, onBeginFrame)
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(cbs, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, onFrameRecv)
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, onStreamClose)
    }

    /// A frame header arrived: header blocks are bounded here, before nghttp2 buffers anything
    /// (a CONTINUATION flood ends the connection once the block outgrows the header list limit).
    func beginFrame(type: UInt8, length: Int) -> Int32 {
        sawFrame = true
        if type == FCM_NGHTTP2_HEADERS {
            headerBlockBytes = length
        } else if type == FCM_NGHTTP2_CONTINUATION {
            headerBlockBytes += length
            if headerBlockBytes > limits.maxHeaderListBytes + 16 * 1024 {
                fatal = FCM_NGHTTP2_ENHANCE_YOUR_CALM
                return Int32(FCM_NGHTTP2_ERR_CALLBACK_FAILURE)
            }
        }
        return 0
    }

    /// One header field of stream `id`, counted against the header list limit (as RFC 9113
    /// sizes it) whether kept or not: an HPACK bomb decodes to much more than it sends, and
    /// nothing past the limit is copied.
    func header(stream id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let s = stream(id) else { return }
        s.headerListBytes += name.count + value.count + 32
        if s.headerListBytes > limits.maxHeaderListBytes {
            s.headersTooLarge = true
            s.headers = []
            return
        }
        if s.headersTooLarge { return }
        if name.first == UInt8(ascii: ":") {
            // Pseudo-headers told apart by their bytes; only the three kept are decoded.
            if Self.bytes(name, are: ":method") {
                s.method = String(decoding: value, as: UTF8.self)
            } else if Self.bytes(name, are: ":path") {
                s.path = String(decoding: value, as: UTF8.self)
            } else if Self.bytes(name, are: ":authority") {
                s.authority = String(decoding: value, as: UTF8.self)
            }
        } else {
            // Room for a usual request's fields, and the Host that dispatch adds, at once.
            if s.headers.isEmpty { s.headers.reserveCapacity(12) }
            s.headers.append((name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self)))
        }
    }

    /// Stream `id`, through `lastStream` when the callbacks stay on one stream.
    func stream(_ id: Int32) -> HTTP2Stream? {
        if let s = lastStream, s.id == id { return s }
        let s = streams[id]
        lastStream = s
        return s
    }

    /// Whether `b` holds exactly the bytes of `text`.
    static func bytes(_ b: UnsafeBufferPointer<UInt8>, are text: StaticString) -> Bool {
        b.count == text.utf8CodeUnitCount && (b.isEmpty || memcmp(b.baseAddress!, text.utf8Start, b.count) == 0)
    }

    /// Request body bytes, kept up to the server's body limit (beyond it: read and dropped, and
    /// the handler sees `bodyTooLarge`, as on HTTP/1.1).
    func data(stream id: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let s = stream(id), !s.bodyTooLarge else { return }
        if s.requestBody.count + bytes.count > core.maxBodyBytes {
            s.bodyTooLarge = true
            pendingBodyBytes -= s.requestBody.count
            s.requestBody = []
        } else {
            s.requestBody.append(contentsOf: bytes)
            pendingBodyBytes += bytes.count
            // Many streams each under the body limit still add up: the connection's own bound.
            if pendingBodyBytes > limits.maxPendingBodyBytes { fatal = fatal ?? FCM_NGHTTP2_ENHANCE_YOUR_CALM }
        }
    }

    /// A RST_STREAM from the client spends one token of the rapid-reset budget.
    func clientReset() {
        let now = monotonicNanos()
        let refill = Double(now &- resetRefilledAt) / 1e9 * Double(limits.resetsPerSecond)
        resetTokens = min(Double(limits.resetBurst), resetTokens + refill)
        resetRefilledAt = now
        resetTokens -= 1
        if resetTokens < 0 { fatal = FCM_NGHTTP2_ENHANCE_YOUR_CALM }
    }

    /// The request of stream `s` is complete: to the handler (or 431 / 503 without it).
    func dispatch(_ s: HTTP2Stream) {
        guard !s.dispatched else { return }
        s.dispatched = true
        let responder = HTTPResponder(stream: HTTP2StreamTarget(connection: self, id: s.id))
        s.responder = responder
        if s.headersTooLarge {
            responder.send(HTTPResponse(status: 431, contentType: "text/plain; charset=UTF-8",
                                        body: "Request Header Fields Too Large\n"))
            return
        }
        var path = s.path, query: [(String, String?)] = []
        // Found on the UTF-8 bytes: `?` is ASCII, and walking characters cost a request about
        // 17,000 instructions (callgrind, 47 calls of `index(after:)` for a 45-byte v1 path).
        if let q = path.utf8.firstIndex(of: UInt8(ascii: "?")) {
            query = parseQuery(path[path.utf8.index(after: q)...])
            path = String(path[..<q])
        }
        var headers = s.headers
        s.headers = []  // the array is the request's now: the insert below copies nothing
        // HTTP/1.1's Host is :authority in HTTP/2; handlers read Host (base URLs they answer).
        if let a = s.authority, !headers.contains(where: { equalIgnoringASCIICase($0.name, "host") }) {
            headers.insert((name: "Host", value: a), at: 0)
        }
        var request = HTTPRequest(method: s.method, path: path.isEmpty ? "/" : path, rawQuery: query, headers: headers,
                                  body: s.requestBody, bodyTooLarge: s.bodyTooLarge)
        request.isSecure = transport.isSecure
        request.isHTTP2 = true
        request.clientCertificate = transport.peerCertificate
        if core.afterBatch != nil {
            request.inBatch = true
            batchPending = true
        }
        pendingBodyBytes -= s.requestBody.count
        s.requestBody = []
        s.method = request.method
        s.path = request.path
        if core.accessLog != nil { s.authorization = request.header("Authorization") }
        core.handing.add(1, ordering: .sequentiallyConsistent)
        defer { core.handing.subtract(1, ordering: .sequentiallyConsistent) }
        if core.refusing.load(ordering: .sequentiallyConsistent) {
            responder.send(ServerCore.shuttingDown)
            return
        }
        core.handler(request, responder)
    }

    /// Header fields HTTP/2 forbids in a response, lower-cased.
    static let connectionSpecific: Set<String> = ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]

    /// Queues `r` as the answer of stream `id` (the connection thread, from the inbox).
    func submit(_ r: HTTPResponse, to id: Int32) {
        guard let session, let s = streams[id], !s.responded else { return }
        s.responded = true
        if let log = core.accessLog {
            log(HTTPAccess(method: s.method, path: s.path, status: r.abort ? 0 : r.status,
                           bytes: r.stream == nil ? r.body.count : -1, authorization: s.authorization,
                           nanos: monotonicNanos() &- s.startedAt))
        }
        if r.abort {
            // A dropped connection on HTTP/1.1 is a reset stream here: the other streams go on.
            nghttp2_submit_rst_stream(session, 0, id, FCM_NGHTTP2_INTERNAL_ERROR)
            return
        }
        var fields: [(String, String)] = []
        fields.reserveCapacity(r.headers.count + 2)
        fields.append((":status", String(r.status)))
        for (k, v) in r.headers {
            // Field names go out in lower case: the handlers' one common capitalized name without
            // building a copy, any other with capitals lower-cased.
            let name = k == "Content-Type" ? "content-type"
                : k.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) ? k.lowercased() : k
            // Connection-specific fields are malformed in HTTP/2 (RFC 9113 §8.2.2).
            if Self.connectionSpecific.contains(name) { continue }
            fields.append((name, v))
        }
        let hasBody: Bool
        if s.method == "HEAD" {
            // The head of the answer a GET would have had: its length, no body.
            if let stream = r.stream { stream.released() } else { fields.append(("content-length", String(r.body.count))) }
            hasBody = false
        } else if let stream = r.stream {
            s.body = stream
            let connection = self
            stream.state.withLock { $0.wake = { connection.post(.resume(id)) } }
            hasBody = true
        } else {
            fields.append(("content-length", String(r.body.count)))
            s.out = r.body
            unsentBytes += r.body.count
            hasBody = !r.body.isEmpty
        }
        // nghttp2 copies the fields while submitting: one buffer holds them for the call.
        var storage: [UInt8] = []
        storage.reserveCapacity(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count })
        var spans: [(Int, Int, Int, Int, UInt8)] = []
        spans.reserveCapacity(fields.count)
        for (k, v) in fields {
            let ks = storage.count
            storage.append(contentsOf: k.utf8)
            let vs = storage.count
            storage.append(contentsOf: v.utf8)
            let once = !r.neverIndexed.isEmpty && r.neverIndexed.contains { equalIgnoringASCIICase($0, k) }
            spans.append((ks, k.utf8.count, vs, v.utf8.count, once ? FCM_NGHTTP2_NV_FLAG_NO_INDEX : FCM_NGHTTP2_NV_FLAG_NONE))
        }
        if storage.isEmpty { storage.append(0) }
        storage.withUnsafeMutableBufferPointer { b in
            let base = b.baseAddress!
            var nva = spans.map {
                nghttp2_nv(name: base + $0.0, value: base + $0.2, namelen: $0.1, valuelen: $0.3, flags: $0.4)
            }
            _ = fcm_nghttp2_submit_response(session, id, &nva, nva.count, hasBody ? readBodyCallback : nil, nil)
        }
    }

    /// nghttp2 asks for the next bytes of stream `id`'s answer.
    func readBody(stream id: Int32, into buf: UnsafeMutablePointer<UInt8>, max: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let s = streams[id] else { return Int(FCM_NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE) }
        if let body = s.body {
            // Cut by its producer: the stream is reset (nghttp2 answers this with RST_STREAM).
            if body.isCut { return Int(FCM_NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE) }
            let (bytes, end) = body.nextBytes(max: max)
            if end { flags.pointee |= FCM_NGHTTP2_DATA_FLAG_EOF }
            if bytes.isEmpty && !end { return Int(FCM_NGHTTP2_ERR_DEFERRED) }
            bytes.withUnsafeBufferPointer { buf.update(from: $0.baseAddress!, count: $0.count) }
            return bytes.count
        }
        let n = min(max, s.out.count - s.sent)
        s.out.withUnsafeBufferPointer { buf.update(from: $0.baseAddress! + s.sent, count: n) }
        s.sent += n
        unsentBytes -= n
        if s.sent == s.out.count {
            flags.pointee |= FCM_NGHTTP2_DATA_FLAG_EOF
            s.out = []
        }
        return n
    }
}

/// Query arguments as the HTTP/1.1 parser gives them (still percent-encoded; `?flag` has a nil value).
func parseQuery(_ q: Substring) -> [(String, String?)] {
    q.split(separator: "&", omittingEmptySubsequences: true).map { part in
        if let eq = part.firstIndex(of: "=") {
            return (String(part[..<eq]), String(part[part.index(after: eq)...]))
        }
        return (String(part), nil)
    }
}

private func connection(_ ud: UnsafeMutableRawPointer?) -> HTTP2Connection {
    Unmanaged<HTTP2Connection>.fromOpaque(ud!).takeUnretainedValue()
}

private let onBeginFrame: nghttp2_on_begin_frame_callback = { _, hd, ud in
    guard let hd else { return 0 }
    return connection(ud).beginFrame(type: hd.pointee.type, length: hd.pointee.length)
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, ud in
    guard let frame, frame.pointee.hd.type == FCM_NGHTTP2_HEADERS,
          frame.pointee.headers.cat.rawValue == UInt32(FCM_NGHTTP2_HCAT_REQUEST) else { return 0 }
    let c = connection(ud)
    let id = frame.pointee.hd.stream_id
    c.streams[id] = HTTP2Stream(id: id)
    // Busy from now: the connection limit does not choose it as idle.
    c.idleSince.store(0, ordering: .relaxed)
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, namelen, value, valuelen, _, ud in
    guard let frame else { return 0 }
    connection(ud).header(stream: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: namelen),
                          value: UnsafeBufferPointer(start: value, count: valuelen))
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, id, data, len, ud in
    connection(ud).data(stream: id, UnsafeBufferPointer(start: data, count: len))
    return 0
}

private let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, ud in
    guard let frame else { return 0 }
    let c = connection(ud)
    let hd = frame.pointee.hd
    if hd.type == FCM_NGHTTP2_RST_STREAM {
        c.clientReset()
    } else if (hd.type == FCM_NGHTTP2_HEADERS || hd.type == FCM_NGHTTP2_DATA), hd.flags & FCM_NGHTTP2_FLAG_END_STREAM != 0,
              let s = c.streams[hd.stream_id] {
        c.requestComplete(s)
    }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, id, _, ud in
    let c = connection(ud)
    if let s = c.streams.removeValue(forKey: id) {
        s.body?.released()
        c.pendingBodyBytes -= s.requestBody.count
        // An answer the client will never read (it reset the stream) is held no longer.
        if s.sent < s.out.count { c.unsentBytes -= s.out.count - s.sent }
    }
    if c.lastStream?.id == id { c.lastStream = nil }
    return 0
}

private let readBodyCallback: nghttp2_data_source_read_callback = { _, id, buf, length, flags, _, ud in
    guard let buf, let flags else { return Int(FCM_NGHTTP2_ERR_CALLBACK_FAILURE) }
    return connection(ud).readBody(stream: id, into: buf, max: length, flags: flags)
}
