public import FCMCore

/// The outcome of a send to tokens.
public struct SendResult: Sendable {
    public var multicastID: Int64
    public var results: [RecipientResult]
    /// The record's id in the control API (`GET /api/v1/messages/{id}`).
    public var recordID: String
    /// For topic and condition sends: the message id FCM answered as a number.
    public var topicMessageID: Int64 = 0
    /// The `name` a v1 send answers (`projects/{project_id}/messages/{id}`), as recorded.
    public var v1Name: String?
    /// The answer `SendExchange.answer` made, when the send was given one (kept on its record).
    public var response: (any KeptAnswer)?
    /// For topic and condition sends: the error answered instead of a message id.
    public var topicError: FCMErrorCode?
    /// For device-group sends: how many members were reached and the tokens that failed.
    public var group: (success: Int, failedTokens: [String])?

    public var success: Int { results.count(where: { $0.error == nil }) }
    public var failure: Int { results.count(where: { $0.error != nil }) }
    public var canonicalIDs: Int { results.count(where: { $0.canonicalToken != nil }) }

    package init(multicastID: Int64, results: [RecipientResult], recordID: String, topicMessageID: Int64 = 0,
                 v1Name: String? = nil, response: (any KeptAnswer)? = nil, topicError: FCMErrorCode? = nil,
                 group: (success: Int, failedTokens: [String])? = nil) {
        self.multicastID = multicastID
        self.results = results
        self.recordID = recordID
        self.topicMessageID = topicMessageID
        self.v1Name = v1Name
        self.response = response
        self.topicError = topicError
        self.group = group
    }
}

/// The outcome for one recipient of a send (one entry of `results`).
public struct RecipientResult: Sendable, Equatable {
    /// The message id when accepted (`fake_message_id` in a dry run).
    public var messageID: String?
    public var error: FCMErrorCode?
    /// The token to use from now on, when the addressed one was refreshed.
    public var canonicalToken: String?
    /// The delivery row (its message-id stamp) and what happened to it: `delivered`, `pending`, …
    public var deliveryID: Int64?
    public var deliveryStatus: String?
    /// The token the message went to (the canonical one for a refreshed token).
    public var deliveredTo: String?

    package init(messageID: String? = nil, error: FCMErrorCode? = nil, canonicalToken: String? = nil,
                 deliveryID: Int64? = nil, deliveryStatus: String? = nil, deliveredTo: String? = nil) {
        self.messageID = messageID
        self.error = error
        self.canonicalToken = canonicalToken
        self.deliveryID = deliveryID
        self.deliveryStatus = deliveryStatus
        self.deliveredTo = deliveredTo
    }
}

/// What a send's record keeps of its exchange: the request headers (in their stored form) and
/// how the transport's answer is made from the result.
public struct SendExchange: Sendable {
    package var headers: String?
    package var answer: @Sendable (SendResult) -> any KeptAnswer

    public init(headers: String?, answer: @escaping @Sendable (SendResult) -> any KeptAnswer) {
        self.headers = headers
        self.answer = answer
    }
}

/// A transport's answer to a request, as its record keeps it. The engine never reads an answer:
/// it stores `storedForm` (status, content type and body, in the form the control API shows).
public protocol KeptAnswer: Sendable {
    var storedForm: String { get }
    /// The status the sender was answered (the record's `http_status`).
    var answeredStatus: Int { get }
}
