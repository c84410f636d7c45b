import RoomKit
import FCMEngine
import FCMCore
import HTTPServer

/// Google's error as an HTTP answer, and the error a credential refusal becomes (apart from
/// V1Error.swift, which the pure rules and their tests use without HTTP).
extension V1Error {
    /// The answer: Google's status, JSON body and headers.
    var response: HTTPResponse {
        var headers: [(String, String)] = []
        if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        if challenge { headers.append(("WWW-Authenticate", #"Bearer realm="https://accounts.google.com/""#)) }
        return HTTPResponse(status: code, contentType: ContentType.json, body: body, headers: headers)
    }
}

extension V1Error {
    /// Google's answer to a credential that does not reach the path's project, with the
    /// engine's reason kept for the record.
    init(_ refusal: ProjectAccessRefusal) {
        switch refusal {
        case .unauthenticated(let why): self = V1Error.unauthenticated.because(why)
        case .unknownProject(let why): self = V1Error.notFound.because(why)
        case .otherProject(let name, let why): self = V1Error.permissionDenied(project: name).because(why)
        }
    }
}
