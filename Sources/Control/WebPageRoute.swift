import RoomKit
import FCMEngine
public import HTTPServer

/// `/` and `/index.html`: the web page.
public struct WebPageRoute: Sendable {
    let controlToken: String?

    public init(controlToken: String?) { self.controlToken = controlToken }

    public func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        // The page carries no data itself, but it is the control API's face: the same token.
        if let controlToken, !ControlAPI.authorized(r, controlToken, queryName: "token") {
            return responder.send(HTTPResponse(status: 401, contentType: ContentType.text,
                                               body: "This server needs its control token: open /?token=SECRET\n"))
        }
        guard r.method == "GET" || r.method == "HEAD" else {
            return responder.send(HTTPResponse(status: 405, contentType: ContentType.text, body: "Method Not Allowed\n"))
        }
        responder.send(HTTPResponse(status: 200, headers: [("Content-Type", ContentType.html), ("Cache-Control", "no-store"),
                                                           ("Content-Security-Policy", WebPage.contentSecurityPolicy)],
                                    body: WebPage.bytes))
    }
}

