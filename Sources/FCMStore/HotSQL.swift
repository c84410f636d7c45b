/// The statements every send runs, held by the connection at a fixed index (`statement(_:)`)
/// instead of looked up by their text, and the rows they write bound field by field (no array of
/// `SQLValue`s built and taken apart per row).
enum HotSQL: Int, CaseIterable {
    case begin, commit, insertMessage, insertDelivery, setDeliveryStatus

    var sql: String {
        switch self {
        case .begin: return "BEGIN IMMEDIATE"
        case .commit: return "COMMIT"
        case .insertMessage: return MessageRow.insertSQL
        case .insertDelivery: return DeliveryRow.insertSQL
        case .setDeliveryStatus: return "UPDATE deliveries SET status = ?, settled_at = ? WHERE id = ?"
        }
    }
}

extension SQLiteConnection {
    /// Inserts a `messages` row.
    func insert(_ m: MessageRow) throws(StoreError) {
        let s = try statement(.insertMessage)
        try s.bind(1, m.id); try s.bind(2, Int64(m.suffix)); try s.bind(3, m.multicastID); try s.bind(4, m.senderID)
        try s.bind(5, m.transport); try s.bind(6, m.format); try s.bind(7, m.acceptedAt); try s.bind(8, m.targetKind)
        try s.bind(9, m.targetValue); try s.bind(10, m.collapseKey); try s.bind(11, m.timeToLive)
        try s.bind(12, m.restrictedPackageName); try s.bind(13, m.flags); try s.bind(14, m.data); try s.bind(15, m.notification)
        try s.bind(16, m.priority); try s.bind(17, m.status); try s.bind(18, m.error); try s.bind(19, m.errorDetail)
        try s.bind(20, Int64(m.httpStatus)); try s.bind(21, m.raw); try s.bind(22, Int64(m.recipients)); try s.bind(23, m.fault)
        try s.bind(24, m.clientMessageID); try s.bind(25, m.platforms); try s.bind(26, m.v1Name); try s.bind(27, m.answer)
        try s.bind(28, m.headers)
        while try s.step() {}
    }

    /// Inserts `deliveries` rows.
    func insert<Rows: Sequence<DeliveryRow>>(_ rows: Rows) throws(StoreError) {
        for d in rows {
            let s = try statement(.insertDelivery)
            try s.bind(1, d.id); try s.bind(2, d.message); try s.bind(3, d.device); try s.bind(4, d.token)
            try s.bind(5, d.status); try s.bind(6, d.error); try s.bind(7, d.canonical); try s.bind(8, d.deliveredAt)
            try s.bind(9, d.expiresAt); try s.bind(10, d.fault); try s.bind(11, d.clientDelivery)
            while try s.step() {}
        }
    }

    /// New statuses of delivery rows, settled at `at`.
    func setStatuses(_ changes: [(Int64, String)], at: Int64) throws(StoreError) {
        for (id, status) in changes {
            let s = try statement(.setDeliveryStatus)
            try s.bind(1, status); try s.bind(2, at); try s.bind(3, id)
            while try s.step() {}
        }
    }
}
