import Dispatch
import FCMCore
import XMPPServer

/// The FCM connection server (CCS) on top of the XMPP listener: app servers authenticate with a
/// sender id and server key, send downstream messages as JSON in `<gcm>` elements, and get acks
/// and nacks. Downstream messages go through the very same send path as HTTP.
final class CCS: XMPPDelegate {
    let engine: Engine
    static let namespace = "google:mobile:data"

    init(engine: Engine) { self.engine = engine }

    /// SASL PLAIN: `SENDER@fcm.googleapis.com`, `SENDER@gcm.googleapis.com` or the bare sender
    /// id, in the authzid or the authcid; the password is a server key of that sender.
    func authenticate(authzid: String, authcid: String, password: String) -> String? {
        func bare(_ s: String) -> String {
            for suffix in ["@fcm.googleapis.com", "@gcm.googleapis.com"] where s.hasSuffix(suffix) {
                return String(s.dropLast(suffix.count))
            }
            return s
        }
        let claimed = bare(authcid.isEmpty ? authzid : authcid)
        guard !claimed.isEmpty, !claimed.contains("@"), engine.senderID(forServerKey: password) == claimed else { return nil }
        if !authzid.isEmpty && bare(authzid) != claimed { return nil }
        return claimed
    }

    func opened(_ c: XMPPConnection) {
        engine.events.publish([("xmpp.connected", connectionJSON(c))])
    }

    func closed(_ c: XMPPConnection) {
        engine.events.publish([("xmpp.closed", connectionJSON(c))])
    }

    func received(_ message: XMLElement, on c: XMPPConnection) {
        guard let sender = c.account else { return }
        guard let gcm = message.child("gcm") else { return }
        let stanzaID = message.attributes["id"]
        let value: JSONValue
        do {
            value = try JSONParser.parse(gcm.text)
        } catch {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : \(error.message)")
        }
        guard let o = value.objectValue else {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : the payload is not a JSON object")
        }
        guard let messageID = o["message_id"]?.stringValue, !messageID.isEmpty else {
            return errorEcho(message, c, "InvalidJson: JSON_PARSING_ERROR : Missing Required Field: message_id")
        }
        _ = stanzaID
        if let type = o["message_type"]?.stringValue {
            // Acks and nacks from the app server answer upstream messages and receipts, which
            // this version does not send yet: every one names an id never sent.
            if type == "ack" || type == "nack" {
                return reply(c, ["message_type": .string("nack"), "message_id": .string(messageID), "error": .string("BAD_ACK"),
                                 "error_description": .string("no upstream message or receipt with this message_id is waiting for an ack")])
            }
        }
        if o["registration_ids"] != nil {
            return nack(c, messageID, from: nil, code: "INVALID_JSON", description: "registration_ids is not supported over XMPP: use to")
        }
        let outcome = SendParser.parseJSON(value, extraFields: ["message_id", "delivery_receipt_requested", "message_type"])
        let req: SendRequest
        switch outcome {
        case .badRequest(let reason):
            return nack(c, messageID, from: nil, code: "INVALID_JSON", description: reason)
        case .invalidParameters(let detail):
            return nack(c, messageID, from: nil, code: "INVALID_JSON", description: detail)
        case .request(let r):
            req = r
        }
        switch req.target {
        case .topic(let name) where !Topics.isValidName(name):
            return nack(c, messageID, from: nil, code: "INVALID_JSON", description: "Topic name format is invalid")
        case .condition(let text) where Condition.parse(text, maxOperators: engine.maxConditionOperators) == nil:
            return nack(c, messageID, from: nil, code: "INVALID_JSON", description: Condition.invalidMessage)
        default:
            break
        }
        let target = req.target.value
        var lateBy: Int64 = 0
        var delayFault: String?
        var topic: String?
        if case .topic(let t) = req.target { topic = t }
        if let f = engine.fireRequestFault(transport: .xmpp, path: "", senderID: sender, tokens: req.target.tokens, topic: topic) {
            switch f.action {
            case .status:
                return nack(c, messageID, from: target, code: "SERVICE_UNAVAILABLE", description: "fault \(f.id)")
            case .closeConnection:
                return c.close()
            case .delay(let ms):
                lateBy = ms
                delayFault = f.id
            case .error:
                break
            }
        }
        let delayMs = lateBy
        engine.send(req, senderID: sender, transport: .xmpp, path: "", requestFault: delayFault) { [self] result in
            let answer: @Sendable () -> Void
            switch result {
            case .failure:
                answer = { self.nack(c, messageID, from: target, code: "INTERNAL_SERVER_ERROR", description: "the store failed") }
            case .success(let r):
                if let e = r.topicError {
                    answer = { self.nack(c, messageID, from: target, code: e.xmppCode, description: e.rawValue) }
                } else if r.group != nil || r.results.isEmpty {
                    answer = { self.reply(c, ["message_type": .string("ack"), "from": .optionalString(target), "message_id": .string(messageID)]) }
                } else if let e = r.results[0].error {
                    let code = e == .missingRegistration ? "INVALID_JSON" : e.xmppCode
                    answer = { self.nack(c, messageID, from: target, code: code, description: e.rawValue) }
                } else {
                    var fields: [(String, JSONValue)] = [("message_type", .string("ack")), ("from", .optionalString(target)),
                                                         ("message_id", .string(messageID))]
                    if let canonical = r.results[0].canonicalToken { fields.append(("registration_id", .string(canonical))) }
                    let ack = fields
                    answer = { self.reply(c, ack) }
                }
            }
            if delayMs > 0 {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(delayMs))) { answer() }
            } else {
                answer()
            }
        }
    }

    private func nack(_ c: XMPPConnection, _ messageID: String, from: String?, code: String, description: String) {
        reply(c, [("message_type", .string("nack")), ("from", .optionalString(from)), ("message_id", .string(messageID)),
                  ("error", .string(code)), ("error_description", .string(description))])
    }

    private func reply(_ c: XMPPConnection, _ fields: KeyValuePairs<String, JSONValue>) {
        reply(c, fields.map { ($0.key, $0.value) })
    }

    /// `<message><data:gcm xmlns:data="google:mobile:data">{…}</data:gcm></message>`, without the
    /// fields that are null.
    private func reply(_ c: XMPPConnection, _ fields: [(String, JSONValue)]) {
        let json = JSONValue.object(JSONObject(fields.filter { !$0.1.isNull })).serialized()
        c.send("<message><data:gcm xmlns:data=\"\(Self.namespace)\">\(xmlEscape(json))</data:gcm></message>")
    }

    /// A stanza that cannot be answered by message id: echoed with `type="error"`.
    private func errorEcho(_ message: XMLElement, _ c: XMPPConnection, _ text: String) {
        var echo = message
        echo.attributes["type"] = "error"
        echo.children.append(XMLElement(name: "error", attributes: ["code": "400", "type": "modify"], children: [
            XMLElement(name: "bad-request", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"]),
            XMLElement(name: "text", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"], text: text),
        ]))
        c.send(echo.xml)
    }

    func connectionJSON(_ c: XMPPConnection) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.value(c.id)
        w.key("sender_id"); w.value(c.account)
        w.key("resource"); w.value(c.resource)
        w.key("connected_at"); w.value(rfc3339(millis: c.connectedAt / 1000))
        w.key("unacked"); w.value(0)
        w.key("draining"); w.value(false)
        w.key("tls"); w.value(false)
        w.endObject()
        return w.string
    }
}

extension JSONValue {
    /// `.string` for a value, `.null` for nil.
    static func optionalString(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
}
