import FCMCore
public import FCMStore

/// A message record as the store holds it: its row, its recipients (the first
/// `recipientsLimit` when given) with the tokens of the devices they name.
public struct MessageRecord: Sendable {
    package let row: MessageRow
    package let recipients: [RecipientRow]
    package let tokens: [Int64: String]
    /// Its recipients that are real clients' devices: each shows `client_delivery`, null until
    /// its delivery is written on a connection.
    package var clientDevices: Set<Int64> = []
    package let recipientsLimit: Int?
    /// Its recipients by status (`failed` for those with an error), when asked for.
    package var recipientCounts: [(String, Int64)]? = nil
    /// How its room's block reads back.
    package let blocks: RecordBlocks

    package init(row: MessageRow, recipients: [RecipientRow], tokens: [Int64: String], recipientsLimit: Int?,
                 recipientCounts: [(String, Int64)]? = nil, blocks: RecordBlocks) {
        self.row = row
        self.recipients = recipients
        self.tokens = tokens
        self.recipientsLimit = recipientsLimit
        self.recipientCounts = recipientCounts
        self.blocks = blocks
    }
}

/// One inbox entry: the delivery and its message, and its status as of now (a held message past
/// its TTL reads as expired before the sweep writes it so).
public struct InboxEntry: Sendable {
    package let row: InboxRow
    package let status: String
    /// The device's platform, whose form the entry's `effective` payload takes.
    package let platform: Platform
    /// How its room's block reads back.
    package let blocks: RecordBlocks
    /// A real client's device's entry: it shows `client_delivery`, null until written.
    package var realClient = false

    package init(row: InboxRow, status: String, platform: Platform, blocks: RecordBlocks) {
        self.row = row
        self.status = status
        self.platform = platform
        self.blocks = blocks
    }
}

/// An upstream message: sent by a fake device to its app server over XMPP (seeds Tables 5-6).
public typealias UpstreamMessage = UpstreamRow
