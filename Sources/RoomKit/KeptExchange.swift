public import FCMModel
import FCMCore
public import FCMEngine
public import HTTPServer
import Platform
import TLS

extension RecordedExchange {
    /// The request headers a tester asks about, in this order, by the name they are shown with.
    public static let headerNames = ["content-type", "authorization", "user-agent", "x-firebase-client", "x-goog-api-client",
                              "x-goog-user-project", "access_token_auth"]

    /// `headerNames` as bytes, for `headerIndex`.
    public static let headerBytes: [[UInt8]] = headerNames.map { Array($0.utf8) }

    /// Which of `headerNames` a field name is (any case), without building a lower-cased copy.
    public static func headerIndex(_ name: String) -> Int? {
        var name = name
        return name.withUTF8 { bytes -> Int? in
            for (i, wanted) in headerBytes.enumerated() where wanted.count == bytes.count {
                var same = true
                for k in 0..<bytes.count {
                    let b = bytes[k]
                    if (b >= 65 && b <= 90 ? b | 0x20 : b) != wanted[k] {
                        same = false
                        break
                    }
                }
                if same { return i }
            }
            return nil
        }
    }

    /// A credential with only its scheme and first characters left: `key=AIzaSy…`, `Bearer eyJhbG…`.
    public static func mask(_ credential: String) -> String {
        // On the bytes: the scheme up to its first space or `=`, then six characters (whole
        // UTF-8 sequences) of the secret.
        // Read in place: a Bearer token is long, and only its first bytes are kept.
        var credential = credential
        return credential.withUTF8 { u in
            var end = (u.firstIndex { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "=") }).map { $0 + 1 } ?? 0
            var kept = 0
            while end < u.count && kept < 6 {
                end += 1
                while end < u.count && u[end] & 0xC0 == 0x80 { end += 1 }
                kept += 1
            }
            return String(decoding: UnsafeBufferPointer(rebasing: u[..<end]), as: UTF8.self) + (end < u.count ? "…" : "")
        }
    }

    /// The headers of `r` that `headerNames` lists, in that order, in one pass over the request's
    /// fields (a repeated field is joined with ", ", as `HTTPRequest.header` does).
    public static func headers(_ r: HTTPRequest) -> String {
        // Every send keeps these: one pass over the fields, names compared as bytes, nothing
        // built for the fields not kept.
        var found: [(Int, String)] = []
        found.reserveCapacity(headerNames.count)
        for h in r.headers {
            guard let i = headerIndex(h.name) else { continue }
            if let j = found.firstIndex(where: { $0.0 == i }) {
                found[j].1 += ", " + h.value
            } else {
                found.append((i, h.value))
            }
        }
        if found.isEmpty { return "" }
        found.sort { $0.0 < $1.0 }
        // Written as bytes, one string at the end.
        var out: [UInt8] = []
        out.reserveCapacity(256)
        for (i, value) in found {
            out.append(contentsOf: headerBytes[i])
            out.append(9)
            if i == 1 {
                appendClean(mask(value), into: &out)
            } else if value.utf8.count > 256 {
                appendClean(String(value.prefix(256)), into: &out)
            } else {
                appendClean(value, into: &out)
            }
            out.append(10)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An HTTP answer in the stored form.
    public static func answer(_ response: HTTPResponse) -> String {
        var type: String?
        for (name, value) in response.headers where name.utf8.count == 12 && hasPrefixIgnoringCase(name.utf8, "content-type") {
            type = value
        }
        return answer(status: response.status, contentType: type, body: response.body)
    }
}

extension HTTPResponse: KeptAnswer {
    /// The answer in the stored form its record keeps.
    public var storedForm: String { RecordedExchange.answer(self) }
    public var answeredStatus: Int { status }
}

extension Engine {
    /// `answer`, kept first on the record (when one was made) with the request's `headers`: how
    /// the send routes answer a refused request.
    public func keeping(_ answer: HTTPResponse, record id: Int64?, headers: String?) -> HTTPResponse {
        keepAnswer(record: id, answer: RecordedExchange.answer(answer), headers: headers)
        return answer
    }

    /// A refused request recorded, with `answer` and the request's `headers` kept on its record:
    /// the answer, for the room to send. A refusal the store cannot record is answered all the
    /// same; one answered with no status (a dropped connection) keeps no answer.
    public func refused(_ r: RejectedRequest, answer: HTTPResponse, headers: String?) -> HTTPResponse {
        let id = try? recordRejected(r)
        return r.answeredStatus == 0 ? answer : keeping(answer, record: id, headers: headers)
    }
}
