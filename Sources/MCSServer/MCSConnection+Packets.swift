// What a connection does with each client packet (on its loop thread): the login, heartbeats,
// acknowledgements, and the packets that end it.

import Protobuf
import Synchronization

extension MCSConnection {
    /// Decodes a client packet; nil (and the connection closed, nothing written) when it does not
    /// parse or lacks a required field.
    private func decode<M: MCSProtoMessage>(_ payload: [UInt8], as: M.Type) -> M? {
        do {
            return try M(decoding: payload)
        } catch {
            close(sendingClose: false, reason: "\(M.self) does not parse: \(error)")
            return nil
        }
    }

    /// Counts a client packet; with `heartbeatAt`, it was a heartbeat at that time, and with
    /// `answer`, a HeartbeatAck is queued for it.
    private func countClientPacket(heartbeatAt now: Int64? = nil, answer: Bool = false) {
        let maxUnsent = loop.limits.maxUnsentBytes
        let wake = shared.withLock { s -> Bool in
            s.clientCount += 1
            if let now { s.heartbeatAt = now }
            guard answer, s.closing == nil else { return false }
            s.enqueue(HeartbeatAck(lastStreamIDReceived: Int32(clamping: s.clientCount)), maxUnsent: maxUnsent)
            return s.schedule()
        }
        if wake { loop.wake(self) }
    }

    /// Handles one client packet; false when the connection ends.
    func handle(_ tag: MCSTag, _ payload: [UInt8]) -> Bool {
        let delegate = loop.delegate
        guard loggedInOnLoop else { return handleLogin(tag, payload) }
        switch tag {
        case .heartbeatPing:
            guard let ping = decode(payload, as: HeartbeatPing.self) else { return false }
            countClientPacket(heartbeatAt: delegate.nowMillis(), answer: true)
            acknowledge(ping.lastStreamIDReceived, tag)
            delegate.heartbeat(on: self)
            return true
        case .heartbeatAck:
            guard let ack = decode(payload, as: HeartbeatAck.self) else { return false }
            countClientPacket(heartbeatAt: delegate.nowMillis())
            acknowledge(ack.lastStreamIDReceived, tag)
            delegate.heartbeat(on: self)
            return true
        case .iqStanza:
            guard let iq = decode(payload, as: IqStanza.self) else { return false }
            var selective: [String]?
            if let ext = iq.extension, ext.id == Extension.selectiveAck {
                guard let s = decode(ext.data, as: SelectiveAck.self) else { return false }
                selective = s.ids
            }
            countClientPacket()
            acknowledge(iq.lastStreamIDReceived, tag, ext: iq.extension?.id)
            if let selective {
                // firebase-messaging acknowledges by persistent id: it has what it names.
                nudgeDue = nil
                delegate.selectiveAck(ids: selective, on: self)
            }
            return true
        case .dataMessageStanza:
            guard let d = decode(payload, as: DataMessageStanza.self) else { return false }
            countClientPacket()
            acknowledge(d.lastStreamIDReceived, tag)
            return true  // upstream messages are read and ignored
        case .close:
            guard decode(payload, as: Close.self) != nil else { return false }
            close(sendingClose: false, reason: "the client sent Close")
            return false
        case .streamErrorStanza:
            guard let e = decode(payload, as: StreamErrorStanza.self) else { return false }
            close(sendingClose: false, reason: "the client's stream error: \(e.type)\(e.text.map { " \($0)" } ?? "")")
            return false
        case .loginRequest:
            close(sendingClose: false, reason: "a second LoginRequest")
            return false
        case .loginResponse:
            close(sendingClose: false, reason: "a LoginResponse from the client")
            return false
        }
    }

    /// The first packet: a LoginRequest, judged by the delegate.
    private func handleLogin(_ tag: MCSTag, _ payload: [UInt8]) -> Bool {
        let delegate = loop.delegate
        let maxUnsent = loop.limits.maxUnsentBytes
        guard tag == .loginRequest else {
            close(sendingClose: false, reason: "the first packet is \(tag), not a LoginRequest")
            return false
        }
        guard let request = decode(payload, as: LoginRequest.self) else { return false }
        shared.withLock { $0.clientCount = 1 }
        switch delegate.login(request, on: self) {
        case .accept:
            let now = delegate.nowMillis()
            let wake = shared.withLock { s -> Bool? in
                guard s.closing == nil else { return nil }
                s.request = request
                s.phase = .loggedIn
                s.enqueue(LoginResponse(id: request.id, lastStreamIDReceived: Int32(clamping: s.clientCount), serverTimestamp: now),
                          maxUnsent: maxUnsent)
                return s.schedule()
            }
            guard let wake else { return false }
            loggedInOnLoop = true
            loop.due(lastReadNanos &+ loop.limits.idleTimeout.nanos)  // may come before the login's
            if wake { loop.wake(self) }
            delegate.loggedIn(self)
            return true
        case .refuse(let code, let message):
            let now = delegate.nowMillis()
            let wake = shared.withLock { s -> Bool in
                guard s.closing == nil else { return false }
                s.request = request  // so the close's log line names the android id
                s.enqueue(LoginResponse(id: request.id, error: ErrorInfo(code: Int32(clamping: code), message: message),
                                        lastStreamIDReceived: Int32(clamping: s.clientCount), serverTimestamp: now), maxUnsent: maxUnsent)
                s.enqueue(Close(), maxUnsent: maxUnsent)
                s.closeReason = "login refused: \(code) \(message)"
                if s.closing == nil { s.closing = .orderly }
                return s.schedule()
            }
            if wake { loop.wake(self) }
            return false
        }
    }

    private func acknowledge(_ n: Int32?, _ tag: MCSTag, ext: Int32? = nil) {
        guard let n, n > 0 else { return }
        // A client cannot have packets the server has not made yet: a count past them (a client
        // that kept its counter from an earlier connection) is no count of this connection's
        // packets, and acknowledges nothing.
        let through = Int(n)
        guard through <= shared.withLock({ $0.serverCount }) else { return }
        if through >= nudgePacket { nudgeDue = nil }
        loop.delegate.acknowledged(throughServerPacket: through, carriedBy: tag, ext: ext, on: self)
    }
}
