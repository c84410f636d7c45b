import Dispatch
import Platform
import FCMCore
import FCMModel
import FCMStore

// A failed commit leaves no trace (docs/architecture.md, "When a commit fails").
//
// Every change is decided under the state lock, applied to memory and queued for the store in
// the same critical section, and answered only once committed. When a commit fails (a full disk,
// a read-only file, or one write refused by a constraint), memory already holds that change and
// every change decided after it. The store stops at the failed write and calls `recover(after:)`
// on the committing thread before it commits anything else: the tickets still queued fail with the
// same error (their rooms answer that the store failed, as for the failed one), and memory is
// read back from the store, keeping what lives only in memory.
//
// Deadlocks: recovery runs on the committing thread (the writer, or a sender or waiter that
// commits what is queued), which holds no lock then; nobody holding the state lock waits for a
// commit (commits are always waited for outside it, and completions already take it).
// It reads the store *before* taking the state lock, because readers take the state lock while
// holding the connection (`tokens(for:)` inside a query): the store cannot change meanwhile,
// since only the writer commits and it is here. Completions of the failed tickets run after the
// lock is released, so a caller that retries at once sees the state without its change.
//
// A write refused for its own reason (a constraint: memory thought it valid, the store did not)
// is handled the same way: the tickets after it fail, memory reads back what the store holds,
// but the store's health stays ok (only a failure of the storage starts a failing spell).
//
// The listeners need nothing: the XMPP listener makes receipts and waits for deliveries only
// for sends whose commit succeeded, and tells the engine of deliveries only after theirs did;
// the one thing it holds that the store does not say is which connection has an upstream
// message, kept below. A failed reset is the exception to "no trace": what it cleared that
// lives only in memory (faults, rate windows, access tokens, the clock, the XMPP history) stays
// cleared.
extension Engine {
    /// Makes the store call `recover(after:)` when a write fails.
    func recoverAfterFailedWrites() {
        store.onWriteFailure { [weak self] error, failQueued in
            self?.recover(after: error, failQueued: failQueued)
        }
    }

    /// Brings memory back to what the store holds after a failed write: under the state lock,
    /// fails every ticket still queued (all decided on the state that included the failed change)
    /// and replaces the store's part of the state with what was just read back. Should the read
    /// fail too, memory stays as it is (the queued tickets fail all the same).
    func recover(after error: StoreError, failQueued: () -> Void) {
        let loaded = try? EngineState.load(from: store, rooms: rooms)
        let kept: [String] = state.withLock { s in
            failQueued()
            guard let loaded else { return [] }
            let before = s
            s = s.recovered(from: loaded.state, maxMid: loaded.maxMid)
            let kept = s.keepingConnections(of: before)
            publishCredentials(s)
            return kept
        }
        notifyChanged()
        // What the kept connections' devices hold again goes out once this commit is over (on
        // another thread: this one commits). A retry after a quarter second: should the store
        // still fail, the next recovery tries again, not a busy loop.
        if !kept.isEmpty {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(250)) { [weak self] in self?.resumeClients(kept) }
        }
    }

    /// Writes what the devices of clients `ids` hold, on their connections, up to each one's
    /// room: after a recovery, which held again what the store had not recorded as written.
    func resumeClients(_ ids: [String]) {
        for id in ids {
            let now = clock.nowMillis()
            var published: [(String, String)] = []
            var orders = ClientOrders()
            let ticket: Store.Ticket? = state.withLock { s in
                var updates: [ClientDeliveryUpdate] = []
                var changes: [(Int64, String)] = []
                let fired = flushHeld(of: id, now: now, orders: &orders, updates: &updates, changes: &changes, events: &published, state: &s)
                let writes = clientDeliveryWrites(changes: changes, updates: updates, fired: fired, at: now)
                return writes.isEmpty ? nil : submit(writes)
            }
            if let ticket {
                // A write that cannot be recorded is not made (the store's recovery takes it from here).
                do throws(EngineError) { try commitControl(ticket) } catch { return }
            }
            events.publish(published)
            dispatch(orders)
        }
    }
}

extension EngineState {
    /// `loaded`, what the store holds, with what lives only in memory taken from this state:
    ///
    /// - the Web Push endpoint base and push counts (memory only);
    /// - the faults, the rate-limit windows, the message-id allocator (ids stay increasing: one a
    ///   failed send took is never reused), the fixture devices a reset puts back, and the next
    ///   device id (never lower than one already given);
    /// - what iOS devices show by APNs collapse id (kept in memory only), and installations'
    ///   earlier auth tokens;
    /// - the send counts: counted again from the store when next asked for (ids up to `maxMid`),
    ///   plus what is decided from now on, so a failed send is not counted;
    /// - an upstream message an XMPP connection holds (`sent`, with its connection): the store
    ///   reads it back as `queued` (at a start its connection is gone), but this connection is
    ///   alive, has it on the wire and waits for its ack. One the store never got is gone;
    ///
    /// Real clients' open connections are put back after (`keepingConnections`).
    ///
    /// Everything else (projects, devices, what offline devices hold, subscriptions, groups,
    /// upstream messages) is the store's. A state field added later is the store's unless it is
    /// named here.
    func recovered(from loaded: EngineState, maxMid: Int64) -> EngineState {
        var s = loaded
        s.faults = faults
        s.deviceWindows = deviceWindows
        s.topicWindows = topicWindows
        s.ids = ids
        s.fixtureDevices = fixtureDevices
        s.fixtureSpecCount = fixtureSpecCount
        s.screens = screens
        s.nextDeviceID = max(nextDeviceID, loaded.nextDeviceID)
        s.webPushBase = webPushBase
        s.webPushPath = webPushPath
        s.webPushOps = webPushOps
        s.takenSinceStart = takenSinceStart
        s.earlierAuth = earlierAuth
        s.undecryptableSinceStart = undecryptableSinceStart
        s.stats = SendStats(floor: maxMid)
        for (id, u) in upstream where u.status == "sent" && u.connectionID != nil {
            if let stored = s.upstream[id], stored.status == "queued" { s.upstream[id] = u }
        }
        return s
    }

    /// The store reads every real client as a start does: not connected, its devices offline,
    /// what was on a connection held again. Their connections are alive, though: each stays its
    /// client's, with its devices online or held as they were, and with what the store records as
    /// written on it and not acknowledged. A write the failed commit decided (or one that commit
    /// would have recorded, released by an acknowledgement) was never made: writes follow their
    /// commits. It is held again, and so is an acknowledged push whose record failed
    /// (`Engine.resumeClients` writes them).
    /// Returns the clients kept connected.
    mutating func keepingConnections(of before: EngineState) -> [String] {
        var kept: [String] = []
        for (id, was) in before.realClients {
            guard let conn = was.connection, var client = realClients[id] else { continue }
            var connection = conn
            connection.unacked = conn.unacked.filter { deliveryID in
                // The store's record of it: restored at the read (`ClientDelivery.restored`).
                guard let cd = clientDeliveries[deliveryID], cd.connectionID == conn.info.id, cd.sends > 0,
                      let deviceID = clientDeliveryDevice[deliveryID],
                      let i = stored[deviceID]?.firstIndex(where: { $0.deliveryID == deliveryID }) else { return false }
                stored[deviceID]?.remove(at: i)
                if stored[deviceID]?.isEmpty == true { stored[deviceID] = nil }
                clientPayloads[deliveryID] = before.clientPayloads[deliveryID]
                return true
            }
            kept.append(id)
            client.connection = connection
            realClients[id] = client
            for deviceID in carried(by: client) where devices[deviceID]?.state == .registered {
                devices[deviceID]?.online = before.devices[deviceID]?.online ?? false
            }
            // What it acknowledged lately, for a nack that may follow: those the store has
            // settled (one held again above keeps the store's record, without its ack).
            let settled = (before.acknowledged[id] ?? []).filter { deliveryID in
                guard clientDeliveries[deliveryID] == nil, let cd = before.clientDeliveries[deliveryID],
                      let deviceID = before.clientDeliveryDevice[deliveryID] else { return false }
                clientDeliveries[deliveryID] = cd
                clientDeliveryDevice[deliveryID] = deviceID
                return true
            }
            if !settled.isEmpty { acknowledged[id] = settled }
        }
        closedAhead = before.closedAhead
        return kept
    }
}
