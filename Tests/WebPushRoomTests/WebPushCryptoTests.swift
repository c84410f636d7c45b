import FCMCore
import XCTest

import TLS
@testable import WebPush

/// Web Push encryption against the RFCs' own examples, both directions, and every reason a body
/// does not decrypt; hostile bodies never crash.
final class WebPushCryptoTests: XCTestCase {
    private func b64(_ s: String) -> [UInt8] { base64URLDecode(Array(s.utf8))! }

    // RFC 8291 Appendix A.
    let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    lazy var uaPrivate = try! P256PrivateKey(rawScalar: b64("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
    lazy var asPrivate = try! P256PrivateKey(rawScalar: b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"))
    lazy var authSecret = b64("BTBZMqHH6r4Tts7J_aSIgg")
    lazy var salt = b64("DGv6ra1nlYgDCS1FRnbzlw")
    lazy var rfc8291Body = b64(
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_y"
            + "l95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")

    func testRFC8291AppendixADecryptsByteForByte() throws {
        XCTAssertEqual(uaPrivate.publicKey.base64URL,
                       "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4")
        XCTAssertEqual(asPrivate.publicKey.base64URL,
                       "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8")
        XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: rfc8291Body, privateKey: uaPrivate, authSecret: authSecret), plaintext)
    }

    func testRFC8291AppendixAEncryptsToItsExactBytes() throws {
        let body = try WebPushCrypto.encrypt(aes128gcm: plaintext, to: uaPrivate.publicKey, authSecret: authSecret,
                                             senderKey: asPrivate, salt: salt)
        XCTAssertEqual(body, rfc8291Body)
        // With fresh keys and salt: another body, the same plaintext.
        let fresh = try WebPushCrypto.encrypt(aes128gcm: plaintext, to: uaPrivate.publicKey, authSecret: authSecret)
        XCTAssertNotEqual(fresh, rfc8291Body)
        XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: fresh, privateKey: uaPrivate, authSecret: authSecret), plaintext)
    }

    /// RFC 8188 §3.1 (one record, rs 4096) and §3.2 (two records of 25 bytes, key id "a1", one
    /// byte of padding), both directions.
    func testRFC8188SectionThreeExamples() throws {
        let walrus = Array("I am the walrus".utf8)
        let one = b64("I1BsxtFttlv3u_Oo94xnmwAAEAAA-NAVub2qFgBEuQKRapoZu-IxkIva3MEB1PD-ly8Thjg")
        let oneKey = b64("yqdlZ-tYemfogSmv7Ws5PQ")
        let decoded = try ContentCoding.decrypt(one, ikm: oneKey)
        XCTAssertEqual(decoded.plaintext, walrus)
        XCTAssertEqual(decoded.keyID, [])
        XCTAssertEqual(try ContentCoding.encrypt(walrus, ikm: oneKey, salt: Array(one[0..<16])), one)

        let two = b64("uNCkWiNYzKTnBN9ji3-qWAAAABkCYTHOG8chz_gnvgOqdGYovxyjuqRyJFjEDyoF1Fvkj6hQPdPHI51OEUKEpgz3SsLWIqS_uA")
        let twoKey = b64("BO3ZVPxUlnLORbVGMpbT1Q")
        let decoded2 = try ContentCoding.decrypt(two, ikm: twoKey)
        XCTAssertEqual(decoded2.plaintext, walrus)
        XCTAssertEqual(decoded2.keyID, Array("a1".utf8))
        XCTAssertEqual(try ContentCoding.encrypt(walrus, ikm: twoKey, salt: Array(two[0..<16]), recordSize: 25,
                                                 keyID: Array("a1".utf8), padding: 1), two)
        XCTAssertThrowsError(try ContentCoding.decrypt(two, ikm: oneKey)) {
            XCTAssertEqual($0 as? WebPushCrypto.Failure, .authenticationFailed(record: 0))
        }
    }

    /// `aesgcm` against a body made by an outside implementation: Python's `cryptography` 48
    /// following the drafts' key schedule, with RFC 8291's keys, auth secret and salt, and three
    /// bytes of padding (made once on 2026-12-03).
    func testAESGCMDecryptsAnOutsideBodyAndRoundTrips() throws {
        let outside = b64("4q9ZRDyG0PD6-sYP4a_bnKwsaTEu4ziWvgxp15xoxUsZajJ8drLqq4a1fjRSp-FGKoQm3bDQlCCVaAvtMEs")
        let dh = "dh=BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        XCTAssertEqual(try WebPushCrypto.decrypt(aesgcm: outside, encryption: "salt=DGv6ra1nlYgDCS1FRnbzlw", cryptoKey: dh,
                                                 privateKey: uaPrivate, authSecret: authSecret), plaintext)
        // The older scheme's Crypto-Key carries the VAPID key too, joined by ";" or ",".
        for cryptoKey in [dh + ";p256ecdsa=BAAA", "p256ecdsa=BAAA," + dh, " " + dh + " ; p256ecdsa=\"x\""] {
            XCTAssertEqual(try WebPushCrypto.decrypt(aesgcm: outside, encryption: "salt=\"DGv6ra1nlYgDCS1FRnbzlw\"; rs=4096",
                                                     cryptoKey: cryptoKey, privateKey: uaPrivate, authSecret: authSecret),
                           plaintext, cryptoKey)
        }
        let mine = try WebPushCrypto.encrypt(aesgcm: plaintext, to: uaPrivate.publicKey, authSecret: authSecret,
                                             senderKey: asPrivate, salt: salt, padding: 3)
        XCTAssertEqual(mine.body, outside)
        XCTAssertEqual(mine.encryption, "salt=DGv6ra1nlYgDCS1FRnbzlw")
        XCTAssertEqual(mine.cryptoKey, dh)
        // Bodies of one, two and three records (4094 bytes of data fill one: an empty one ends it).
        for n in [0, 1, 4093, 4094, 4095, 9000] {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 7) }
            let m = try WebPushCrypto.encrypt(aesgcm: data, to: uaPrivate.publicKey, authSecret: authSecret)
            XCTAssertNotEqual(m.body.count % 4112, 0, "\(n) bytes")
            XCTAssertEqual(try WebPushCrypto.decrypt(aesgcm: m.body, encryption: m.encryption, cryptoKey: m.cryptoKey,
                                                     privateKey: uaPrivate, authSecret: authSecret), data, "\(n) bytes")
        }
    }

    /// Every length and record size round-trips in aes128gcm, padding included.
    func testAES128GCMRoundTrips() throws {
        for (n, rs, padding) in [(0, 4096, 0), (1, 18, 0), (2, 18, 5), (100, 18, 0), (100, 25, 30), (4000, 4096, 50),
                                 (3, 4096, 4000), (8, 25, 0), (16, 25, 0)] {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 13) }
            let body = try WebPushCrypto.encrypt(aes128gcm: data, to: uaPrivate.publicKey, authSecret: authSecret,
                                                 recordSize: UInt32(rs), padding: padding)
            XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: body, privateKey: uaPrivate, authSecret: authSecret), data,
                           "\(n) bytes, rs \(rs), padding \(padding)")
        }
    }

    // MARK: reasons

    private func expect(_ body: [UInt8], _ reason: WebPushCrypto.Failure, _ message: String = "", key: P256PrivateKey? = nil,
                        auth: [UInt8]? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try WebPushCrypto.decrypt(aes128gcm: body, privateKey: key ?? uaPrivate, authSecret: auth ?? authSecret),
                             message, file: file, line: line) {
            XCTAssertEqual($0 as? WebPushCrypto.Failure, reason, message, file: file, line: line)
        }
    }

    private func withRecordSize(_ rs: UInt32, _ body: [UInt8]) -> [UInt8] {
        var b = body
        b[16..<20] = [UInt8(rs >> 24), UInt8(rs >> 16 & 0xff), UInt8(rs >> 8 & 0xff), UInt8(rs & 0xff)]
        return b
    }

    func testHeaderAndKeyFailures() throws {
        expect([], .headerTooShort(0))
        expect(Array(rfc8291Body[0..<20]), .headerTooShort(20))
        expect(Array(rfc8291Body[0..<40]), .headerTooShort(40), "the key id runs past the end")
        expect(Array(rfc8291Body[0..<86]), .truncated(record: 0), "a header and no record")
        expect(withRecordSize(0, rfc8291Body), .recordSizeTooSmall(0))
        expect(withRecordSize(17, rfc8291Body), .recordSizeTooSmall(17))
        // 2^32-1 is a valid size: the one record is shorter, so it is the last, and decrypts.
        XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: withRecordSize(UInt32.max, rfc8291Body), privateKey: uaPrivate,
                                                 authSecret: authSecret), plaintext)
        let shortKeyID = try ContentCoding.encrypt(plaintext, ikm: [1, 2, 3], salt: salt, keyID: Array("a1".utf8))
        expect(shortKeyID, .keyIDLength(2))
        var offCurve = rfc8291Body
        offCurve[21 + 64] ^= 1
        expect(offCurve, .invalidSenderKey)
    }

    func testWrongKeysAndAlteredBytesDoNotAuthenticate() throws {
        expect(rfc8291Body, .authenticationFailed(record: 0), key: try P256PrivateKey())
        expect(rfc8291Body, .authenticationFailed(record: 0), auth: [UInt8](repeating: 0, count: 16))
        for i in [0, 15, 86, 100, rfc8291Body.count - 1] {
            var altered = rfc8291Body
            altered[i] ^= 0x80
            expect(altered, .authenticationFailed(record: 0))
        }
        let two = try WebPushCrypto.encrypt(aes128gcm: [UInt8](repeating: 7, count: 40), to: uaPrivate.publicKey,
                                            authSecret: authSecret, recordSize: 30)
        var secondAltered = two
        secondAltered[86 + 30 + 3] ^= 1
        expect(secondAltered, .authenticationFailed(record: 1))
        // A multi-record body read as one record (its rs raised) fails its tag.
        expect(withRecordSize(UInt32.max, two), .authenticationFailed(record: 0))
    }

    /// Records sealed by hand (the right keys, wrong contents) to reach each padding rule.
    private func sealed(_ records: [[UInt8]], rs: Int) -> [UInt8] {
        WebPushCrypto.sealRecords(records, sender: asPrivate, receiver: uaPrivate.publicKey, authSecret: authSecret, salt: salt,
                                  recordSize: rs)
    }

    func testPaddingRules() throws {
        XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: sealed([Array("ok".utf8) + [2, 0, 0]], rs: 4096), privateKey: uaPrivate,
                                                 authSecret: authSecret), Array("ok".utf8), "the sealing helper is right")
        XCTAssertEqual(try WebPushCrypto.decrypt(aes128gcm: sealed([[7, 7, 1], [8, 2]], rs: 19), privateKey: uaPrivate,
                                                 authSecret: authSecret), [7, 7, 8])
        expect(sealed([[0, 0, 0]], rs: 4096), .badPadding(record: 0), "no delimiter")
        expect(sealed([[]], rs: 4096), .truncated(record: 0), "a tag alone")
        expect(sealed([Array("ok".utf8) + [3]], rs: 4096), .badPadding(record: 0), "an unknown delimiter")
        expect(sealed([Array("ok".utf8) + [1, 0]], rs: 4096), .truncated(record: 0), "the last record says more follows")
        expect(sealed([[7, 7, 2], [8, 2]], rs: 19), .badPadding(record: 0), "a record before the last says it is the last")
        expect(sealed([[7, 7, 1], [8, 1]], rs: 19), .truncated(record: 1))
        expect(sealed([[7, 0, 1], [8, 3]], rs: 19), .badPadding(record: 1))
    }

    func testTruncatedBodies() throws {
        let three = try WebPushCrypto.encrypt(aes128gcm: [UInt8](repeating: 5, count: 30), to: uaPrivate.publicKey,
                                              authSecret: authSecret, recordSize: 30)
        XCTAssertEqual(three.count, 86 + 30 + 30 + 21, "13 + 13 + 4 bytes of data")
        expect(Array(three[0..<(86 + 30)]), .truncated(record: 0), "cut after the first record")
        expect(Array(three[0..<(86 + 60)]), .truncated(record: 1), "cut after the second record")
        expect(Array(three[0..<(86 + 60 + 10)]), .truncated(record: 2), "the last record shorter than a tag")
        expect(Array(three[0..<(86 + 30 + 16)]), .truncated(record: 1), "a tag and no byte")
        expect(Array(three[0..<(86 + 50)]), .authenticationFailed(record: 1), "cut inside a record")
    }

    func testAESGCMFailures() throws {
        let m = try WebPushCrypto.encrypt(aesgcm: plaintext, to: uaPrivate.publicKey, authSecret: authSecret)
        func expectAESGCM(_ body: [UInt8]? = nil, encryption: String?? = nil, cryptoKey: String?? = nil,
                          _ reason: WebPushCrypto.Failure, key: P256PrivateKey? = nil, line: UInt = #line) {
            XCTAssertThrowsError(try WebPushCrypto.decrypt(aesgcm: body ?? m.body, encryption: encryption ?? m.encryption,
                                                           cryptoKey: cryptoKey ?? m.cryptoKey, privateKey: key ?? uaPrivate,
                                                           authSecret: authSecret), line: line) {
                XCTAssertEqual($0 as? WebPushCrypto.Failure, reason, line: line)
            }
        }
        expectAESGCM(encryption: .some(nil), .missingParameter("the Encryption header"))
        expectAESGCM(cryptoKey: .some(nil), .missingParameter("the Crypto-Key header"))
        expectAESGCM(encryption: "rs=4096", .invalidSalt(nil))
        expectAESGCM(encryption: "salt=AAAAAAAAAAA", .invalidSalt(8))
        expectAESGCM(encryption: "salt=!!", .invalidSalt(0))
        expectAESGCM(encryption: m.encryption + ";rs=2", .recordSizeTooSmall(2))
        expectAESGCM(encryption: m.encryption + ";rs=0", .recordSizeTooSmall(0))
        expectAESGCM(encryption: m.encryption + ";rs=4294967296", .invalidRecordSize("4294967296"))
        expectAESGCM(encryption: m.encryption + ";rs=-1", .invalidRecordSize("-1"))
        expectAESGCM(cryptoKey: "p256ecdsa=BAAA", .missingParameter("dh in the Crypto-Key header"))
        expectAESGCM(cryptoKey: "dh=BAAA", .invalidSenderKey)
        expectAESGCM(nil, .authenticationFailed(record: 0), key: try P256PrivateKey())
        // 2^32-1 is a valid size: the body is still one short record, and decrypts.
        XCTAssertEqual(try WebPushCrypto.decrypt(aesgcm: m.body, encryption: m.encryption + ";rs=4294967295", cryptoKey: m.cryptoKey,
                                                 privateKey: uaPrivate, authSecret: authSecret), plaintext)
        expectAESGCM([], .truncated(record: 0))
        expectAESGCM([UInt8](repeating: 0, count: 4112), .truncated(record: 1))
        expectAESGCM([UInt8](repeating: 0, count: 17), .truncated(record: 0))
    }

    /// Mutated and random bodies and headers: each decrypts or fails with a reason, none crashes.
    func testHostileBodiesNeverCrash() throws {
        var rng = SystemRandomNumberGenerator()
        let valid = try WebPushCrypto.encrypt(aes128gcm: [UInt8](repeating: 1, count: 200), to: uaPrivate.publicKey,
                                              authSecret: authSecret, recordSize: 40)
        var outcomes: [String: Int] = [:]
        for _ in 0..<3000 {
            var body = valid
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: body = Array(body.prefix(Int.random(in: 0...body.count, using: &rng)))
            case 1: body[Int.random(in: 0..<body.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 2: body[16..<20] = [UInt8.random(in: 0...255, using: &rng), 0, 0, UInt8.random(in: 0...255, using: &rng)][...]
            case 3: body[20] = UInt8.random(in: 0...255, using: &rng)
            default: body = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            do {
                _ = try WebPushCrypto.decrypt(aes128gcm: body, privateKey: uaPrivate, authSecret: authSecret)
                outcomes["ok", default: 0] += 1
            } catch {
                outcomes[String(describing: error).components(separatedBy: " ").prefix(3).joined(separator: " "), default: 0] += 1
            }
            let header = String(decoding: (0..<Int.random(in: 0...40, using: &rng)).map { _ in
                [UInt8(ascii: "="), UInt8(ascii: ";"), UInt8(ascii: ","), UInt8(ascii: "s"), UInt8(ascii: "A"), UInt8(ascii: "\"")]
                    .randomElement(using: &rng)!
            }, as: UTF8.self)
            _ = try? WebPushCrypto.decrypt(aesgcm: body, encryption: "salt=" + header, cryptoKey: header, privateKey: uaPrivate,
                                           authSecret: authSecret)
        }
        XCTAssertGreaterThan(outcomes.count, 4, "the mutations reach several reasons: \(outcomes)")
    }
}
