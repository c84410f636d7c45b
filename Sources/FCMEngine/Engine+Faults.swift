public import FCMModel
import Platform
import Synchronization
import FCMCore
import FCMStore

extension Engine {
    // MARK: Faults

    /// The errors of their own the rooms gave, which a fault may answer with (the control room
    /// checks a fault's `then.error` against them).
    package var faultErrors: [FaultErrors] { rooms.faultErrors }

    /// Adds fault `fault` as the control room read it, giving it its id and time.
    public func addFault(_ fault: Fault) -> Fault {
        let now = clock.nowMillis()
        return state.withLock { s in
            var f = fault
            f.id = "f\(s.faults.nextID)"
            f.createdAt = now
            s.faults.nextID += 1
            s.faults.faults.append(f)
            faultsArmed.store(true, ordering: .relaxed)
            return f
        }
    }

    /// False only when no fault is in force: the send path then skips the fault table (and its
    /// lock). Set under the state lock whenever the table gains or loses faults; a fault used up
    /// by firing may leave it true, which only costs a look at the empty table.
    var mayHaveFaults: Bool { faultsArmed.load(ordering: .relaxed) }

    /// The faults in force, oldest first.
    public func faults() -> [Fault] { state.withLock { $0.faults.faults } }

    /// Removes one fault, or all of them (`id` nil).
    public func deleteFault(_ id: String?) throws(EngineError) {
        let found = state.withLock { s -> Bool in
            defer { faultsArmed.store(!s.faults.faults.isEmpty, ordering: .relaxed) }
            guard let id else {
                s.faults.faults.removeAll()
                s.faults.spent.removeAll()
                return true
            }
            let before = s.faults.faults.count
            s.faults.faults.removeAll { $0.id == id }
            // A fault that fired its last time is gone from the list; deleting it succeeds.
            return s.faults.faults.count < before || s.faults.spent.remove(id) != nil
        }
        if !found { throw .notFound("fault '\(id ?? "")' does not exist") }
    }

    /// The first request-level fault (status, protocol error, delay, close) that matches a
    /// request, counted as fired, as the one outcome every room turns into its wire: `tokens`
    /// are the recipients a `when.token` may name, `topic` the topic a `when.topic` may.
    /// `tokens` and `topic` are worked out only while a fault is in force (every send asks).
    public func requestFault(transport: Transport, path: String, senderID: String?, tokens: @autoclosure () -> [String],
                             topic: @autoclosure () -> String?) -> RequestFault? {
        guard mayHaveFaults else { return nil }
        let (tokens, topic) = (tokens(), topic())
        let f = state.withLock { $0.faults.fireRequestFault(transport: transport, path: path, senderID: senderID, tokens: tokens, topic: topic) }
        return f.flatMap(RequestFault.init)
    }
}

extension Engine {
    /// The first fault naming device-side surface `path` (`when.path`: its pattern, as `/checkin`
    /// or `/v1/projects/*/installations`, or one of `named`, the surface with this call's project
    /// in place of `*`, by its id or its sender id), which no fault without a path reaches (a
    /// test's faults on sends leave the clients' registrations alone), for HTTP or any transport
    /// (these surfaces are HTTP), fired. Its `when.sender_id` must be the call's `senderID`
    /// (register3's `sender`, the project's of an Installations or registrations call; a checkin
    /// names none); a `when.token` or `when.topic` names nothing these calls have. Any
    /// request-wide action: a status, an error of the surface (register3's), a delay, a dropped
    /// connection. `named` and `senderID` are worked out only while a fault is in force.
    public func surfaceFault(path: String, named: @autoclosure () -> [String] = [], senderID: @autoclosure () -> String?) -> RequestFault? {
        guard mayHaveFaults else { return nil }
        let sender = senderID()
        return faultNaming(path, or: named()) { f in
            guard f.names(transport: .http), f.token == nil, f.topic == nil else { return false }
            if let want = f.senderID, want != sender { return false }
            if case .error = f.action { return false }
            return true
        }
    }

    /// The first fault naming app-server path `path` exactly (`when.path`: `/fcm/notification`, an
    /// Instance ID path), for legacy HTTP or any transport, matching `senderID`, whose action
    /// answers the whole request (a status, a delay, a dropped connection), fired. Only a fault
    /// that names the path reaches these calls: faults on sends leave group and topic management
    /// alone.
    public func pathFault(path: String, senderID: String) -> RequestFault? {
        faultNaming(path) { f in
            guard f.matches(transport: .http, path: path, senderID: senderID, topic: nil) else { return false }
            switch f.action {
            case .status, .delay, .closeConnection: return true
            default: return false
            }
        }
    }

    /// The first fault whose `when.path` is `path` itself (or one of `others`) and that `applies` takes, fired.
    private func faultNaming(_ path: String, or others: [String] = [], _ applies: (Fault) -> Bool) -> RequestFault? {
        guard mayHaveFaults else { return nil }
        let f = state.withLock { s -> Fault? in
            guard let i = s.faults.faults.firstIndex(where: { f in
                f.path.map { $0 == path || others.contains($0) } == true && applies(f)
            }) else { return nil }
            return s.faults.fire(i)
        }
        return f.flatMap(RequestFault.init)
    }
}

extension RequestFault {
    init?(_ f: Fault) {
        switch f.action {
        case .status(let code, let retry): self = .status(code, retryAfter: retry, fault: f.id)
        case .protocolError(let name): self = .protocolError(name, fault: f.id)
        case .closeConnection: self = .drop(fault: f.id)
        case .delay(let ms): self = .delay(ms: ms, fault: f.id)
        // Recipient errors fire in the send path, one recipient at a time.
        case .error: return nil
        }
    }
}
