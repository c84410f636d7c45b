import CMicroHTTPD

// What the HTTP/1.1 access handler (HTTPServer.swift) keeps of one request between
// libmicrohttpd's calls, and how it collects the request's header fields and query arguments.

/// Per-request state between the calls libmicrohttpd makes for one request. It is only touched
/// by the loop thread that owns the connection, one call after another.
final class RequestContext {
    var body: [UInt8] = []
    var tooLarge = false
    var responder: HTTPResponder?
    /// What the access log needs of the request (set when the request is complete).
    var method = ""
    var path = ""
    var authorization: String?
    var startedAt: UInt64 = 0
}

/// Collects header fields and query arguments during `MHD_get_connection_values`, already in
/// the shapes `HTTPRequest` keeps (one object per request, arrays only as needed).
final class PairCollector {
    var headers: [(name: String, value: String)] = []
    var query: [(String, String?)] = []
    /// Which list the iterator fills.
    var collectingQuery = false
    init() { headers.reserveCapacity(12) }  // one allocation for a usual request's headers
}

/// What `MHD_get_connection_values` calls for each pair: appends it to the `PairCollector`
/// its context points to.
let collectPair: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return FCM_MHD_YES }
    let c = Unmanaged<PairCollector>.fromOpaque(cls).takeUnretainedValue()
    if c.collectingQuery {
        c.query.append((String(cString: key), value.map { String(cString: $0) }))
    } else {
        c.headers.append((name: String(cString: key), value: value.map { String(cString: $0) } ?? ""))
    }
    return FCM_MHD_YES
}
