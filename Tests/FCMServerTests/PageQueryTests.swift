import FCMCore
import FCMTesting
import Foundation
import HTTPServer
import XCTest

/// The control API's queries for the web page a tester scans (issue 25): recipient counts and
/// totals on the message list, words, `app` and `not_…` exclusions, device search with a total,
/// and the sends/errors series of `GET /api/v1/stats/series`; through the real server.
final class PageQueryTests: ServerTestCase {
    func ids(_ path: String) throws -> [String] {
        let r = try client.get(path)
        XCTAssertEqual(r.status, 200, r.text)
        return items(r).compactMap { $0["message_id"]?.stringValue }
    }

    func send(_ json: String, key: String = "key-111") throws -> String {
        let r = try client.sendJSON(json, key: key)
        XCTAssertTrue(r.status == 200 || r.status == 401 || r.status == 400, r.text)
        let list = try client.get("/api/v1/messages?limit=1")
        return items(list).first?["message_id"]?.stringValue ?? ""
    }

    func testRecipientCountsAndTheCappedTotal() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        let multicast = try send(#"{"registration_ids":["a1","a-offline","a2","ios-ok"],"data":{"k":"v"}}"#)
        _ = try send(#"{"to":"a1"}"#, key: "wrong")
        let r = try client.get("/api/v1/messages?recipient_counts=true&total=true&limit=1")
        XCTAssertEqual(r.status, 200)
        // The list's own fields come first, then the total; each record says its counts.
        XCTAssertTrue(r.text.hasSuffix(#""total":2,"total_capped":false}"#), r.text)
        let refused = items(r)[0]
        XCTAssertEqual(refused["recipient_counts"]?.serialized(), "{}")
        let one = try client.get("/api/v1/messages/\(pathEncode(multicast))?recipient_counts=true&recipients=1")
        XCTAssertTrue(one.text.contains(#""recipients_total":4,"recipient_counts":{"delivered":2,"failed":1,"pending":1}}"#), one.text)
        // A held message past its TTL counts as expired before the sweep writes it so.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":2419201}"#).status, 200)
        let later = try client.get("/api/v1/messages/\(pathEncode(multicast))?recipient_counts=true")
        XCTAssertTrue(later.text.contains(#""recipient_counts":{"delivered":2,"expired":1,"failed":1}"#), later.text)
        // Counted up to a cap: `total=N` chooses it; a first page that is the whole answer needs no count.
        for i in 0..<3 { _ = try send(#"{"to":"a1","data":{"i":"\#(i)"}}"#) }
        XCTAssertTrue(try client.get("/api/v1/messages?total=3&limit=1").text.hasSuffix(#""total":3,"total_capped":true}"#))
        XCTAssertTrue(try client.get("/api/v1/messages?total=true&limit=2").text.hasSuffix(#""total":5,"total_capped":false}"#))
        XCTAssertTrue(try client.get("/api/v1/messages?total=true&limit=10").text.hasSuffix(#""total":5,"total_capped":false}"#))
        XCTAssertEqual(try client.get("/api/v1/messages?total=0").status, 400)
        XCTAssertEqual(try client.get("/api/v1/messages?total=100001").status, 400)
        // Without the flags the answer is as it always was.
        XCTAssertFalse(try client.get("/api/v1/messages").text.contains("total"))
        XCTAssertEqual(try client.get("/api/v1/messages?total=maybe").status, 400)
    }

    func testWordsPhrasesAndErrorsIgnoreCase() throws {
        let sale = try send(#"{"to":"a1","notification":{"title":"Summer SALE","body":"Big savings today"}}"#)
        let data = try send(#"{"to":"a1","data":{"coupon":"SALE-2024","note":"big   savings"}}"#)
        let other = try send(#"{"to":"a1","notification":{"title":"Hello"}}"#)
        let refused = try send(#"{"to":"a1"}"#, key: "wrong")
        XCTAssertEqual(try ids("/api/v1/messages?text=sale"), [data, sale])
        XCTAssertEqual(try ids("/api/v1/messages?text=" + pathEncode(#""big savings""#)), [sale])
        XCTAssertEqual(try ids("/api/v1/messages?text=" + pathEncode("sale summer")), [sale])
        XCTAssertEqual(try ids("/api/v1/messages?text=sale&not_text=summer"), [data])
        // The record's error is searched too: any case finds `Unauthorized`.
        XCTAssertEqual(try ids("/api/v1/messages?text=unauthorized"), [refused])
        XCTAssertEqual(try ids("/api/v1/messages?not_text=" + pathEncode(#"sale "Unauthorized""#)), [other])
        // Data keys are words too.
        XCTAssertEqual(try ids("/api/v1/messages?text=coupon"), [data])
        let tooMany = try client.get("/api/v1/messages?text=" + pathEncode(Array(repeating: "w", count: 17).joined(separator: " ")))
        XCTAssertEqual(tooMany.status, 400)
        XCTAssertEqual(tooMany.object?["error"]?.objectValue?["code"]?.stringValue, "bad_request", tooMany.text)
    }

    func testExclusionsAndApp() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        let ok = try send(#"{"to":"a1","data":{"k":"v"}}"#)
        let ios = try send(#"{"to":"ios-ok","notification":{"title":"t"}}"#)
        let gone = try send(#"{"to":"a2"}"#)
        let bad = try send(#"{"to":"not a token"}"#)
        let denied = try send(#"{"to":"a1"}"#, key: "wrong")
        XCTAssertEqual(try ids("/api/v1/messages?not_status=rejected"), [ios, ok])
        XCTAssertEqual(try ids("/api/v1/messages?status=rejected&not_error=NotRegistered,Unauthorized"), [bad])
        XCTAssertEqual(try ids("/api/v1/messages?status=rejected&not_error=unauthorized"), [denied, bad, gone])
        XCTAssertEqual(try ids("/api/v1/messages?not_token=a1&not_status=rejected"), [ios])
        XCTAssertEqual(try ids("/api/v1/messages?app=com.a.ios"), [ios])
        XCTAssertEqual(try ids("/api/v1/messages?not_app=com.a&not_status=rejected"), [ios])
        // A key no project owns: the refused record has no sender id, so it is not project 111's.
        XCTAssertEqual(try ids("/api/v1/messages?not_sender_id=111"), [denied])
        XCTAssertEqual(try ids("/api/v1/messages?not_transport=http"), [])
        // Records whose column is NULL (no error, no package name) are kept by an exclusion.
        XCTAssertEqual(try ids("/api/v1/messages?not_error=NotRegistered&not_status=rejected"), [ios, ok])
        let wrong = try client.get("/api/v1/messages?not_status=lost")
        XCTAssertEqual(wrong.status, 400)
        XCTAssertTrue(wrong.text.contains("not_status must list statuses"), wrong.text)
        XCTAssertEqual(try client.get("/api/v1/messages?not_transport=smtp").status, 400)
    }

    /// `transport=apns` (the page's `transport:apns` chip) and its exclusion find the sends of
    /// Apple's provider API: here one refused for its missing provider token, sent over h2c.
    func testTheTransportFilterTakesAPNs() throws {
        let fcm = try send(#"{"to":"a1","data":{"k":"v"}}"#)
        let curl = try runProcess(try HTTP2Tests.tool("curl"), ["-sS", "--max-time", "20", "--http2-prior-knowledge",
                                  "-H", "apns-topic: com.a.ios", "--data-binary", #"{"aps":{"alert":"hi"}}"#,
                                  "http://127.0.0.1:\(server.port)/3/device/\(String(repeating: "ab", count: 32))"])
        XCTAssertEqual(curl.stdout, #"{"reason":"MissingProviderToken"}"#, curl.stderr)
        let apns = try ids("/api/v1/messages?transport=apns")
        XCTAssertEqual(apns.count, 1)
        XCTAssertEqual(try ids("/api/v1/messages?not_transport=apns"), [fcm])
        XCTAssertEqual(try ids("/api/v1/messages?not_transport=http"), apns)
        let wrong = try client.get("/api/v1/messages?transport=smtp")
        XCTAssertEqual(wrong.status, 400)
        XCTAssertTrue(wrong.text.contains("transport must be http, http_v1, xmpp, apns or webpush"), wrong.text)
        XCTAssertTrue(try client.get("/api/v1/messages?not_transport=smtp").text.contains("not_transport must list http, http_v1, xmpp, apns or webpush"))
    }

    /// A search reads the store a slice of records at a time (`Engine.searchSlice`), so sends are
    /// not held up by one that passes over everything: what it finds, its pages and its total are
    /// the same across the slices' ends.
    func testASearchOverManySlicesFindsPagesAndCountsAcrossTheirEnds() throws {
        let slice = 2_000
        let count = 2 * slice + 500
        // The marked records: the newest, the oldest, and the three around each slice's end.
        let marked: Set<Int> = [0, 1, count - slice - 1, count - slice, count - slice + 1,
                                count - 2 * slice - 1, count - 2 * slice, count - 2 * slice + 1, count - 1]
        var markedIDs: [String] = []
        for i in 0..<count {
            let word = marked.contains(i) ? "needle" : "filler"
            let r = try client.sendJSON(#"{"to":"a1","data":{"w":"\#(word)","i":"\#(i)"}}"#, key: "key-111")
            XCTAssertEqual(r.status, 200, r.text)
            if marked.contains(i) { markedIDs.append(try XCTUnwrap(items(try client.get("/api/v1/messages?limit=1")).first?["message_id"]?.stringValue)) }
        }
        let newestFirst = Array(markedIDs.reversed())
        XCTAssertEqual(try ids("/api/v1/messages?text=needle&limit=100"), newestFirst)
        XCTAssertEqual(try ids("/api/v1/messages?not_text=filler&limit=100"), newestFirst)
        // Two at a time, by the cursor, with the total on every page.
        var seen: [String] = []
        var cursor = ""
        for _ in 0..<10 {
            let r = try client.get("/api/v1/messages?text=needle&limit=2&total=true" + (cursor.isEmpty ? "" : "&cursor=\(cursor)"))
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertTrue(r.text.hasSuffix(#""total":\#(marked.count),"total_capped":false}"#), r.text)
            seen += items(r).compactMap { $0["message_id"]?.stringValue }
            guard let next = r.object?["next"]?.stringValue else { break }
            cursor = next
        }
        XCTAssertEqual(seen, newestFirst)
        // Counted up to a cap that falls in the second slice; found nowhere: an empty page.
        XCTAssertTrue(try client.get("/api/v1/messages?text=filler&limit=1&total=3000").text.hasSuffix(#""total":3000,"total_capped":true}"#))
        XCTAssertTrue(try client.get("/api/v1/messages?text=filler&limit=1&total=5000").text
            .hasSuffix(#""total":\#(count - marked.count),"total_capped":false}"#))
        XCTAssertEqual(try ids("/api/v1/messages?text=nowhere"), [])
        XCTAssertEqual(try ids("/api/v1/messages?limit=100").count, 100)
    }

    func testDeviceSearchPagesAndCounts() throws {
        // Searched without regard to case (fids are random base64url: no "." in them).
        let r = try client.get("/api/v1/devices?q=COM.A.IOS&total=true")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(items(r).compactMap { $0["token"]?.stringValue }, ["ios-ok", "ios-nocred"])
        XCTAssertTrue(r.text.hasSuffix(#""next":null,"total":2,"total_capped":false}"#), r.text)
        // Paged: the total is of every match, whichever page.
        let first = try client.get("/api/v1/devices?q=com.a&total=true&limit=2")
        XCTAssertTrue(first.text.hasSuffix(#""total":5,"total_capped":false}"#), first.text)
        let cursor = first.object?["next"]?.stringValue ?? ""
        let second = try client.get("/api/v1/devices?q=com.a&total=true&limit=2&cursor=\(cursor)")
        XCTAssertEqual(items(second).compactMap { $0["token"]?.stringValue }, ["ios-ok", "ios-nocred"])
        XCTAssertTrue(second.text.hasSuffix(#""total":5,"total_capped":false}"#), second.text)
        XCTAssertEqual(items(try client.get("/api/v1/devices?q=com.b")).compactMap { $0["token"]?.stringValue }, ["b1"])
        XCTAssertEqual(try client.get("/api/v1/devices?q=" + String(repeating: "x", count: 201)).status, 400)
    }

    func testSeriesCountsSendsAndErrorsPerBucket() throws {
        XCTAssertEqual(try client.post("/api/v1/devices/a2:unregister").status, 200)
        _ = try send(#"{"to":"a1"}"#)
        _ = try send(#"{"registration_ids":["a1","a2","a2"]}"#)  // accepted, two errors
        _ = try send(#"{"to":"a1"}"#, key: "wrong")  // refused: one error
        let r = try client.get("/api/v1/stats/series?window=60&bucket=10")
        XCTAssertEqual(r.status, 200, r.text)
        let s = try XCTUnwrap(r.object)
        let sends = s["sends"]?.arrayValue?.compactMap { $0.numberValue?.int64 } ?? []
        let errors = s["errors"]?.arrayValue?.compactMap { $0.numberValue?.int64 } ?? []
        XCTAssertEqual(sends.count, 6)
        XCTAssertEqual(sends.reduce(0, +), 3)
        XCTAssertEqual(errors.reduce(0, +), 3)
        XCTAssertEqual(s["window"]?.numberValue?.int64, 60)
        XCTAssertEqual(s["bucket"]?.numberValue?.int64, 10)
        let start = try XCTUnwrap(parseRFC3339(s["start"]?.stringValue ?? ""))
        let end = try XCTUnwrap(parseRFC3339(s["end"]?.stringValue ?? ""))
        XCTAssertEqual(end - start, 60_000)
        // The newest bucket holds them (they were sent just now, on the mock's clock).
        XCTAssertEqual(sends.last, 3, r.text)
        // The window follows the mock's clock: two minutes on, the last minute had nothing.
        XCTAssertEqual(try client.post("/api/v1/clock", #"{"advance_s":120}"#).status, 200)
        let later = try XCTUnwrap(try client.get("/api/v1/stats/series?window=60&bucket=10").object)
        XCTAssertEqual(later["sends"]?.arrayValue?.compactMap { $0.numberValue?.int64 }.reduce(0, +), 0)
        let hour = try XCTUnwrap(try client.get("/api/v1/stats/series?window=3600&bucket=60").object)
        XCTAssertEqual(hour["sends"]?.arrayValue?.compactMap { $0.numberValue?.int64 }.reduce(0, +), 3)
        for bad in ["window=0", "window=3601", "window=600&bucket=7", "window=3600&bucket=1", "bucket=x"] {
            let b = try client.get("/api/v1/stats/series?" + bad)
            XCTAssertEqual(b.status, 400, bad)
            XCTAssertEqual(b.object?["error"]?.objectValue?["code"]?.stringValue, "bad_request", b.text)
        }
        // A reset clears the history with the counters.
        XCTAssertEqual(try client.post("/api/v1/reset").status, 204)
        let reset = try XCTUnwrap(try client.get("/api/v1/stats/series?window=3600&bucket=60").object)
        XCTAssertEqual(reset["sends"]?.arrayValue?.compactMap { $0.numberValue?.int64 }.reduce(0, +), 0)
    }

    /// Runs `body` against a server on the store file `db`, stopped afterwards.
    func onStore(_ db: String, _ body: (HTTPTestClient) throws -> Void) throws {
        let s = try TestServer(fixtures: [errorTableFixture], db: db)
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        try body(c)
    }

    func testARestartKeepsTheSeries() throws {
        let db = try temporaryDirectory("series") + "/s.sqlite"
        let sums = { (c: HTTPTestClient) throws -> [Int64?] in
            let o = try XCTUnwrap(try c.get("/api/v1/stats/series?window=3600&bucket=60").object)
            return ["sends", "errors"].map { o[$0]?.arrayValue?.compactMap { $0.numberValue?.int64 }.reduce(0, +) }
        }
        try onStore(db) { c in
            XCTAssertEqual(try c.post("/api/v1/devices/a2:unregister").status, 200)
            XCTAssertNil(singleError(try c.sendJSON(#"{"to":"a1"}"#)))
            XCTAssertEqual(results(try c.sendJSON(#"{"registration_ids":["a1","a2"]}"#)).count, 2)
            XCTAssertEqual(try c.sendJSON(#"{"to":"a1"}"#, key: "wrong").status, 401)
            XCTAssertEqual(try sums(c), [3, 2])
        }
        // Started again on the same file: the last hour is counted from the store.
        try onStore(db) { c in XCTAssertEqual(try sums(c), [3, 2]) }
    }

    func testTheSeriesNeedsTheControlToken() throws {
        let s = try TestServer(fixtures: [errorTableFixture], extraArguments: ["--control-token", "sesame"])
        defer { s.stop() }
        let c = s.client()
        defer { c.disconnect() }
        XCTAssertEqual(try c.get("/api/v1/stats/series").status, 401)
        XCTAssertEqual(try c.get("/api/v1/messages?text=x&total=true").status, 401)
    }
}
