public import HTTPServer

/// Where a Web Push subscription's endpoint points on the mock's origin: this, then its id
/// (`POST /wp/{id}`, the Web Push room's route). The rooms that hand out endpoints (autopush's
/// channels, the engine's web devices through the assembly) and the one that reads them back
/// (FCM registrations) share it.
public enum WebPushEndpoints {
    public static let path = "/wp/"
}

/// Content types of the protocol's answers.
public enum ContentType {
    public static let json = "application/json; charset=UTF-8"
    public static let text = "text/plain; charset=UTF-8"
    public static let html = "text/html; charset=UTF-8"
    /// The header list of a JSON answer, shared (every send's answer has it).
    public static let jsonHeaders = [("Content-Type", json)]
}

extension HTTPResponse {
    /// 405 for a path that takes only POST (`/fcm/send`, the token endpoint).
    public static let postOnly = HTTPResponse(status: 405, contentType: ContentType.text, body: "Method Not Allowed: use POST\n",
                                       headers: [("Allow", "POST")])
}
