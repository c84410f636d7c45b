import FCMCore
@testable import WebPush
import XCTest

/// The Web Push request rules and error table (docs/spec/webpush.md sections 2 and 3), table by table.
final class WebPushRulesTests: XCTestCase {
    /// Every kind with the status the contract gives it and autopush's errno.
    func testEveryKindHasItsStatusAndErrno() {
        let table: [(WebPushErrorKind, Int, Int)] = [
            (.missingTTL, 400, 111), (.invalidTTL, 400, 112), (.invalidEncoding, 400, 110), (.invalidUrgency, 400, 114),
            (.invalidTopic, 400, 113), (.payloadTooLarge, 413, 104), (.unknownSubscription, 404, 102),
            (.expiredSubscription, 410, 103), (.unregistered, 410, 106), (.unauthorized, 401, 109), (.forbidden, 403, 109),
            (.messageNotFound, 404, 102), (.methodNotAllowed, 405, 999), (.fault, 500, 999),
        ]
        XCTAssertEqual(table.count, WebPushErrorKind.allCases.count)
        for (kind, status, errno) in table {
            XCTAssertEqual(kind.status, status, kind.rawValue)
            XCTAssertEqual(WebPushError(kind, "x").errno, errno, kind.rawValue)
        }
        XCTAssertEqual(WebPushError.fault(status: 429, "x").errno, 201)
        XCTAssertEqual(WebPushError.fault(status: 503, "x").errno, 201)
        XCTAssertEqual(WebPushError.fault(status: 502, "x").errno, 999)
        XCTAssertEqual(WebPushError.fault(status: 502, "x").status, 502)
    }

    func testTheBodyIsExactlyAutopushsShape() {
        XCTAssertEqual(WebPushError(.missingTTL, "no \"TTL\"").body,
                       #"{"code":400,"errno":111,"error":"Bad Request","message":"no \"TTL\""}"#)
        XCTAssertEqual(WebPushError(.expiredSubscription, "gone").body,
                       #"{"code":410,"errno":103,"error":"Gone","message":"gone"}"#)
        XCTAssertEqual(WebPushError.fault(status: 503, "busy").body,
                       #"{"code":503,"errno":201,"error":"Service Unavailable","message":"busy"}"#)
        XCTAssertEqual(WebPushError(.payloadTooLarge, "big").body,
                       #"{"code":413,"errno":104,"error":"Payload Too Large","message":"big"}"#)
    }

    func parse(_ headers: [(String, String)], body: Int = 100) -> Result<WebPushHeaders, WebPushError> {
        do {
            return .success(try WebPushHeaders.parse(headers.map { (name: $0.0, value: $0.1) }, bodyBytes: body))
        } catch {
            return .failure(error)
        }
    }

    func kind(_ headers: [(String, String)], body: Int = 100) -> WebPushErrorKind? {
        if case .failure(let e) = parse(headers, body: body) { return e.kind }
        return nil
    }

    func testTTL() throws {
        let enc = ("Content-Encoding", "aes128gcm")
        let table: [(String?, WebPushErrorKind?, Int64?)] = [
            (nil, .missingTTL, nil), ("", .invalidTTL, nil), ("-1", .invalidTTL, nil), ("1.5", .invalidTTL, nil),
            ("abc", .invalidTTL, nil), ("+5", .invalidTTL, nil), ("0x10", .invalidTTL, nil), ("9999999999999999999", nil, 2_419_200),
            ("99999999999999999999999999999999", nil, 2_419_200),
            ("0", nil, 0), ("60", nil, 60), (" 60 ", nil, 60), ("2419200", nil, 2_419_200), ("2419201", nil, 2_419_200),
            ("999999999999999999", nil, 2_419_200),
        ]
        for (value, error, kept) in table {
            let headers = (value.map { [("TTL", $0)] } ?? []) + [enc]
            XCTAssertEqual(kind(headers), error, value ?? "absent")
            if let kept { XCTAssertEqual(try parse(headers).get().ttl, kept, value ?? "") }
        }
        XCTAssertEqual(try parse([("ttl", "2419201"), enc]).get().sentTTL, 2_419_201)
    }

    func testContentEncodingIsRequiredWithABodyOnly() throws {
        XCTAssertEqual(kind([("TTL", "5")]), .invalidEncoding)
        XCTAssertEqual(kind([("TTL", "5"), ("Content-Encoding", "gzip")]), .invalidEncoding)
        XCTAssertEqual(kind([("TTL", "5"), ("Content-Encoding", "aes128gcm, aesgcm")]), .invalidEncoding)
        XCTAssertEqual(try parse([("TTL", "5"), ("content-encoding", "aes128gcm")]).get().encoding, .aes128gcm)
        XCTAssertEqual(try parse([("TTL", "5"), ("Content-Encoding", "AESGCM")]).get().encoding, .aesgcm)
        XCTAssertNil(try parse([("TTL", "5")], body: 0).get().encoding)
        XCTAssertNil(try parse([("TTL", "5"), ("Content-Encoding", "gzip")], body: 0).get().encoding)
    }

    func testUrgency() throws {
        let base = [("TTL", "5"), ("Content-Encoding", "aes128gcm")]
        for u in ["very-low", "low", "normal", "high", "HIGH"] {
            XCTAssertEqual(try parse(base + [("Urgency", u)]).get().urgency.rawValue, u.lowercased())
        }
        for u in ["", "urgent", "very low", "high, low"] { XCTAssertEqual(kind(base + [("Urgency", u)]), .invalidUrgency, u) }
        let absent = try parse(base).get()
        XCTAssertEqual(absent.urgency, .normal)
        XCTAssertFalse(absent.urgencyGiven)
    }

    func testTopic() throws {
        let base = [("TTL", "5"), ("Content-Encoding", "aes128gcm")]
        for t in ["a", "news", "a-test-topic-which-is-just-right", "A_z-09"] {
            XCTAssertEqual(try parse(base + [("Topic", t)]).get().topic, t)
        }
        for t in ["", "test-topic-which-is-too-long-1234", "a b", "a.b", "a=", "é", "a/b"] {
            XCTAssertEqual(kind(base + [("Topic", t)]), .invalidTopic, t)
        }
    }

    /// The rules run in the contract's order: TTL, Content-Encoding, Urgency, Topic.
    func testOrder() {
        XCTAssertEqual(kind([("Topic", "a b"), ("Urgency", "x"), ("Content-Encoding", "x")]), .missingTTL)
        XCTAssertEqual(kind([("TTL", "1"), ("Topic", "a b"), ("Urgency", "x"), ("Content-Encoding", "x")]), .invalidEncoding)
        XCTAssertEqual(kind([("TTL", "1"), ("Topic", "a b"), ("Urgency", "x"), ("Content-Encoding", "aesgcm")]), .invalidUrgency)
    }

    func testSize() {
        XCTAssertNoThrow(try WebPushHeaders.checkSize(4096, overServerLimit: false))
        XCTAssertThrowsError(try WebPushHeaders.checkSize(4097, overServerLimit: false))
        XCTAssertThrowsError(try WebPushHeaders.checkSize(0, overServerLimit: true))
    }

    func credential(_ auth: String?, _ cryptoKey: String? = nil) -> Result<VAPIDCredential?, WebPushError> {
        do { return .success(try VAPIDCredential.parse(authorization: auth, cryptoKey: cryptoKey)) } catch { return .failure(error) }
    }

    func testBothSpellingsOfTheAuthorization() throws {
        let ok: [(String, String?)] = [
            ("vapid t=a.b.c, k=KEY", nil), ("vapid t=a.b.c,k=KEY", nil), ("Vapid k=KEY, t=a.b.c", nil),
            ("vapid t=\"a.b.c\", k=\"KEY\"", nil), ("  vapid  t=a.b.c , k=KEY  ", nil),
            ("WebPush a.b.c", "p256ecdsa=KEY"), ("webpush a.b.c", "dh=X;p256ecdsa=KEY"), ("WebPush a.b.c", "dh=X,p256ecdsa=KEY"),
            ("WebPush a.b.c", "dh=X; p256ecdsa=KEY"),
        ]
        for (auth, key) in ok {
            let c = try XCTUnwrap(try credential(auth, key).get(), auth)
            XCTAssertEqual(c.token, "a.b.c", auth)
            XCTAssertEqual(c.key, "KEY", auth)
            XCTAssertEqual(c.scheme, auth.lowercased().contains("webpush") ? .webpush : .vapid)
        }
        XCTAssertNil(try credential(nil).get())
        let bad: [(String, String?)] = [
            ("vapid t=a.b.c", nil), ("vapid k=KEY", nil), ("vapid", nil), ("vapid t=, k=KEY", nil), ("Bearer a.b.c", nil),
            ("key=AAAA", nil), ("WebPush a.b.c", nil), ("WebPush a.b.c", "dh=X"), ("", nil),
            ("vapid t=" + String(repeating: "a", count: 9000) + ", k=KEY", nil),
        ]
        for (auth, key) in bad {
            guard case .failure(let e) = credential(auth, key) else { return XCTFail("accepted \(auth.prefix(40))") }
            XCTAssertEqual(e.kind, .unauthorized, String(auth.prefix(40)))
        }
    }

    /// A JWT with the given claims and a 64-byte signature of zeros (the claims rules never look at it).
    func jwt(_ claims: String) throws -> JWT {
        let token = base64URLEncode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8)) + "." + base64URLEncode(Array(claims.utf8)) + "."
            + base64URLEncode([UInt8](repeating: 0, count: 64))
        return try JWT.parse(token, algorithm: .es256, requiringKeyID: false)
    }

    func testClaims() throws {
        let now: Int64 = 1_700_000_000
        let aud = "https://fcm.googleapis.com"
        func check(_ claims: String, audience: String = aud) -> Result<String, WebPushError> {
            do { return .success(try VAPIDClaims.check(try jwt(claims), audience: audience, now: now)) } catch let e as WebPushError {
                return .failure(e)
            } catch { return .failure(WebPushError(.fault, "\(error)")) }
        }
        let good = #"{"aud":"https://fcm.googleapis.com","exp":1700043200,"sub":"mailto:ops@example.com"}"#
        XCTAssertEqual(try check(good).get(), "mailto:ops@example.com")
        XCTAssertEqual(try check(#"{"aud":"https://FCM.googleapis.com/","exp":1700086400,"sub":"https://example.com"}"#).get(),
                       "https://example.com")
        XCTAssertEqual(try check(good, audience: "https://fcm.googleapis.com:443").get(), "mailto:ops@example.com")
        XCTAssertEqual(VAPIDClaims.origin("http://Example.com:80/"), "http://example.com")
        XCTAssertEqual(VAPIDClaims.origin("http://example.com:8080"), "http://example.com:8080")
        XCTAssertEqual(try check(#"{"aud":"http://127.0.0.1:8080","exp":1700000001,"sub":"mailto:a@b"}"#,
                                 audience: "http://127.0.0.1:8080").get(), "mailto:a@b")
        let bad = [
            #"{"exp":1700043200,"sub":"mailto:a@b"}"#,
            #"{"aud":"https://updates.push.services.mozilla.com","exp":1700043200,"sub":"mailto:a@b"}"#,
            #"{"aud":"http://fcm.googleapis.com","exp":1700043200,"sub":"mailto:a@b"}"#,
            #"{"aud":"https://fcm.googleapis.com","sub":"mailto:a@b"}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":"1700043200","sub":"mailto:a@b"}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700000000,"sub":"mailto:a@b"}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700086401,"sub":"mailto:a@b"}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700043200}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700043200,"sub":""}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700043200,"sub":"http://example.com"}"#,
            #"{"aud":"https://fcm.googleapis.com","exp":1700043200,"sub":"ops@example.com"}"#,
        ]
        for claims in bad {
            guard case .failure(let e) = check(claims) else { return XCTFail("accepted \(claims)") }
            XCTAssertEqual(e.kind, .unauthorized, claims)
            XCTAssertEqual(e.status, 401)
        }
    }

    /// The one rule for `aud` and `exp`, which a new JWT and a remembered one both go through:
    /// each boundary, and the exact message of each refusal.
    func testTimelyClaims() {
        let now: Int64 = 1_700_000_000
        let site = "http://127.0.0.1:8080"
        let long = "https://" + String(repeating: "a", count: 80) + ".example"
        let rows: [(aud: String, exp: Int64?, audience: String, refusal: String?)] = [
            (site, now + 1, site, nil),
            (site, now + 86_400, site, nil),
            ("HTTP://127.0.0.1:8080/", now + 60, site, nil),
            ("https://fcm.googleapis.com", now + 60, "https://fcm.googleapis.com:443", nil),
            (site, now, site, "the VAPID JWT expired 0 s ago on the mock's clock"),
            (site, now - 90, site, "the VAPID JWT expired 90 s ago on the mock's clock"),
            (site, now + 86_401, site, "the VAPID JWT's exp is 86401 s ahead: at most 24 hours (86400 s)"),
            (site, nil, site, "the VAPID JWT has no exp of whole seconds"),
            // `aud` is judged first: a wrong one with no `exp` is refused for its `aud`.
            ("https://fcm.googleapis.com", nil, site,
             #"the VAPID JWT's aud "https://fcm.googleapis.com" is not the endpoint's origin http://127.0.0.1:8080"#),
            (long, now + 60, site,
             #"the VAPID JWT's aud ""# + long.prefix(64) + #"…" is not the endpoint's origin http://127.0.0.1:8080"#),
        ]
        for row in rows {
            do throws(WebPushError) {
                try VAPIDClaims.checkTimely(aud: row.aud, exp: row.exp, audience: row.audience, now: now)
                XCTAssertNil(row.refusal, "accepted \(row)")
            } catch {
                XCTAssertEqual(error, WebPushError(.unauthorized, row.refusal ?? "(none)"), "\(row)")
            }
        }
    }

    func testSubscriptionIDs() {
        var rng = SystemRandomNumberGenerator()
        let id = WebPushSubscriptionID.generate(using: &rng)
        XCTAssertEqual(id.count, 86)
        XCTAssertTrue(WebPushSubscriptionID.isWellFormed(id))
        XCTAssertNotEqual(id, WebPushSubscriptionID.generate(using: &rng))
        XCTAssertFalse(WebPushSubscriptionID.isWellFormed(String(repeating: "a", count: 63)))
        XCTAssertTrue(WebPushSubscriptionID.isWellFormed(String(repeating: "a", count: 64)))
        XCTAssertFalse(WebPushSubscriptionID.isWellFormed(String(repeating: "a", count: 63) + "%"))
    }
}
