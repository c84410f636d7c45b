import RoomKit
import FCMEngine
import FCMCore
import TLS

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
    /// The page as served, assembled once.
    static let bytes = assemble(template: PackageResources.index_html, files: files)

    /// The page's policy: nothing from anywhere else, and of inline code only the page's own
    /// blocks, each named by its SHA-256 (`'unsafe-inline'` would also run a `<script>` or an
    /// `onerror=` that got onto the page some other way). Style attributes are refused too: the
    /// scripts set styles through `element.style`, which a policy does not govern.
    static let contentSecurityPolicy = policy(for: bytes)

    /// The Content-Security-Policy for `page`: a hash source for each inline `<script>` and
    /// `<style>` block it holds (in page order, each once), the API on this origin, and no
    /// plugins, base URL, form submission or framing.
    static func policy(for page: [UInt8]) -> String {
        func sources(_ blocks: [[UInt8]]) -> String {
            var seen: Set<String> = []
            return blocks.map(hashSource).filter { seen.insert($0).inserted }.joined(separator: " ")
        }
        let scripts = sources(inlineBlocks(of: "script", in: page))
        let styles = sources(inlineBlocks(of: "style", in: page))
        return "default-src 'none'; script-src \(scripts.isEmpty ? "'none'" : scripts); "
            + "style-src \(styles.isEmpty ? "'none'" : styles); connect-src 'self'; object-src 'none'; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    }

    /// `'sha256-BASE64'` of `text` (CSP's hash source: standard base64 with its padding).
    static func hashSource(_ text: [UInt8]) -> String {
        var b64 = Array(base64URLEncode(SHA256.digest(text)).utf8).map { c -> UInt8 in
            c == UInt8(ascii: "-") ? UInt8(ascii: "+") : c == UInt8(ascii: "_") ? UInt8(ascii: "/") : c
        }
        while b64.count % 4 != 0 { b64.append(UInt8(ascii: "=")) }
        return "'sha256-" + String(decoding: b64, as: UTF8.self) + "'"
    }

    /// The text of every `<tag …>…</tag>` element of `page` (what a browser hashes: everything
    /// between the start tag's `>` and the end tag), in page order.
    static func inlineBlocks(of tag: String, in page: [UInt8]) -> [[UInt8]] {
        let open = Array("<\(tag)".utf8), close = Array("</\(tag)".utf8)
        var blocks: [[UInt8]] = []
        var at = 0
        while let start = find(open, in: page, from: at) {
            at = start.upperBound
            // `<scripts…` or `<styled…` is another name, not this element.
            guard at < page.count, [UInt8(ascii: ">"), UInt8(ascii: " "), UInt8(ascii: "\n")].contains(page[at]),
                  let tagEnd = page[at...].firstIndex(of: UInt8(ascii: ">")),
                  let end = find(close, in: page, from: tagEnd + 1) else { continue }
            blocks.append(Array(page[(tagEnd + 1)..<end.lowerBound]))
            at = end.upperBound
        }
        return blocks
    }

    /// Where `needle` first occurs in `haystack` at or after `from`. A plain byte loop: the
    /// standard library's generic `firstRange(of:)` looks up generic metadata at every byte, and
    /// made the first `GET /` after a start take 30-50 ms instead of well under one.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int = 0) -> Range<Int>? {
        guard !needle.isEmpty, from >= 0 else { return nil }
        return haystack.withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                var i = from
                while i + n.count <= h.count {
                    if h[i] == n[0] {
                        var j = 1
                        while j < n.count && h[i + j] == n[j] { j += 1 }
                        if j == n.count { return i..<(i + n.count) }
                    }
                    i += 1
                }
                return nil
            }
        }
    }

    /// Every stylesheet and script of `Resources/web/`, by the name `index.html` uses for it.
    static let files: [String: [UInt8]] = [
        "page.css": PackageResources.page_css,
        "common.js": PackageResources.common_js,
        "pushes.js": PackageResources.pushes_js,
        "compose.css": PackageResources.compose_css,
        "compose.js": PackageResources.compose_js,
        "page.js": PackageResources.page_js,
        "overview.css": PackageResources.overview_css,
        "overview.js": PackageResources.overview_js,
        "previews.css": PackageResources.previews_css,
        "previews.js": PackageResources.previews_js,
        "device.js": PackageResources.device_js,
        "detail.js": PackageResources.detail_js,
        "search.css": PackageResources.search_css,
        "search.js": PackageResources.search_js,
        "clients.css": PackageResources.clients_css,
        "clients.js": PackageResources.clients_js,
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
        guard let range = find(Array(element.utf8), in: page) else {
            preconditionFailure("Resources/web/index.html must contain \(element)")
        }
        var out = page
        out.replaceSubrange(range, with: Array(open.utf8) + content + Array(close.utf8))
        return out
    }
}
