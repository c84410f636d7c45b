import FCMModel
import FCMCore

/// The faults in force, with their countdowns. Part of the engine's state.
struct FaultTable: Sendable {
    var faults: [Fault] = []
    var nextID = 1
    /// The ids of faults whose `times` ran out, until a reset: deleting one of them is not an
    /// error (a test's clean-up deletes what it made, used or not).
    var spent: Set<String> = []

    /// The first request-level fault (status, delay, close) matching this request, fired.
    mutating func fireRequestFault(transport: Transport, path: String, senderID: String?, tokens: [String], topic: String?) -> Fault? {
        for i in faults.indices {
            let f = faults[i]
            switch f.action {
            case .error: continue
            default: break
            }
            guard f.matches(transport: transport, path: path, senderID: senderID, topic: topic) else { continue }
            if let t = f.token, !tokens.contains(t) { continue }
            return fire(i)
        }
        return nil
    }

    /// The first fault on the writes to a real client (`when.transport` naming the client's
    /// protocol exactly; `any` is for senders' requests) matching this device, fired.
    mutating func fireClientFault(transport: Transport, senderID: String, token: String) -> Fault? {
        for i in faults.indices where faults[i].transport == transport.rawValue {
            let f = faults[i]
            if let s = f.senderID, s != senderID { continue }
            if let t = f.token, t != token { continue }
            return fire(i)
        }
        return nil
    }

    /// The first error fault matching this recipient, fired.
    mutating func fireRecipientFault(transport: Transport, path: String, senderID: String, token: String, topic: String?) -> Fault? {
        for i in faults.indices {
            guard case .error = faults[i].action else { continue }
            let f = faults[i]
            guard f.matches(transport: transport, path: path, senderID: senderID, topic: topic) else { continue }
            if let t = f.token, t != token { continue }
            return fire(i)
        }
        return nil
    }

    mutating func fire(_ i: Int) -> Fault {
        faults[i].fired += 1
        let f = faults[i]
        if let r = faults[i].remaining {
            if r <= 1 {
                faults.remove(at: i)
                spent.insert(f.id)
            } else {
                faults[i].remaining = r - 1
            }
        }
        return f
    }
}
