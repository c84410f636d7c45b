import MCSServer
import Protobuf
import XCTest

/// mcs.proto's messages byte for byte (the clients parse these bytes), proto2's required fields,
/// and the framing reader with no socket.
final class MCSMessageTests: XCTestCase {
    func testLoginResponseBytes() {
        let r = LoginResponse(id: "chrome-120.0", lastStreamIDReceived: 1, serverTimestamp: 1_700_000_000_123)
        var expected: [UInt8] = [0x0A, 12] + Array("chrome-120.0".utf8) + [0x30, 0x01, 0x40]
        ProtoWriter.appendVarint(1_700_000_000_123, to: &expected)
        XCTAssertEqual(r.encode(), expected)
        XCTAssertEqual(Array(mcsPacket(r).prefix(2)), [3, UInt8(expected.count)])
        let refused = LoginResponse(id: "x", error: ErrorInfo(code: 401, message: "no"))
        XCTAssertEqual(refused.encode(), [0x0A, 1, 0x78, 0x1A, 7, 0x08, 0x91, 0x03, 0x12, 2, 0x6E, 0x6F])
    }

    func testDataMessageStanzaFieldNumbers() throws {
        let d = DataMessageStanza(id: "i", from: "f", to: "t", category: "c", token: "k", appData: [AppData(key: "a", value: "b")],
                                  fromTrustedServer: true, persistentID: "p", streamID: 5, lastStreamIDReceived: 6, regID: "r",
                                  deviceUserID: 7, ttl: 8, sent: 9, queued: 10, status: 11, rawData: [0xFF], immediateAck: true)
        var r = ProtoReader(d.encode())
        var numbers: [Int] = []
        while let f = try r.next() { numbers.append(f.number) }
        XCTAssertEqual(numbers, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 16, 17, 18, 19, 20, 21, 24])
        XCTAssertEqual(Array(d.encode().suffix(7)), [0xAA, 0x01, 0x01, 0xFF, 0xC0, 0x01, 0x01], "raw_data (21), then immediate_ack (24)")
        XCTAssertEqual(try DataMessageStanza(decoding: d.encode()), d)
    }

    func testEveryPacketRoundTrips() throws {
        let login = LoginRequest(id: "1", domain: "mcs.android.com", user: "2", resource: "2", authToken: "3", deviceID: "android-2",
                                 lastRMQID: 4, settings: [Setting(name: "a", value: "b")], receivedPersistentIDs: ["p1", "p2"],
                                 adaptiveHeartbeat: true, heartbeatStat: HeartbeatStat(ip: "1.2.3.4", timeout: false, intervalMs: 9),
                                 useRMQ2: true, accountID: -5, authService: .androidID, networkType: -1, status: 6)
        XCTAssertEqual(try LoginRequest(decoding: login.encode()), login)
        let response = LoginResponse(id: "1", jid: "j", error: ErrorInfo(code: 1, message: "m", type: "t", extension: Extension(id: 2, data: [3])),
                                     settings: [Setting(name: "n", value: "v")], streamID: 1, lastStreamIDReceived: 2,
                                     heartbeatConfig: HeartbeatConfig(uploadStat: true, ip: "i", intervalMs: 3), serverTimestamp: 4)
        XCTAssertEqual(try LoginResponse(decoding: response.encode()), response)
        let iq = IqStanza(rmqID: 1, type: .result, id: "i", from: "f", to: "t", error: ErrorInfo(code: 2), extension: Extension(id: 13, data: []),
                          persistentID: "p", streamID: 3, lastStreamIDReceived: 4, accountID: 5, status: 6)
        XCTAssertEqual(try IqStanza(decoding: iq.encode()), iq)
        XCTAssertEqual(try HeartbeatPing(decoding: HeartbeatPing(streamID: 1, lastStreamIDReceived: 2, status: 3).encode()),
                       HeartbeatPing(streamID: 1, lastStreamIDReceived: 2, status: 3))
        XCTAssertEqual(try HeartbeatAck(decoding: HeartbeatAck(lastStreamIDReceived: 7).encode()), HeartbeatAck(lastStreamIDReceived: 7))
        XCTAssertEqual(try StreamErrorStanza(decoding: StreamErrorStanza(type: "t", text: "x").encode()), StreamErrorStanza(type: "t", text: "x"))
        XCTAssertEqual(try SelectiveAck(decoding: SelectiveAck(ids: ["a", "b"]).encode()), SelectiveAck(ids: ["a", "b"]))
        XCTAssertEqual(Close().encode(), [])
        XCTAssertEqual(try Close(decoding: [0x08, 0x01]), Close(), "unknown fields are skipped")
    }

    func testRequiredFieldsAreChecked() {
        func missing<M: MCSProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) -> ProtoError? {
            do {
                _ = try M(decoding: bytes)
                return nil
            } catch {
                return error
            }
        }
        var w = ProtoWriter()
        for n in 1...4 { w.string(n, "x") }
        XCTAssertEqual(missing(LoginRequest.self, w.bytes), .missingRequired(message: "LoginRequest", field: "auth_token"))
        var wrongType = w
        wrongType.int64(5, 1)  // auth_token as a varint: unknown to proto2, so still missing
        XCTAssertEqual(missing(LoginRequest.self, wrongType.bytes), .missingRequired(message: "LoginRequest", field: "auth_token"))
        var badSetting = w
        badSetting.string(5, "t")
        badSetting.message(8) { $0.string(1, "name only") }
        XCTAssertEqual(missing(LoginRequest.self, badSetting.bytes), .missingRequired(message: "Setting", field: "value"))
        var badEvent = w
        badEvent.string(5, "t")
        badEvent.bytes(22, [0x08])  // a ClientEvent cut short
        XCTAssertEqual(missing(LoginRequest.self, badEvent.bytes), .truncated)
        XCTAssertEqual(missing(DataMessageStanza.self, [0x1A, 1, 0x66]), .missingRequired(message: "DataMessageStanza", field: "category"))
        XCTAssertEqual(missing(IqStanza.self, [0x10, 0x09, 0x1A, 0]), .missingRequired(message: "IqStanza", field: "type"),
                       "an unknown enum value is no value")
        XCTAssertEqual(missing(StreamErrorStanza.self, []), .missingRequired(message: "StreamErrorStanza", field: "type"))
        XCTAssertEqual(missing(LoginResponse.self, []), .missingRequired(message: "LoginResponse", field: "id"))
        XCTAssertEqual(missing(Extension.self, [0x08, 12]), .missingRequired(message: "Extension", field: "data"))
        XCTAssertNil(missing(HeartbeatPing.self, []))
    }

    func testFrameReaderAtEveryByteBoundary() {
        let stream: [UInt8] = [mcsVersion] + mcsPacket(HeartbeatPing(lastStreamIDReceived: 300)) + mcsPacket(Close())
            + mcsPacket(tag: 8, payload: [UInt8](repeating: 1, count: 200))
        for split in 0...stream.count {
            var r = MCSFrameReader()
            var events: [MCSFrameReader.Event] = []
            r.feed(stream[..<split])
            while let e = r.next() { events.append(e) }
            r.feed(stream[split...])
            while let e = r.next() { events.append(e) }
            XCTAssertEqual(events, [.packet(.heartbeatPing, HeartbeatPing(lastStreamIDReceived: 300).encode()), .packet(.close, []),
                                    .packet(.dataMessageStanza, [UInt8](repeating: 1, count: 200))], "split at \(split)")
        }
    }

    func testFrameReaderRefusals() {
        func first(_ bytes: [UInt8], max: Int = 64 << 10) -> MCSFrameReader.Event? {
            var r = MCSFrameReader(maxPacketBytes: max)
            r.feed(bytes)
            return r.next()
        }
        XCTAssertEqual(first([40]), .failure("version 40, not 41"))
        XCTAssertEqual(first([41, 5]), .failure("unknown tag 5"))
        XCTAssertEqual(first([41, 2, 0x80, 0x80, 0x80, 0x80, 0x80]), .failure("a size varint over 5 bytes"), "judged before a sixth byte")
        XCTAssertNil(first([41, 2, 0x80, 0x80, 0x80, 0x80]), "four bytes so far: more may come")
        XCTAssertEqual(first([41, 4, 0x80, 0x80, 0x80, 0x80, 0x00]), .packet(.close, []), "five bytes are allowed")
        XCTAssertEqual(first([41, 8, 0x81, 0x80, 0x04]), .failure("a packet of 65537 bytes, over 65536"), "judged before the payload")
        XCTAssertNil(first([41, 8, 0x80, 0x80, 0x04]), "65536 bytes are allowed (waiting for them)")
        var r = MCSFrameReader()
        r.feed([7])
        XCTAssertEqual(r.next(), .failure("version 7, not 41"))
        r.feed([41, 4, 0])
        XCTAssertNil(r.next(), "nothing after a failure")
    }

    /// Random streams and damaged messages never crash the reader or the decoders.
    func testFuzzFramesAndMessages() {
        var rng = SystemRandomNumberGenerator()
        let samples: [[UInt8]] = [LoginRequestSample.bytes, DataMessageStanza(from: "f", category: "c", appData: [AppData(key: "k", value: "v")]).encode(),
                                  IqStanza(type: .set, id: "i", extension: Extension(id: 12, data: SelectiveAck(ids: ["x"]).encode())).encode()]
        for round in 0..<20_000 {
            var bytes = samples[round % samples.count]
            for _ in 0..<Int.random(in: 1...3, using: &rng) where !bytes.isEmpty {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            _ = try? LoginRequest(decoding: bytes)
            _ = try? LoginResponse(decoding: bytes)
            _ = try? DataMessageStanza(decoding: bytes)
            _ = try? IqStanza(decoding: bytes)
            _ = try? SelectiveAck(decoding: bytes)
            var r = MCSFrameReader(maxPacketBytes: 256)
            r.feed([41] + (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            while let e = r.next() {
                if case .failure = e { break }
            }
        }
    }
}

private enum LoginRequestSample {
    static let bytes = LoginRequest(id: "1", domain: "mcs.android.com", user: "2", resource: "2", authToken: "3",
                                    settings: [Setting(name: "a", value: "b")], receivedPersistentIDs: ["p"],
                                    heartbeatStat: HeartbeatStat(ip: "i", timeout: true, intervalMs: 1)).encode()
}
