import FCMCore
import FCMStore

/// What a message record keeps of its exchange for the inspection page: the request headers
/// that matter (the credential masked) and the answer its sender got.
///
/// Both are kept in a plain form that costs the send path no JSON escaping (every send keeps
/// them): header lines `name\tvalue\n`, and the answer as a first line `status\tcontent type\t
/// truncated` (status `-` for an XMPP stanza, truncated `1` or `0`) followed by the body. The
/// control API turns them into JSON when a record is read (`json(answer:)`, `json(headers:)`).
public enum RecordedExchange {
    /// An answer's body is kept up to this many bytes (a multicast's results can be long).
    static let maxBodyBytes = 4096

    /// A header value with the separators of the stored form (tab, line breaks) as spaces,
    /// appended as bytes: every tab, CR and LF is one space, except CR LF (one character), which
    /// is one space too.
    public static func appendClean(_ value: String, into out: inout [UInt8]) {
        var value = value
        value.withUTF8 { u in
            // Almost every value has none of them: one bulk copy.
            guard u.contains(where: { $0 == 9 || $0 == 10 || $0 == 13 }) else { return out.append(contentsOf: u) }
            var afterCR = false
            for b in u {
                if b == 10 && afterCR {
                    afterCR = false
                    continue
                }
                afterCR = b == 13
                out.append(b == 9 || b == 10 || b == 13 ? 32 : b)
            }
        }
    }

    /// The same for any answer: an XMPP ack or nack has no status and the stanza as body.
    public static func answer(status: Int?, contentType: String?, body: [UInt8]) -> String {
        var cut = body.prefix(maxBodyBytes)
        // Never split a UTF-8 sequence: drop continuation bytes and the lead byte they follow.
        if cut.count < body.count {
            while let last = cut.last, last & 0xC0 == 0x80 { cut.removeLast() }
            if let last = cut.last, last >= 0xC0 { cut.removeLast() }
        }
        // Built as bytes, one string at the end: every HTTP send keeps its answer.
        var out: [UInt8] = []
        out.reserveCapacity(cut.count + 48)
        if let status { out.append(contentsOf: String(status).utf8) } else { out.append(UInt8(ascii: "-")) }
        out.append(9)
        if let contentType { appendClean(contentType, into: &out) }
        out.append(9)
        out.append(cut.count < body.count ? UInt8(ascii: "1") : UInt8(ascii: "0"))
        out.append(10)
        out.append(contentsOf: cut)
        return String(decoding: out, as: UTF8.self)
    }

    /// `{"status":N,"content_type":"…","body":"…"}` (and `"body_truncated":true` when cut) of a
    /// stored answer.
    static func json(answer stored: String) -> String {
        let lines = stored.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let head = lines[0].split(separator: "\t", omittingEmptySubsequences: false)
        var w = JSONWriter()
        w.beginObject()
        w.key("status")
        if let n = head.first.flatMap({ Int($0) }) { w.value(n) } else { w.null() }
        w.key("content_type")
        if head.count > 1, !head[1].isEmpty { w.value(String(head[1])) } else { w.null() }
        w.key("body"); w.value(lines.count > 1 ? String(lines[1]) : "")
        if head.count > 2, head[2] == "1" { w.key("body_truncated"); w.value(true) }
        w.endObject()
        return w.string
    }

    /// `{"content-type":"…","authorization":"key=AIza12…",…}` of stored header lines.
    static func json(headers stored: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        for line in stored.split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            w.key(String(parts[0])); w.value(parts.count > 1 ? String(parts[1]) : "")
        }
        w.endObject()
        return w.string
    }
}

