public import FCMModel
import Platform
import FCMCore
import FCMStore

extension BatchOutcome {
    /// Why a token was not subscribed, in the mock's words (a fixture's error).
    var reason: String {
        switch self {
        case .ok: "subscribed"
        case .notFound: "no device has this token"
        case .invalidArgument: "the token or topic is malformed"
        case .tooManyTopics: "the device has as many topics as it may"
        }
    }
}

extension Engine {
    /// Subscribes or unsubscribes `tokens` to `topic` as the Instance ID API does, for `senderID`
    /// (tokens of another project are `NOT_FOUND`, as they were for a server key of another
    /// project). Results follow the input order.
    public func batch(_ tokens: [String], topic: String, subscribe: Bool, senderID: String?) throws(EngineError) -> [BatchOutcome] {
        let now = clock.nowMillis()
        let (outcomes, ticket, updated): ([BatchOutcome], Store.Ticket?, [Device]) = state.withLock { s in
            var outcomes: [BatchOutcome] = []
            var added: [(Int64, String)] = []
            var removed: [Int64] = []
            var updated: [Device] = []
            for token in tokens {
                guard isWellFormedToken(token) else { outcomes.append(.invalidArgument); continue }
                guard let d = s.device(token: token), d.state != .unregistered,
                    senderID == nil || d.senderID == senderID
                else { outcomes.append(.notFound); continue }
                // A browser's Web Push subscription is no FCM registration: no topics.
                guard !d.isWebPushSubscription else { outcomes.append(.invalidArgument); continue }
                if subscribe {
                    let had = s.deviceTopics[d.id]?[Topics.key(topic)] != nil
                    guard s.subscribe(device: d.id, topic: topic, at: now) else { outcomes.append(.tooManyTopics); continue }
                    if !had {
                        added.append((d.id, topic))
                        updated.append(d)
                    }
                } else if s.unsubscribe(device: d.id, topic: topic) {
                    removed.append(d.id)
                    updated.append(d)
                }
                outcomes.append(.ok)
            }
            guard !added.isEmpty || !removed.isEmpty else { return (outcomes, nil, []) }
            let (a, r) = (added, removed)
            return (outcomes, submit([Writes.subscriptions(add: a, at: now, remove: r, topic: topic)]), updated)
        }
        if let ticket {
            try commitControl(ticket)
            if events.hasReaders {
                events.publish(updated.compactMap { d in (try? self.device(d.token)).map { ("device.updated", renderDevice($0)) } })
            }
        }
        return outcomes
    }

    /// A v1 topic subscription change (`…/registrations/{token}/topicSubscriptions`,
    /// docs/spec/fcm-v1.md section 2b) for `senderID`, of a device named by token or fid: the
    /// same state and writes as the Instance ID API, with v1's distinctions (another project's
    /// token is SenderIdMismatch, not "not found"; unsubscribing a topic the device does not
    /// have is `.notSubscribed`).
    public func v1Subscription(_ tokenOrFID: String, topic: String, subscribe: Bool, senderID: String) throws(EngineError) -> V1SubscriptionOutcome {
        let now = clock.nowMillis()
        let (outcome, ticket, device): (V1SubscriptionOutcome, Store.Ticket?, Device?) = state.withLock { s in
            guard let found = s.device(token: tokenOrFID) ?? s.device(fid: tokenOrFID) else { return (.unregistered, nil, nil) }
            let d = s.current(found)
            guard d.state == .registered, !d.isWebPushSubscription else { return (.unregistered, nil, nil) }
            guard d.senderID == senderID else { return (.senderMismatch, nil, nil) }
            if subscribe {
                if s.deviceTopics[d.id]?[Topics.key(topic)] != nil { return (.ok, nil, nil) }
                guard s.subscribe(device: d.id, topic: topic, at: now) else { return (.tooManyTopics, nil, nil) }
                return (.ok, submit([Writes.subscriptions(add: [(d.id, topic)], at: now, remove: [], topic: topic)]), d)
            }
            guard s.unsubscribe(device: d.id, topic: topic) else { return (.notSubscribed, nil, nil) }
            return (.ok, submit([Writes.subscriptions(add: [], at: now, remove: [d.id], topic: topic)]), d)
        }
        if let ticket {
            try commitControl(ticket)
            if events.hasReaders, let device, let now = try? self.device(device.token) {
                events.publish([("device.updated", renderDevice(now))])
            }
        }
        return outcome
    }

    /// Subscribes one device (control API and `POST /iid/v1/{token}/rel/topics/{topic}`).
    public func subscribe(_ token: String, topic: String, senderID: String? = nil) throws(EngineError) -> Device {
        guard Topics.isValidName(topic) else { throw .badRequest("Topic name format is invalid") }
        switch try batch([token], topic: topic, subscribe: true, senderID: senderID).first {
        case .invalidArgument? where isWellFormedToken(token):
            throw .badRequest("device '\(token)' is a browser's Web Push subscription: it takes no topics")
        case .notFound?, .invalidArgument?:
            // An unregistered device is still listed: say why it takes no topic.
            if let d = try? device(token), d.state == .unregistered { throw .notFound("device '\(token)' is unregistered: it takes no topics") }
            throw .notFound("device '\(token)' does not exist")
        case .tooManyTopics?: throw .conflict("device '\(token)' already has \(Subscription.maxTopicsPerDevice) topics")
        default: return try device(token)
        }
    }

    /// Unsubscribes one device.
    public func unsubscribe(_ token: String, topic: String) throws(EngineError) -> Device {
        _ = try device(token)
        _ = try batch([token], topic: topic, subscribe: false, senderID: nil)
        return try device(token)
    }

    /// A device's topics with the dates they were added.
    public func topics(of token: String) throws(EngineError) -> [Subscription] {
        let d = try device(token)
        return state.withLock { $0.topics(of: d.id) }
    }

    /// Every topic with at least one subscriber: (name, subscriber tokens).
    public func allTopics() -> [(name: String, subscribers: [String])] {
        state.withLock { s in s.topicSubscribers.keys.sorted().compactMap { s.topic(key: $0) } }
    }

    /// One topic's subscribers (none for a topic nobody subscribed to: a topic is only a name).
    public func topic(_ name: String) throws(EngineError) -> (name: String, subscribers: [String]) {
        let bare = Topics.name(name)
        guard Topics.isValidName(bare) else { throw .badRequest("topic name format is invalid: [a-zA-Z0-9-_.~%]{1,900}") }
        return state.withLock({ $0.topic(key: Topics.key(bare)) }) ?? (bare, [])
    }
}
