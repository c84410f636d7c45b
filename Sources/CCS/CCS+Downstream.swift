import RoomKit
import Platform
import FCMEngine
import FCMModel
import Dispatch
import FCMCore
import FCMStore
import Synchronization
public import XMPPServer

#if canImport(Glibc)
    import Glibc
#endif

// What arrives on a CCS connection (downstream messages, acks and nacks of what the server sent)
// and how it is answered.
extension CCS {
    /// How CCS's records name what the engine refuses: nack codes, with no HTTP status.
    static let refusalNames = RefusalNames(fault: { f in
        if case .drop = f { return (RequestFault.closedConnection, f.detail) }
        return ("SERVICE_UNAVAILABLE", "fault \(f.fault)")
    }, refusal: { _ in "INVALID_JSON" }, refusedStatus: nil)

    /// A message stanza from the app server: an ack or nack of what the server sent
    /// (`acknowledged`), or a downstream message (`downstream`). A stanza that is no CCS message
    /// is echoed as an error.
    public func received(_ message: XMLElement, on c: XMPPConnection) {
        guard let sender = c.account else { return }
        guard let gcm = message.child("gcm") else {
            stanzaLog("in", c, [("stanza", "message"), ("ignored", "no gcm element")])
            return
        }
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
        if let type = o["message_type"]?.stringValue, type == "ack" || type == "nack" {
            return acknowledged(o, type: type, messageID: messageID, on: c)
        }
        downstream(o, value, text: gcm.text, messageID: messageID, from: sender, on: c)
    }

    /// The app server's ack or nack of an upstream message or a receipt. An upstream message's
    /// ack names the device that sent it in `to` (seeds Table 6); a wrong or missing one is a
    /// `BAD_ACK` and the message still waits for its ack.
    private func acknowledged(_ o: JSONObject, type: String, messageID: String, on c: XMPPConnection) {
        // No answer goes back, so the stanza is logged here; a downstream message is logged
        // once, with its ack or nack, in `reply`.
        stanzaLog("in", c, [("message_type", type), ("message_id", messageID)])
        let to = o["to"]?.stringValue
        let taken = links.withLock { ls -> (Outbound?, String?) in
            guard let known = ls[c.id]?.outstanding[messageID] else {
                return (nil, "no upstream message or receipt with this message_id is waiting for an ack")
            }
            if case .upstream(_, let token) = known, to != token {
                return (nil, to == nil ? "the ack of an upstream message needs to: the registration token of the device that sent it"
                    : "to is not the registration token of the device that sent this upstream message")
            }
            ls[c.id]?.outstanding[messageID] = nil
            return (known, nil)
        }
        guard let known = taken.0 else {
            reply(c, ["message_type": .string("nack"), "from": .optionalString(to), "message_id": .string(messageID),
                      "error": .string("BAD_ACK"), "error_description": .string(taken.1 ?? "")])
            return
        }
        if case .upstream(let id, _) = known { engine.upstreamAcked(id, nacked: type == "nack") }
        finishDrainIfIdle(c)
    }

    /// Whether connection `c` takes one more downstream message: flow control and draining.
    private enum Slot { case taken, draining, windowFull, noLink }

    private func takeSlot(_ c: XMPPConnection) -> Slot {
        links.withLock { ls -> Slot in
            guard var l = ls[c.id] else { return .noLink }
            if l.draining { return .draining }
            if l.inFlight >= Self.window { return .windowFull }
            l.inFlight += 1
            l.unanswered += 1
            ls[c.id] = l
            return .taken
        }
    }

    /// A downstream message: a slot in the connection's window, then the engine's admission
    /// (faults, the parser's refusals), then the send, answered with an ack or nack once its rows
    /// are committed (`answer`). A refused message is nacked, never silently dropped.
    private func downstream(_ o: JSONObject, _ value: JSONValue, text: String, messageID: String, from sender: String,
                            on c: XMPPConnection) {
        // Every nack names the message's `to` when it has one (seeds: `from` is required).
        let to = o["to"]?.stringValue
        switch takeSlot(c) {
        case .taken:
            break
        case .noLink:
            // Refused at opening (over the per-sender limit) and closing: what it sent
            // meanwhile is not taken.
            return
        case .draining:
            return refuse(c, messageID, raw: text, from: to, code: "CONNECTION_DRAINING",
                          description: "the connection is draining: open another")
        case .windowFull:
            return refuse(c, messageID, raw: text, from: to, code: "SERVICE_UNAVAILABLE",
                          description: "more than \(Self.window) messages waiting for an ack on this connection")
        }
        var settled = false
        defer {
            if !settled {
                release(c)
                answered(c)
            }
        }
        if o["registration_ids"] != nil {
            return refuse(c, messageID, raw: text, from: to, code: "INVALID_JSON", description: "registration_ids is not supported over XMPP: use to")
        }
        let outcome = SendParser.parseJSON(value, extraFields: ["message_id", "delivery_receipt_requested", "message_type"])
        let receipt = o["delivery_receipt_requested"]
        var context = AdmissionContext(transport: .xmpp, path: "", format: .json, names: Self.refusalNames, raw: { text },
                                       clientMessageID: messageID) { _ in
            receipt.map { $0.boolValue == nil } == true ? "delivery_receipt_requested must be true or false" : nil
        }
        // A refused stanza's record keeps 4 KiB of it, and the nack goes out whatever the store says.
        context.rawLimit = 4096
        context.recordIsBestEffort = true
        var recordID: Int64?
        context.recorded = { recordID = $0 }
        // An XMPP admission never fails on the store (its record is best effort).
        guard let admission = try? engine.admit(outcome, senderID: sender, context) else { return }
        let refusedID = recordID
        let req: SendRequest, delay: DelayFault?
        switch admission {
        case .refused(let refusal, _):
            // The message's `to` names it, or, for a request that parsed, its target.
            var from = to
            if case .invalidForTransport = refusal, case .request(let r) = outcome { from = r.target.value }
            return nack(c, messageID, from: from, code: "INVALID_JSON", description: refusal.detail, keeping: refusedID)
        case .faulted(.status(_, _, let fault)):
            return nack(c, messageID, from: targetValue(outcome), code: "SERVICE_UNAVAILABLE", description: "fault \(fault)", keeping: refusedID)
        case .faulted:
            return c.drop()
        case .proceed(let r, _, let d):
            (req, delay) = (r, d)
        }
        settled = true
        var submission = Submission(req, sender: sender, transport: .xmpp, faultKey: "")
        submission.firedFault = delay?.fault
        submission.clientMessageID = messageID
        let sent = Sent(connection: c, messageID: messageID, sender: sender, request: req, wantsReceipt: receipt?.boolValue ?? false)
        let delayMs = delay?.ms ?? 0
        engine.submit(submission) { [self] result in
            let answer = answer(result, to: sent)
            // The window opens before the answer leaves: a client that sends its next message
            // the moment it reads this ack must find room for it.
            if delayMs > 0 {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(delayMs))) {
                    self.release(c)
                    answer()
                    self.answered(c)
                }
            } else {
                release(c)
                answer()
                answered(c)
            }
        }
    }

    /// A downstream message the engine took, as its answer needs it.
    private struct Sent: Sendable {
        let connection: XMPPConnection
        let messageID: String
        let sender: String
        let request: SendRequest
        let wantsReceipt: Bool
        var target: String? { request.target.value }
    }

    /// The ack or nack of a committed send (and its delivery receipt, when asked for and the
    /// device has it): made now, sent by the caller once the window is open again.
    private func answer(_ result: Result<SendResult, StoreError>, to sent: Sent) -> @Sendable () -> Void {
        let (c, messageID, target) = (sent.connection, sent.messageID, sent.target)
        let sentID = (try? result.get())?.topicMessageID
        let r: SendResult
        switch result {
        case .failure:
            return { self.nack(c, messageID, from: target, code: "INTERNAL_SERVER_ERROR", description: "the store failed", keeping: sentID) }
        case .success(let s):
            r = s
        }
        if let e = r.topicError {
            return { self.nack(c, messageID, from: target, code: e.xmppCode, description: e.rawValue, keeping: sentID) }
        }
        if r.group != nil || r.results.isEmpty {
            return { self.reply(c, ["message_type": .string("ack"), "from": .optionalString(target), "message_id": .string(messageID)], keeping: sentID) }
        }
        let first = r.results[0]
        if let e = first.error {
            let code = e == .missingRegistration ? "INVALID_JSON" : e.xmppCode
            return { self.nack(c, messageID, from: target, code: code, description: e.rawValue, keeping: sentID) }
        }
        var fields: [(String, JSONValue)] = [("message_type", .string("ack")), ("from", .optionalString(target)),
                                             ("message_id", .string(messageID))]
        if let canonical = first.canonicalToken { fields.append(("registration_id", .string(canonical))) }
        let ack = fields
        let receipt = receipt(for: first, of: sent)
        return {
            self.reply(c, ack, keeping: sentID)
            if let receipt { self.sendReceipt(receipt, sender: sent.sender) }
        }
    }

    /// The delivery receipt of a message that asked for one: now when its device got it, later
    /// (`awaitingDelivery`) when it holds it or a real client has yet to acknowledge it; none for
    /// a dry run or a message that reached no device.
    private func receipt(for first: RecipientResult, of sent: Sent) -> Receipt? {
        guard sent.wantsReceipt, let token = first.deliveredTo, let deliveryID = first.deliveryID, !sent.request.options.dryRun
        else { return nil }
        let category = (try? engine.device(token).app) ?? "unknown.app"
        if first.deliveryStatus == "delivered" {
            return Self.receipt(messageID: sent.messageID, token: token, category: category, at: engine.clock.nowMillis())
        }
        // Held by an offline device, or written to a real client that has not acknowledged it yet.
        if first.deliveryStatus == "pending" || first.deliveryStatus == "sent" {
            let later = PendingReceipt(sender: sent.sender, messageID: sent.messageID, token: token, category: category)
            awaitingDelivery.withLock { $0[deliveryID] = later }
            pruneAwaitedIfDue()
        }
        return nil
    }

    /// One downstream message of `c` is about to be answered: its slot in the window opens.
    func release(_ c: XMPPConnection) {
        links.withLock { ls in
            if var l = ls[c.id] {
                l.inFlight = max(0, l.inFlight - 1)
                ls[c.id] = l
            }
        }
    }

    /// One downstream message of `c` has been answered: a draining or ended connection may close.
    func answered(_ c: XMPPConnection) {
        let idle = links.withLock { ls -> Bool in
            guard var l = ls[c.id] else { return false }
            l.unanswered = max(0, l.unanswered - 1)
            ls[c.id] = l
            return Self.closable(l)
        }
        if idle { c.close() }
    }

    /// The target a parsed message names (a nack's `from`).
    func targetValue(_ outcome: SendParseOutcome) -> String? {
        if case .request(let r) = outcome { return r.target.value }
        return nil
    }

    /// A downstream message refused by the connection itself (draining, a full window, a field
    /// XMPP does not take) before `Engine.admit` saw it: kept as a rejected record, as every
    /// refusal is, then nacked.
    func refuse(_ c: XMPPConnection, _ messageID: String, raw: String, from: String?, code: String, description: String) {
        let id = try? engine.recordRejected(RejectedRequest(senderID: c.account, transport: .xmpp, answeredStatus: 0, error: code,
                                                            detail: description, raw: String(raw.prefix(4096)), clientMessageID: messageID))
        nack(c, messageID, from: from, code: code, description: description, keeping: id)
    }


    /// A nack; see `reply` for `keeping`.
    func nack(_ c: XMPPConnection, _ messageID: String, from: String?, code: String, description: String, keeping recordID: Int64?) {
        reply(c, [("message_type", .string("nack")), ("from", .optionalString(from)), ("message_id", .string(messageID)),
                  ("error", .string(code)), ("error_description", .string(description))], keeping: recordID)
    }

    func reply(_ c: XMPPConnection, _ fields: KeyValuePairs<String, JSONValue>, keeping recordID: Int64? = nil) {
        reply(c, fields.map { ($0.key, $0.value) }, keeping: recordID)
    }

    /// `<message><data:gcm xmlns:data="google:mobile:data">{…}</data:gcm></message>`, without the
    /// fields that are null. An ack or nack is kept on its record (`keeping`) before it leaves,
    /// so a client that reads it and then asks the control API finds it there.
    func reply(_ c: XMPPConnection, _ fields: [(String, JSONValue)], keeping recordID: Int64? = nil) {
        let json = JSONValue.object(JSONObject(fields.filter { !$0.1.isNull })).serialized()
        if let recordID {
            engine.keepAnswer(record: recordID, answer: RecordedExchange.answer(status: nil, contentType: "xmpp", body: Array(json.utf8)),
                              headers: nil)
        }
        stanzaLog("in", c, Self.answerLog(fields))
        c.send("<message><data:gcm xmlns:data=\"\(Self.namespace)\">\(xmlEscapeText(json))</data:gcm></message>")
    }

    /// The log fields of a downstream message answered with `fields` (an ack, a nack, or a
    /// control message).
    private static func answerLog(_ fields: [(String, JSONValue)]) -> [(String, String)] {
        func field(_ k: String) -> String? { fields.first { $0.0 == k }?.1.stringValue }
        let type = field("message_type") ?? "-"
        guard type == "ack" || type == "nack" else { return [("message_type", type), ("control_type", field("control_type") ?? "-")] }
        var out = [("message_type", "downstream"), ("message_id", field("message_id") ?? "-"), ("to", field("from") ?? "-"), ("result", type)]
        if let e = field("error") { out.append(("error", e)) }
        return out
    }

    /// A stanza that cannot be answered by message id: echoed with `type="error"`.
    func errorEcho(_ message: XMLElement, _ c: XMPPConnection, _ text: String) {
        var echo = message
        echo.attributes["type"] = "error"
        echo.children.append(XMLElement(name: "error", attributes: ["code": "400", "type": "modify"], children: [
            XMLElement(name: "bad-request", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"]),
            XMLElement(name: "text", attributes: ["xmlns": "urn:ietf:params:xml:ns:xmpp-stanzas"], text: text),
        ]))
        stanzaLog("out", c, [("stanza", "message"), ("type", "error"), ("text", text)])
        c.send(echo.xml)
    }
}
