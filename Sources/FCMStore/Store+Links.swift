/// Subscriptions, device groups and upstream messages: rows and every statement that writes them.

/// One `upstream` row: a device's message to its app server.
public struct UpstreamRow: Sendable {
    public var id: String
    public var token: String
    public var senderID: String
    public var category: String
    public var data: String
    public var timeToLive: Int64
    public var createdAt: Int64
    public var status: String
    public var sentAt: Int64?
    public var ackedAt: Int64?
    public var connectionID: String?

    public init(id: String, token: String, senderID: String, category: String, data: String, timeToLive: Int64, createdAt: Int64,
                status: String, sentAt: Int64?, ackedAt: Int64?, connectionID: String?) {
        self.id = id; self.token = token; self.senderID = senderID; self.category = category; self.data = data
        self.timeToLive = timeToLive; self.createdAt = createdAt; self.status = status; self.sentAt = sentAt
        self.ackedAt = ackedAt; self.connectionID = connectionID
    }

    var values: [SQLValue] {
        [.text(id), .text(token), .text(senderID), .text(category), .text(data), .int(timeToLive), .int(createdAt),
         .text(status), .optional(sentAt), .optional(ackedAt), .optional(connectionID)]
    }
}

extension Writes {
    // MARK: Subscriptions

    /// Adds subscriptions (device, topic name as given) and removes one topic's (matched in any
    /// case) from `unsubscribed` devices.
    public static func subscriptions(add: [(device: Int64, topic: String)], at now: Int64, remove unsubscribed: [Int64],
                                     topic: String) -> WriteOp {
        { c in
            try each(c, "INSERT OR IGNORE INTO subscriptions(device, topic, added_at) VALUES (?,?,?)",
                     add.lazy.map { [.int($0.device), .text($0.topic), .int(now)] })
            try each(c, "DELETE FROM subscriptions WHERE device = ? AND topic = ? COLLATE NOCASE",
                     unsubscribed.lazy.map { [.int($0), .text(topic)] })
        }
    }

    // MARK: Device groups

    /// Writes a group and its members in order, replacing what was stored.
    public static func saveGroup(key: String, name: String, senderID: String, createdAt: Int64, members: [Int64]) -> WriteOp {
        { c in
            try c.run("INSERT OR REPLACE INTO groups(key, name, sender_id, created_at) VALUES (?,?,?,?)",
                      [.text(key), .text(name), .text(senderID), .int(createdAt)])
            try c.run("DELETE FROM group_members WHERE key = ?", [.text(key)])
            try each(c, "INSERT INTO group_members(key, device, position) VALUES (?,?,?)",
                     members.enumerated().lazy.map { [.text(key), .int($0.element), .int(Int64($0.offset))] })
        }
    }

    /// Remembers tokens no send may register again (a send to one is NotRegistered until a
    /// reset): a deleted real client's devices'.
    public static func retireTokens(_ tokens: [String]) -> WriteOp {
        { c in try each(c, "INSERT OR IGNORE INTO retired_tokens(token) VALUES (?)", tokens.lazy.map { [.text($0)] }) }
    }

    /// Deletes a group; its key is remembered (a send to it is NotRegistered until a reset).
    public static func deleteGroup(_ key: String) -> WriteOp {
        { c in
            try c.run("DELETE FROM group_members WHERE key = ?", [.text(key)])
            try c.run("DELETE FROM groups WHERE key = ?", [.text(key)])
            try c.run("INSERT OR IGNORE INTO retired_tokens(token) VALUES (?)", [.text(key)])
        }
    }

    // MARK: Upstream

    /// Inserts or replaces upstream messages.
    public static func saveUpstream(_ rows: [UpstreamRow]) -> WriteOp {
        { c in
            try each(c, """
                INSERT OR REPLACE INTO upstream(id, token, sender_id, category, data, time_to_live, created_at, status, sent_at,
                  acked_at, connection_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)
                """, rows.lazy.map(\.values))
        }
    }

    // MARK: Messages

    /// A send: the devices it registered, its record and deliveries, the `deleted_messages`
    /// notices it caused (each a record with one delivery), and the storage-rule status changes.
    public static func send(newDevices: [DeviceRow], message: MessageRow, deliveries: [DeliveryRow],
                            notices: [(MessageRow, DeliveryRow)], statusChanges: [(Int64, String)],
                            changedAt: Int64 = 0) -> WriteOp {
        { c in
            try each(c, DeviceRow.insertSQL, newDevices.lazy.map(\.values))
            try c.insert(message)
            try c.insert(deliveries)
            for (m, d) in notices {
                try c.insert(m)
                try c.insert(CollectionOfOne(d))
            }
            try c.setStatuses(statusChanges, at: changedAt)
        }
    }

    /// A device's held `deleted_messages` notice counts `total` messages now: a purge while it
    /// held one adds to it instead of leaving a second.
    public static func setNoticeTotal(notice id: Int64, total: Int) -> WriteOp {
        { c in try c.run("UPDATE messages SET target_value = ? WHERE id = ?", [.text(String(total)), .int(id)]) }
    }

    /// A record without recipients (a refused request).
    public static func insertMessage(_ row: MessageRow) -> WriteOp {
        { c in try c.insert(row) }
    }

    /// The answer a message's sender got and the headers it sent (both JSON), once answered.
    public static func setAnswer(message id: Int64, answer: String, headers: String?) -> WriteOp {
        { c in try c.run("UPDATE messages SET answer = ?, headers = ? WHERE id = ?", [.text(answer), .optional(headers), .int(id)]) }
    }

    /// New statuses of delivery rows (storage rules, expiry), taken at `at` (mock clock, ms).
    public static func setDeliveryStatuses(_ changes: [(Int64, String)], at: Int64) -> WriteOp {
        { c in try c.setStatuses(changes, at: at) }
    }
}
