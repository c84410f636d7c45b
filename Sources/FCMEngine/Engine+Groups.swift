public import FCMModel
import Platform
import FCMCore
import FCMStore

/// A device group (`/fcm/notification`): a named set of at most 20 tokens of one project,
/// addressed by its notification key.
struct DeviceGroup: Sendable, Equatable {
    /// Most members a group may have.
    static let maxMembers = 20
    var key: String
    var name: String
    var senderID: String
    var members: [Int64]
    var createdAt: Int64
}

/// A new notification key shaped like FCM's: `APA91b` and base64url noise, no colon.
func newNotificationKey() -> String {
    var rng = SystemRandomNumberGenerator()
    return notificationKey(fromToken: newRegistrationToken(using: &rng))
}

/// A fixture group's notification key: the same at every start and after every reset, as a
/// fixture device's derived token is.
func fixtureNotificationKey(senderID: String, name: String) -> String {
    notificationKey(fromToken: deterministicRegistrationToken(seed: "group|\(senderID)|\(name)"))
}

private func notificationKey(fromToken t: String) -> String {
    "APA91b" + String(t.split(separator: ":").last?.dropFirst(6) ?? "")
}

extension Engine {
    /// `create`, `add` or `remove` (seeds Table 10). A failed operation changes nothing.
    /// `newKey` is the key a `create` gives the group (fixtures); nil makes a random one.
    public func groupOperation(_ operation: String, name: String?, key: String?, tokens: [String], senderID: String,
                               newKey: String? = nil) throws(GroupError) -> String {
        let now = clock.nowMillis()
        let result: Result<(String, Store.Ticket?), GroupError> = state.withLock { s in
            // Members must be known, registered devices of this project; a member that was
            // uninstalled or refreshed since can still be removed (an app server removes the
            // tokens a send listed in `failed_registration_ids`).
            let members = key.flatMap { s.groups[$0] }.map { Set($0.members) } ?? []
            let ids = tokens.compactMap { t -> Int64? in
                // A browser's Web Push subscription is no FCM registration: no group takes it.
                guard var d = s.device(token: t), d.senderID == senderID, !d.isWebPushSubscription else { return nil }
                // A refreshed token's place went to its new token: removing the old one removes that.
                if operation == "remove", !members.contains(d.id) { d = s.current(d) }
                guard d.state == .registered || (operation == "remove" && members.contains(d.id)) else { return nil }
                return d.id
            }
            switch operation {
            case "create":
                guard let name, !name.isEmpty else { return .failure(.bad("notification_key_name is missing")) }
                if s.groupKeyByName[senderID + "/" + name] != nil { return .failure(.bad("notification_key already exists")) }
                guard !ids.isEmpty else { return .failure(.bad("no valid registration ids")) }
                let members = Array(NSOrderedSetLike(ids))
                guard members.count <= DeviceGroup.maxMembers else {
                    return .failure(.bad("too many registration ids: a group has at most \(DeviceGroup.maxMembers)"))
                }
                var key = newKey ?? newNotificationKey()
                while s.groups[key] != nil { key = newNotificationKey() }
                let g = DeviceGroup(key: key, name: name, senderID: senderID, members: members, createdAt: now)
                s.insert(g)
                return .success((key, submit([g.save])))
            case "add", "remove":
                guard let key, var g = s.groups[key], g.senderID == senderID else { return .failure(.bad("notification_key not found")) }
                if let name, name != g.name {
                    return .failure(.bad("notification_key_name doesn't match the group name of the notification_key"))
                }
                guard !ids.isEmpty else { return .failure(.bad("no valid registration ids")) }
                if operation == "add" {
                    let merged = Array(NSOrderedSetLike(g.members + ids))
                    guard merged.count <= DeviceGroup.maxMembers else {
                        return .failure(.bad("too many registration ids: a group has at most \(DeviceGroup.maxMembers)"))
                    }
                    g.members = merged
                } else {
                    g.members.removeAll { ids.contains($0) }
                }
                if g.members.isEmpty {
                    // FCM deletes a group when its last member leaves.
                    s.remove(group: key)
                    return .success((key, submit([Writes.deleteGroup(key)])))
                }
                s.insert(g)
                let saved = g
                return .success((key, submit([saved.save])))
            default:
                return .failure(.bad("operation must be create, add or remove"))
            }
        }
        let (key, ticket) = try result.get()
        if let ticket {
            do {
                try commit(ticket)
            } catch {
                throw GroupError(kind: .storeFailed, message: "the store failed: \(error.description)")
            }
        }
        return key
    }

    /// The notification key of a group by name (`GET /fcm/notification?notification_key_name=`).
    public func groupKey(name: String, senderID: String) -> String? {
        state.withLock { $0.groupKeyByName[senderID + "/" + name] }
    }

    /// Every group, oldest first, with its members' tokens.
    public func groups() -> [GroupView] {
        state.withLock { s in s.groups.values.sorted { ($0.createdAt, $0.key) < ($1.createdAt, $1.key) }.map { GroupView($0, s) } }
    }

    /// One group by its notification key.
    public func group(_ key: String) throws(EngineError) -> GroupView {
        guard let view = state.withLock({ s in s.groups[key].map { GroupView($0, s) } }) else {
            throw .notFound("group '\(key)' does not exist")
        }
        return view
    }
}

/// A device group with its members' tokens, as read under the state lock.
public struct GroupView: Sendable {
    let group: DeviceGroup
    let memberTokens: [String?]

    init(_ g: DeviceGroup, _ s: EngineState) {
        group = g
        memberTokens = g.members.map { s.devices[$0]?.token }
    }
}

extension Render {
    /// A device group as the control API shows it.
    public static func group(_ v: GroupView) -> String {
        let g = v.group
        var w = JSONWriter()
        w.beginObject()
        w.key("notification_key"); w.value(g.key)
        w.key("notification_key_name"); w.value(g.name)
        w.key("sender_id"); w.value(g.senderID)
        w.key("members"); w.beginArray()
        for t in v.memberTokens { w.value(t) }
        w.endArray()
        w.key("created_at"); w.value(rfc3339(millis: g.createdAt))
        w.endObject()
        return w.string
    }
}

extension DeviceGroup {
    /// The write that stores this group as it is now.
    var save: WriteOp { Writes.saveGroup(key: key, name: name, senderID: senderID, createdAt: createdAt, members: members) }
}

/// Order-preserving de-duplication.
func NSOrderedSetLike<T: Hashable>(_ items: [T]) -> [T] {
    var seen = Set<T>()
    return items.filter { seen.insert($0).inserted }
}

extension EngineState {
    mutating func insert(_ g: DeviceGroup) {
        groups[g.key] = g
        groupKeyByName[g.senderID + "/" + g.name] = g.key
    }

    mutating func remove(group key: String) {
        guard let g = groups.removeValue(forKey: key) else { return }
        groupKeyByName[g.senderID + "/" + g.name] = nil
        retiredTokens.insert(key)
    }
}
