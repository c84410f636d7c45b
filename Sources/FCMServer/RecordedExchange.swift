import FCMCore
import FCMStore
import HTTPServer

/// What a message record keeps of its exchange for the inspection page: the request headers
/// that matter (the credential masked) and the answer its sender got, both as JSON.
enum RecordedExchange {
    /// An answer's body is kept up to this many bytes (a multicast's results can be long).
    static let maxBodyBytes = 4096

    /// The request headers a tester asks about, in this order, by the name they are shown with.
    static let headerNames = ["content-type", "authorization", "user-agent", "x-firebase-client", "x-goog-api-client",
                              "x-goog-user-project", "access_token_auth"]

    /// `{"content-type":"…","authorization":"key=AIza12…",…}` of the headers `r` has.
    static func headers(_ r: HTTPRequest) -> String {
        var w = JSONWriter()
        w.beginObject()
        for name in headerNames {
            guard let v = r.header(name) else { continue }
            w.key(name)
            w.value(name == "authorization" ? mask(v) : String(v.prefix(256)))
        }
        w.endObject()
        return w.string
    }

    /// A credential with only its scheme and first characters left: `key=AIzaSy…`, `Bearer eyJhbG…`.
    static func mask(_ credential: String) -> String {
        var scheme = ""
        var secret = Substring(credential)
        if let i = credential.firstIndex(where: { $0 == " " || $0 == "=" }) {
            scheme = String(credential[...i])
            secret = credential[credential.index(after: i)...]
        }
        return scheme + secret.prefix(6) + (secret.count > 6 ? "…" : "")
    }

    /// `{"status":N,"content_type":"…","body":"…"}` of an HTTP answer (`body_truncated` when cut).
    static func answer(_ response: HTTPResponse) -> String {
        let type = response.headers.first { $0.0.lowercased() == "content-type" }?.1
        return answer(status: response.status, contentType: type, body: response.body)
    }

    /// The same for any answer: an XMPP ack or nack has no status and the stanza as body.
    static func answer(status: Int?, contentType: String?, body: [UInt8]) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("status"); if let status { w.value(status) } else { w.null() }
        w.key("content_type"); w.value(contentType)
        var cut = body.prefix(maxBodyBytes)
        // Never split a UTF-8 sequence: drop continuation bytes and the lead byte they follow.
        if cut.count < body.count {
            while let last = cut.last, last & 0xC0 == 0x80 { cut.removeLast() }
            if let last = cut.last, last >= 0xC0 { cut.removeLast() }
        }
        w.key("body"); w.value(String(decoding: cut, as: UTF8.self))
        if cut.count < body.count { w.key("body_truncated"); w.value(true) }
        w.endObject()
        return w.string
    }
}

extension Engine {
    /// Keeps the answer a record's sender got, and its request headers, on the record. Queued
    /// behind the record's own insert (callers have seen it committed) and not waited for: the
    /// answer goes out at once, and `messageRecord` drains the queue before it reads.
    func keepAnswer(record id: Int64?, answer: String, headers: String?) {
        guard let id else { return }
        _ = submit([Writes.setAnswer(message: id, answer: answer, headers: headers)])
    }
}
