import FCMEngine
import FCMCore
import HTTPServer

extension V1Error {
    /// The answer: Google's status, JSON body and headers.
    var response: HTTPResponse {
        var headers: [(String, String)] = []
        if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        if challenge { headers.append(("WWW-Authenticate", #"Bearer realm="https://accounts.google.com/""#)) }
        return HTTPResponse(status: code, contentType: ContentType.json, body: body, headers: headers)
    }
}
