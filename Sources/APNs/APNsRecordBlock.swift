public import FCMModel
import RoomKit
import FCMCore
import FCMEngine

extension APNsRoutes {
    /// A body that is not a JSON object as the record's `apns` block keeps it, after its
    /// `payload`: `,"raw_body":"…"` when it is UTF-8 text, else `,"body_base64":"…"` (RFC 4648
    /// base64 with padding).
    static func asSent(_ body: [UInt8]) -> (member: [UInt8], isText: Bool) {
        var out = Array(",".utf8)
        if let text = String(validating: body, as: UTF8.self) {
            appendJSONString("raw_body", to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSONString(text, to: &out)
            return (out, true)
        }
        appendJSONString("body_base64", to: &out)
        out.append(UInt8(ascii: ":"))
        appendJSONString(base64(body), to: &out)
        return (out, false)
    }

    /// Standard base64 (`+`, `/`, `=` padding), from the project's base64url.
    static func base64(_ bytes: [UInt8]) -> String {
        var s = String(base64URLEncode(bytes).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while s.utf8.count % 4 != 0 { s += "=" }
        return s
    }

    /// What an APNs send's record keeps of its request, as the record's platform blocks:
    /// `{"apns":{"push_type":…,"topic":…,"priority":…,"expiration":…,"collapse_id":…,
    /// "environment":…,"key_id"|"certificate_id":…,"apns_id":…,"apns_unique_id":…,
    /// "payload":{…}}}`, Apple's defaults filled in (a body that is no JSON object: `"payload":null`
    /// and the body as it came, `raw_body` or `body_base64`: `asSent`); `expiration` is as given (null without one).
    /// The `headers` object the control API and the inbox show is not stored: it repeats these
    /// fields, and is put back from them when the record is read
    /// (`APNsRecordBlock.withHeaders`).
    ///
    /// Written straight into the string's storage, in this order, with no tree built and
    /// serialized, no array grown and no writer's call per key: every APNs send writes one
    /// (docs/performance.md "APNs"). The payload is the body's compact text (`APNsBody`), copied in.
    static func recordedBlock(headers: APNsHeaders, apnsID: String, uniqueID: String?, payload: [UInt8],
                              authorizedBy: (name: String, id: String), environment: APNsEnvironment,
                              asSent: [UInt8] = []) -> String {
        // The keys and punctuation (under 400 bytes), 20 for each of 5 numbers, each string at
        // most 6 bytes a byte escaped (twice for those written twice), and the payload.
        let strings = (headers.topic?.utf8.count ?? 0) + (headers.collapseID?.utf8.count ?? 0) + authorizedBy.name.utf8.count
            + authorizedBy.id.utf8.count + apnsID.utf8.count + (uniqueID?.utf8.count ?? 0)
        let bound = 400 + 5 * 20 + 12 * strings + 6 * 8 + payload.count + asSent.count
        // The ids are UUIDs (checked, or made here): hex digits and dashes, written as they are.
        return String(unsafeUninitializedCapacity: bound) { buffer in
            var out = BlockWriter(buffer)
            out.text(#"{"apns":{"push_type":""#); out.text(headers.pushType.rawValue); out.text(#"","topic":"#)
            out.string(headers.topic)
            out.text(#","priority":"#); out.number(Int64(headers.priority))
            out.text(#","expiration":"#)
            if let e = headers.expiration { out.number(e) } else { out.text("null") }
            out.text(#","collapse_id":"#); out.string(headers.collapseID)
            out.text(#","environment":""#); out.text(environment.rawValue)
            out.text(#"","#); out.string(authorizedBy.name); out.text(":"); out.string(authorizedBy.id)
            out.text(#","apns_id":""#); out.text(apnsID)
            if let uniqueID { out.text(#"","apns_unique_id":""#); out.text(uniqueID); out.text(#"""#) } else { out.text(#"","apns_unique_id":null"#) }
            out.text(#","payload":"#); out.bytes(payload)
            out.bytes(asSent)
            out.text("}}")
            return out.count
        }
    }
}

/// Writes into a buffer sized beforehand (`recordedBlock`'s bound): literal text, JSON strings
/// (copied whole when nothing in them needs escaping, as the ids and topics of real sends),
/// numbers. Every write is inlined: a block is some 30 of them.
private struct BlockWriter {
    let start: UnsafeMutablePointer<UInt8>
    let capacity: Int
    private(set) var count = 0

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        start = buffer.baseAddress!
        capacity = buffer.count
    }

    @inline(__always)
    mutating func text(_ s: StaticString) {
        raw(s.utf8Start, s.utf8CodeUnitCount)
    }

    @inline(__always)
    mutating func text(_ s: String) {
        if s.utf8.withContiguousStorageIfAvailable({ raw($0.baseAddress, $0.count) }) == nil { bytes(Array(s.utf8)) }
    }

    @inline(__always)
    mutating func bytes(_ b: [UInt8]) {
        b.withUnsafeBufferPointer { raw($0.baseAddress, $0.count) }
    }

    @inline(__always)
    private mutating func raw(_ p: UnsafePointer<UInt8>?, _ n: Int) {
        guard let p, n > 0 else { return }
        precondition(count + n <= capacity, "the APNs record block outgrew its bound")
        (start + count).update(from: p, count: n)
        count += n
    }

    @inline(__always)
    private mutating func byte(_ b: UInt8) {
        precondition(count < capacity, "the APNs record block outgrew its bound")
        start[count] = b
        count += 1
    }

    /// A JSON string, or `null`.
    mutating func string(_ s: String?) {
        guard let s else { return text("null") }
        let plain = s.utf8.withContiguousStorageIfAvailable { b -> Bool in
            for c in b where c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c == 0xEF { return false }
            byte(UInt8(ascii: "\""))
            raw(b.baseAddress, b.count)
            byte(UInt8(ascii: "\""))
            return true
        }
        if plain != true {
            var escaped: [UInt8] = []
            appendJSONString(s, to: &escaped)
            bytes(escaped)
        }
    }

    mutating func number(_ n: Int64) {
        // Digits from the last, into scratch bytes; at most 20 with the sign.
        var magnitude = n.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { d in
            var at = d.count
            repeat {
                at -= 1
                d[at] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if n < 0 {
                at -= 1
                d[at] = UInt8(ascii: "-")
            }
            raw(d.baseAddress! + at, d.count - at)
        }
    }
}

/// An APNs send's record block, written (`APNsRoutes.recordedBlock`, `asSent`) and read back
/// (`withHeaders`, `received`, which the engine calls through `RecordBlocks`) in this one file.
public enum APNsRecordBlock {
    /// The reader the assembly gives the engine for the `apns` block.
    public static let readers: [String: RecordBlocks.Reader] = ["apns": withHeaders]
    /// What an iPhone received of a send, by its `apns` block.
    public static let received: [String: RecordBlocks.Received] = ["apns": receivedBody]

    /// What an iPhone received of a send whose body was no JSON object (its block's `payload`
    /// null): no payload, and the body as it came (`raw_body` as text, else `body_base64`), not
    /// one made up from nothing.
    @Sendable static func receivedBody(_ block: JSONObject, _ shown: JSONObject) -> JSONObject {
        guard block["payload"]?.isNull == true else { return shown }
        var out = shown
        out["payload"] = .null
        for k in ["raw_body", "body_base64"] { if let v = block[k] { out[k] = v } }
        return out
    }

    /// An APNs send's stored `apns` block with its `headers` put back: the record keeps Apple's
    /// headers as the fields beside them (`push_type`, `priority`, `topic`, `expiration`,
    /// `collapse_id`, `apns_id`), not a second time as an object, which made every APNs record
    /// half as large again (docs/performance.md, "APNs"). Put back as they were written before:
    /// `apns-push-type`, `apns-priority`, `apns-topic` (when given), `apns-expiration` (as given,
    /// else the accept time plus APNs' default 30 days), `apns-collapse-id` (when given),
    /// `apns-id`, just before `payload`. A block that has `headers` (a v1 message's, or a record
    /// of an older store), or is no APNs send's (no `push_type`), is returned as it is.
    @Sendable static func withHeaders(_ block: JSONObject, acceptedAtMillis: Int64) -> JSONObject {
        guard block["headers"] == nil, let pushType = block["push_type"]?.stringValue else { return block }
        var headers: [(String, JSONValue)] = [("apns-push-type", .string(pushType))]
        if let p = block["priority"], case .number(let n) = p { headers.append(("apns-priority", .string(n.text))) }
        if let topic = block["topic"]?.stringValue { headers.append(("apns-topic", .string(topic))) }
        let expiration: String
        if case .number(let n)? = block["expiration"] {
            expiration = n.text
        } else {
            expiration = String(EffectivePayload.floorSeconds(acceptedAtMillis) + APNsHeaders.defaultTimeToLive)
        }
        headers.append(("apns-expiration", .string(expiration)))
        if let c = block["collapse_id"]?.stringValue { headers.append(("apns-collapse-id", .string(c))) }
        if let id = block["apns_id"]?.stringValue { headers.append(("apns-id", .string(id))) }
        var out: [(String, JSONValue)] = []
        for m in block.members {
            if m.key == "payload" { out.append(("headers", .object(JSONObject(headers)))) }
            out.append((m.key, m.value))
        }
        if block["payload"] == nil { out.append(("headers", .object(JSONObject(headers)))) }
        return JSONObject(out)
    }
}
