public import HTTPServer

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
