/// The inspection page served at `/`: one self-contained HTML document (no CDN) that reads the
/// control API and follows `/api/v1/events` live.
///
/// Its source is the files in `Resources/web/`, embedded at build time (`PackageResources`):
/// `index.html` names each stylesheet and script (`files` below) the way a browser opening the
/// folder would load them, and `bytes` puts each inline in its place, so the server sends one
/// document and the CSP needs no other origin or path. The scripts run in the order
/// `index.html` gives; each keeps its names to itself (an IIFE) and shares what it must through
/// `window.fcm`.
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
    static let bytes = assemble(template: PackageResources.index_html, files: files)

    /// Every stylesheet and script of `Resources/web/`, by the name `index.html` uses for it.
    static let files: [String: [UInt8]] = [
        "page.css": PackageResources.page_css,
        "common.js": PackageResources.common_js,
        "compose.css": PackageResources.compose_css,
        "compose.js": PackageResources.compose_js,
        "page.js": PackageResources.page_js,
        "overview.css": PackageResources.overview_css,
        "overview.js": PackageResources.overview_js,
        "previews.css": PackageResources.previews_css,
        "previews.js": PackageResources.previews_js,
        "device.js": PackageResources.device_js,
        "detail.js": PackageResources.detail_js,
    ]

    /// `template` with each stylesheet link (`<link rel="stylesheet" href="NAME.css">`) replaced by
    /// an inline `<style>` holding that file, and each script element (`<script src="NAME.js">
    /// </script>`) by an inline `<script>` holding it. The template's final newline is dropped:
    /// the page has always been sent without one.
    static func assemble(template: [UInt8], files: [String: [UInt8]]) -> [UInt8] {
        var page = template
        if page.last == UInt8(ascii: "\n") { page.removeLast() }
        for (name, content) in files.sorted(by: { $0.key < $1.key }) {
            if name.hasSuffix(".css") {
                page = inline(#"<link rel="stylesheet" href="\#(name)">"#, by: "<style>\n", content, "</style>", in: page)
            } else {
                page = inline(#"<script src="\#(name)"></script>"#, by: "<script>\n", content, "</script>", in: page)
            }
        }
        return page
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
