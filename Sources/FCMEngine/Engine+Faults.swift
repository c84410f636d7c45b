import Platform
import Synchronization
import FCMCore
import FCMStore

extension Engine {
    // MARK: Faults

    /// Adds a fault from the body of `POST /api/v1/faults`.
    public func addFault(_ body: Body) throws(EngineError) -> Fault {
        let now = clock.nowMillis()
        return try state.withLock { (s: inout EngineState) throws(EngineError) -> Fault in
            let f = try Fault.parse(body, id: "f\(s.faults.nextID)", now: now)
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
                return true
            }
            let before = s.faults.faults.count
            s.faults.faults.removeAll { $0.id == id }
            return s.faults.faults.count < before
        }
        if !found { throw .notFound("fault '\(id ?? "")' does not exist") }
    }

    /// The first request-level fault (status, delay, close) that matches, counted as fired.
    public func fireRequestFault(transport: Transport, path: String, senderID: String?, tokens: [String], topic: String?) -> Fault? {
        guard mayHaveFaults else { return nil }
        return state.withLock { $0.faults.fireRequestFault(transport: transport, path: path, senderID: senderID, tokens: tokens, topic: topic) }
    }
}
