import RoomKit
public import FCMEngine
import FCMModel
import FCMCore
public import HTTPServer

/// `POST /token` (also `/oauth2/v4/token` and `/o/oauth2/token`): OAuth 2.0's token endpoint, as
/// Google's answers service accounts (docs/spec/fcm-v1.md section 3). The body is a form
/// (`grant_type=…&assertion=JWT`), or the same fields as JSON.
public struct TokenRoute: Sendable {
    let engine: Engine
    let tokens: OAuthTokens

    public init(engine: Engine) {
        self.engine = engine
        tokens = OAuthTokens(engine: engine)
    }

    public func handle(_ r: HTTPRequest, _: PathParams, _ responder: HTTPResponder) {
        responder.send(answer(r))
    }

    private func answer(_ r: HTTPRequest) -> HTTPResponse {
        guard r.method == "POST" else {
            return .postOnly
        }
        if r.bodyTooLarge { return Self.error(413, "invalid_request", "Request body too large") }
        guard let fields = Self.fields(r) else { return Self.error(400, "invalid_request", "The body is not a form or JSON object.") }
        do {
            let t = try tokens.issue(grantType: fields["grant_type"], assertion: fields["assertion"]) {
                Self.isTokenURI($0, for: r)
            }
            var w = JSONWriter()
            w.beginObject()
            w.key("access_token"); w.value(t.token)
            w.key("expires_in"); w.value(GoogleAccessTokens.lifetimeSeconds)
            w.key("token_type"); w.value("Bearer")
            w.endObject()
            return HTTPResponse(status: 200, headers: [("Content-Type", ContentType.json), ("Cache-Control", "no-store")], body: w.bytes)
        } catch {
            let (code, description) = error.answer
            return Self.error(400, code, description)
        }
    }

    /// Google's token URIs: the one google-auth (Python, Node, Java) puts in `aud` whatever
    /// `token_uri` says, and the two older ones the other paths of this endpoint stand for.
    static let googleTokenURIs: Set<String> = ["https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token",
                                               "https://accounts.google.com/o/oauth2/token"]

    /// Whether an assertion's `aud` names this endpoint: one of Google's token URIs, or the
    /// `token_uri` the mock hands out in service-account JSON (`{scheme}://{Host}/token`, as this
    /// request arrived; Go's oauth2 puts `token_uri` in `aud`), or the path the request came to
    /// on the same host. Scheme and host are compared without case, a default port (80, 443) as
    /// if absent; the path exactly; a query or fragment never matches.
    static func isTokenURI(_ aud: String, for r: HTTPRequest) -> Bool {
        if googleTokenURIs.contains(aud) { return true }
        let scheme = r.isSecure ? "https" : "http"
        guard let host = r.header("host").map({ authority($0, scheme: scheme) }), !host.isEmpty,
              let colon = aud.firstIndex(of: ":"), aud[..<colon].lowercased() == scheme else { return false }
        let afterScheme = aud[aud.index(after: colon)...]
        guard afterScheme.hasPrefix("//") else { return false }
        let rest = afterScheme.dropFirst(2)
        guard let slash = rest.firstIndex(of: "/") else { return false }
        let path = rest[slash...]
        return authority(rest[..<slash], scheme: scheme) == host && (path == "/token" || path == r.path)
    }

    /// `host[:port]` lower-cased, without the scheme's default port.
    private static func authority(_ a: some StringProtocol, scheme: String) -> String {
        let lower = a.lowercased()
        let defaultPort = scheme == "https" ? ":443" : ":80"
        return lower.hasSuffix(defaultPort) ? String(lower.dropLast(defaultPort.count)) : lower
    }

    /// The body's fields: a form (what Google's libraries send), or a JSON object of strings.
    static func fields(_ r: HTTPRequest) -> [String: String]? {
        if r.header("content-type").map({ hasPrefixIgnoringCase($0.utf8, "application/json") }) == true {
            guard let o = (try? JSONParser.parse(r.body))?.objectValue else { return nil }
            var out: [String: String] = [:]
            for m in o.members { if let v = m.value.stringValue { out[m.key] = v } }
            return out
        }
        guard let pairs = FormBody.parse(r.body) else { return nil }
        return Dictionary(pairs, uniquingKeysWith: { first, _ in first })
    }

    static func error(_ status: Int, _ code: String, _ description: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("error"); w.value(code)
        w.key("error_description"); w.value(description)
        w.endObject()
        return HTTPResponse(status: status, headers: [("Content-Type", ContentType.json), ("Cache-Control", "no-store")], body: w.bytes)
    }
}
