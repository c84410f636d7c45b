"""What the scanning tests of the web page (test_webpage_scan.py) share: a store of 150 mixed
messages as a tester makes them, and measures of the page taken in the browser (rows on the
screen, row heights, words broken, computed contrast of every visible text)."""

import json

from mocksupport import APP_A, KEY_A, PROJECT_A, SENDER_A, fcm_token

DESKTOP = {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
HOSTILE = "<img src=x onerror=alert(1)>"


def send(mock, body, key=KEY_A):
    return mock.http.post(mock.base_url + "/fcm/send", headers={"Authorization": "key=" + key}, json=body, timeout=10)


_ACCESS = {}


def send_v1(mock, message):
    if mock.base_url not in _ACCESS:
        _ACCESS[mock.base_url] = mock.api("POST", f"/api/v1/projects/{SENDER_A}/access-tokens", expect=201)["access_token"]
    token = _ACCESS[mock.base_url]
    return mock.http.post(f"{mock.base_url}/v1/projects/{PROJECT_A}/messages:send",
                          headers={"Authorization": "Bearer " + token}, json={"message": message}, timeout=10)


def seed(mock, topic, fans=120):
    """150 mixed sends (notifications, data, v1, multicasts, refused ones, an offline device's),
    then one topic send reaching `fans` devices. Returns what the tests look for."""
    tokens = [mock.create_device() for _ in range(6)]
    offline = mock.create_device(online=False)
    gone = mock.create_device()
    mock.api("POST", f"/api/v1/devices/{gone}:unregister")
    sent = 0
    for i in range(150):
        kind = i % 10
        t = tokens[i % len(tokens)]
        if kind == 0:
            r = send(mock, {"to": t, "notification": {"title": f"Summer SALE {i}", "body": "Forty per cent off every hat"}})
        elif kind == 1:
            r = send(mock, {"to": t, "data": {"order_id": str(i), "state": "shipped"}})
        elif kind == 2:
            r = send(mock, {"registration_ids": tokens[:5], "notification": {"title": "Multicast", "body": f"to five {i}"}})
        elif kind == 3:
            r = send(mock, {"to": t}, key="wrong-key")  # 401: Unauthorized
        elif kind == 4:
            r = send(mock, {"to": "not a token " + str(i), "data": {"k": "v"}})  # InvalidRegistration
        elif kind == 5:
            r = send(mock, {"to": gone, "data": {"k": "v"}})  # NotRegistered
        elif kind == 6:
            r = send_v1(mock, {"token": t, "notification": {"title": f"v1 hello {i}", "body": "from HTTP v1"},
                               "android": {"notification": {"color": "#ff0000"}}})
        elif kind == 7:
            r = send(mock, {"to": offline, "notification": {"title": "Held", "body": "for an offline device"}})
        elif kind == 8:
            r = send(mock, {"to": "/topics/weather-" + str(i % 3), "data": {"temp": "21"}})
        else:
            r = send(mock, {"to": t, "notification": {"title": HOSTILE, "body": "<script>alert(2)</script>"}})
        sent += 1
        assert r.status_code in (200, 400, 401), r.text
    fans_tokens = []
    for _ in range(fans):
        f = mock.create_device()
        mock.subscribe(f, topic)
        fans_tokens.append(f)
    r = send(mock, {"to": "/topics/" + topic, "notification": {"title": "To every fan", "body": "kick-off at eight"}})
    assert r.status_code == 200, r.text
    record = mock.api("GET", "/api/v1/messages?topic=" + topic)["items"][0]
    return {"tokens": tokens, "offline": offline, "gone": gone, "fans": fans_tokens, "topic_message": record["message_id"]}


def set_scheme(browser, scheme, size):
    browser.command("Emulation.setDeviceMetricsOverride", size)
    browser.command("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


def client_badge(page, token):
    """A device row's real-client badge (real-clients.md §4.4): its name, dot classes and title;
    None for a fake device."""
    return page.eval(f"""(() => {{ const b = document.querySelector('#devices tr[data-token={js(token)}] .client-badge');
        return b && {{name: b.querySelector('.client-name').textContent, dot: b.querySelector('.client-dot').className,
                     title: b.title}}; }})()""")


def listed_client(page, client_id):
    """The Clients list's line of client `client_id` once it shows: its name and text."""
    li = f"#clients li[data-id={js(client_id)}]"
    page.wait_for(f"!!document.querySelector({js(li)})", what=f"client {client_id} in the Clients list")
    return {"name": page.eval(f"document.querySelector({js(li + ' .client-name')}).textContent"),
            "text": page.eval(f"document.querySelector({js(li)}).textContent")}


def open_page(browser, url):
    browser.command("Page.navigate", {"url": url})
    browser.wait_for("document.readyState === 'complete' && document.getElementById('messages').dataset.loaded === 'true'",
                     what="the message list to load")


def row_figures(browser):
    """Rows wholly on the first screen, the tallest row, the line height, and cells whose text
    may wrap or break inside a word."""
    return browser.eval("""(() => {
        window.scrollTo(0, 0);
        const rows = [...document.querySelectorAll('#messages tbody tr.message')];
        const hs = rows.map(r => r.getBoundingClientRect().height);
        const onScreen = rows.filter(r => { const b = r.getBoundingClientRect(); return b.top >= 0 && b.bottom <= innerHeight; }).length;
        const line = parseFloat(getComputedStyle(document.querySelector('#messages td.what') || document.body).lineHeight) || 18;
        const breaking = [...document.querySelectorAll('#messages td, #devices td, #devices th, #messages th')].filter(td => {
            const s = getComputedStyle(td);
            return s.wordBreak === 'break-all' || s.overflowWrap === 'anywhere' || s.overflowWrap === 'break-word';
        }).map(td => td.className || td.tagName);
        return {rows: rows.length, onScreen, tallest: Math.max(0, ...hs), line, breaking};
    })()""")


CONTRAST_JS = """(() => {
    // Every visible text's colour against what is drawn behind it (backgrounds composited up
    // the tree, opacity included), as WCAG 2 computes contrast.
    const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return [0, 0, 0, 0];
        const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
    const lum = ([r, g, b]) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
    const over = (top, under) => { const a = top[3]; return [top[0] * a + under[0] * (1 - a), top[1] * a + under[1] * (1 - a), top[2] * a + under[2] * (1 - a), 1]; };
    function background(e) {
        const layers = [];
        for (let x = e; x; x = x.parentElement) {
            const s = getComputedStyle(x);
            const c = parse(s.backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let bg = parse(getComputedStyle(document.documentElement).backgroundColor);
        if (bg[3] < 1) bg = matchMedia('(prefers-color-scheme: dark)').matches ? [18, 18, 18, 1] : [255, 255, 255, 1];
        for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
        return bg;
    }
    function opacity(e) { let o = 1; for (let x = e; x; x = x.parentElement) o *= Number(getComputedStyle(x).opacity); return o; }
    const out = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
        const n = walker.currentNode;
        if (!n.textContent.trim()) continue;
        const e = n.parentElement;
        if (!e || seen.has(e) || e.closest('script, style, title, .sr, svg, button:disabled, [aria-disabled=true]')) continue;  // disabled controls: exempt (WCAG 1.4.3)
        seen.add(e);
        const r = e.getBoundingClientRect();
        if (e.getClientRects().length === 0 || r.width === 0 || r.height === 0) continue;
        if (r.bottom < 0 || r.top > innerHeight || r.right < 0 || r.left > innerWidth) continue;
        const s = getComputedStyle(e);
        if (s.visibility !== 'visible') continue;
        const hit = document.elementFromPoint(Math.min(innerWidth - 1, Math.max(0, r.left + 2)), Math.min(innerHeight - 1, Math.max(0, r.top + r.height / 2)));
        if (hit && !(hit === e || e.contains(hit) || hit.contains(e))) continue;  // covered
        const bg = background(e);
        const a = opacity(e);
        let fg = parse(s.color);
        fg = over([fg[0], fg[1], fg[2], fg[3] * a], bg);
        const l1 = lum(fg), l2 = lum(bg);
        const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
        const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
        const large = size >= 24 || (bold && size >= 18.66);
        out.push({text: n.textContent.trim().slice(0, 40), where: (e.id || e.className || e.tagName) + '', ratio: Math.round(ratio * 100) / 100, need: large ? 3 : 4.5});
    }
    return out;
})()"""


def contrast(browser):
    """[{text, where, ratio, need}] for every visible text."""
    return browser.eval(CONTRAST_JS)


def js(value):
    return json.dumps(value)


def assert_readable(page):
    """Every visible text at its contrast (4.5:1, 3:1 for large text) and no sideways scrolling."""
    low = [c for c in contrast(page) if c["ratio"] < c["need"]]
    assert low == [], low[:5]
    assert page.eval("document.documentElement.scrollWidth <= innerWidth")


def assert_rows_fit(page, phone, line=None):
    """One line per message (two on a phone; `line` the text's line height when the first row's
    is not it), no cell that may break a word, every visible text readable."""
    figs = row_figures(page)
    assert figs["tallest"] < ((2 if phone else 1) + 1) * (line or figs["line"]), figs
    assert figs["breaking"] == []
    assert_readable(page)


def chip(page, text):
    """Types `text` in the search box and presses Enter (real keys)."""
    page.click("#filter")
    page.command("Input.insertText", {"text": text})
    page.press("Enter")


def wait_rows(page, ids, what):
    """Waits until the message list is exactly `ids`, in that order."""
    page.wait_for(f"[...document.querySelectorAll('#messages tbody tr.message')].map(r => r.dataset.id).join() === {js(','.join(ids))}",
                  what=what)


def open_detail(page, base_url, message_id):
    """The detail of `message_id` by its link, once drawn (a panel still open shows the one before)."""
    import urllib.parse
    page.command("Page.navigate", {"url": base_url + "/#message=" + urllib.parse.quote(message_id, safe="")})
    page.wait_for(f"(document.getElementById('detail') || {{dataset: {{}}}}).dataset.id === {js(message_id)} && !!document.querySelector('#detail .detail-tabs')",
                  what="the detail")


def detail_facts(page, tab):
    """The `dt`/`dd` pairs of a detail tab, in order."""
    return page.eval(f"""[...document.querySelectorAll('#detail .tab-panel[data-tab={tab}] dl.facts dt')]
        .map(dt => [dt.textContent, dt.nextElementSibling.textContent])""")


def row_cells(page):
    """{message id: its cells' texts}: `target` as shown and `full` (its hover), `what` and the
    classes of that cell as `what_class`."""
    return page.eval("""Object.fromEntries([...document.querySelectorAll('#messages tbody tr.message')].map(r => [r.dataset.id, {
        via: r.querySelector('td.via').textContent, target: r.querySelector('td.target').textContent,
        full: r.querySelector('td.target').title, what: r.querySelector('td.what').textContent,
        what_class: r.querySelector('td.what').className,
        recip: r.querySelector('td.recip').textContent, mark: r.querySelector('td.mark').textContent}]))""")


def chip_finds_what_the_api_does(page, mock, term, name, value):
    """Makes `term` (`transport:apns`) a chip on a page with none and checks its label, the URL's
    `name=value` and that the list is the API's answer to that query; the ids."""
    chip(page, term)
    page.wait_for("document.querySelectorAll('#chips li').length === 1", what="the chip")
    assert page.eval("document.querySelector('#chips .chip-label').textContent") == term
    assert f"{name}={value}" in page.eval("location.search")
    want = [m["message_id"] for m in mock.api("GET", f"/api/v1/messages?{name}={value}&limit=50")["items"]]
    wait_rows(page, want, term)
    return want


def assert_markup_stays_text(page, base_url, message_id, what, card):
    """A message whose title is HOSTILE: its list line reads `what`, its Previews card (`card`, a
    selector) has that title, nothing in the list or the detail became an element. Returns the
    Request tab's text."""
    set_scheme(page, "light", DESKTOP)
    open_page(page, base_url + "/")
    assert row_cells(page)[message_id]["what"] == what
    open_detail(page, base_url, message_id)
    page.click("#detail .detail-tabs button[data-tab=Previews]")
    page.wait_for(f"!!document.querySelector({js('#detail ' + card)})", what="the preview")
    assert page.eval(f"document.querySelector({js('#detail ' + card + ' .pv-title')}).textContent") == HOSTILE
    assert page.eval("document.querySelectorAll('#messages img, #messages script, #detail img, #detail script').length") == 0
    page.click("#detail .detail-tabs button[data-tab=Request]")
    return page.eval("document.querySelector('#detail .tab-panel[data-tab=Request] pre').textContent")
