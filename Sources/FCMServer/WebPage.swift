/// The inspection page served at `/`: one self-contained HTML document (no CDN) that reads the
/// control API and follows `/api/v1/events` live.
///
/// Its source is three files in `Resources/web/`, embedded at build time (`PackageResources`):
/// `index.html` names `page.css` and `page.js` the way a browser opening the folder would load
/// them, and `bytes` puts both inline in their place, so the server sends one document and the
/// CSP needs no other origin or path.
///
/// Every value from the server is put on the page with `textContent`, never as HTML, so payload
/// strings render as text. With `--control-token`, open the page as `/?token=SECRET`: the script
/// sends it as a bearer token, and as `access_token` on the event stream (EventSource cannot set
/// headers).
enum WebPage {
    /// The page's only script is its own inline one; it loads nothing from anywhere else.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'"

    /// The page as served, assembled once.
    static let bytes = assemble(template: PackageResources.index_html,
                                css: PackageResources.page_css, js: PackageResources.page_js)

    /// `template` with its stylesheet link replaced by an inline `<style>` holding `css`, and its
    /// script element by an inline `<script>` holding `js`. The template's final newline is
    /// dropped: the page has always been sent without one.
    static func assemble(template: [UInt8], css: [UInt8], js: [UInt8]) -> [UInt8] {
        var page = template
        if page.last == UInt8(ascii: "\n") { page.removeLast() }
        page = inline(#"<link rel="stylesheet" href="page.css">"#, by: "<style>\n", css, "</style>", in: page)
        return inline(#"<script src="page.js"></script>"#, by: "<script>\n", js, "</script>", in: page)
    }

    /// `page` with its one `element` replaced by `open`, `content`, `close`.
    private static func inline(_ element: String, by open: String, _ content: [UInt8], _ close: String,
                               in page: [UInt8]) -> [UInt8] {
        guard let range = page.firstRange(of: Array(element.utf8)) else {
            preconditionFailure("Resources/web/index.html must contain \(element)")
        }
        var out = page
        out.replaceSubrange(range, with: Array(open.utf8) + content + Array(close.utf8))
        return out
    }
}
