import FCMCore
import FCMEngine
public import FCMModel

/// What the APNs room gives the rest of the server: the engine's hooks (its record block's
/// reader, Apple's reasons as fault errors, Apple's holding rules) and the GOAWAY notices APNs clients log.
public enum APNsRoom {
    /// How an `apns` record block reads back, and the reasons a fault with `when.transport`
    /// `apns` may answer with.
    public static let recordBlocks = APNsRecordBlock.readers
    /// What an iPhone received, by a record's `apns` block (a body that was no JSON object, as it came).
    public static let received = APNsRecordBlock.received
    /// What an APNs record shows at its top from its `apns` block: `apns_id` and `apns_unique_id`
    /// (null for a send refused before it had them).
    public static let recordFields: RecordBlocks.Fields = { blocks in
        let apns = blocks?["apns"]?.objectValue
        return [("apns_id", apns?["apns_id"]?.stringValue), ("apns_unique_id", apns?["apns_unique_id"]?.stringValue)]
    }
    /// APNs records show their `apns` block and the fields above.
    public static let recordForm = RecordForm(showsBlocks: true, inboxNamesTransport: true)
    /// Apple's store-and-forward and screen, for the engine to hold APNs notifications by.
    public static let holding = APNsStorage.rules
    public static let faultErrors = FaultErrors(transport: Transport.apns.rawValue, kind: "an APNs reason",
                                                listName: "Apple's reasons", names: APNsReason.allCases.map(\.rawValue))

    /// The GOAWAY debug data of an idle HTTP/2 connection closed by the server (`{"reason":"IdleTimeout"}`).
    public static let idleNotice = Array(APNsError(.idleTimeout, "").body.utf8)
    /// The GOAWAY debug data of a server shutting down (`{"reason":"Shutdown"}`).
    public static let shutdownNotice = Array(APNsError(.shutdown, "").body.utf8)
}
