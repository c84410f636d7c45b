import CNGHTTP2
import Foundation
import Platform
import XCTest

/// An HTTP/2 client that writes frames by hand (so tests can break the rules on purpose) and
/// reads the server's frames back, decoding header blocks with libnghttp2's HPACK inflater.
final class H2RawClient {
    struct Frame {
        let type: UInt8, flags: UInt8, stream: Int32
        let payload: [UInt8]
        /// GOAWAY's error code, RST_STREAM's error code.
        var errorCode: UInt32 {
            let off = type == 7 ? 4 : 0
            return payload[off..<off + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        var lastStreamID: Int32 { Int32(bitPattern: payload[0..<4].reduce(0) { $0 << 8 | UInt32($1) }) & 0x7fff_ffff }
    }
    static let data: UInt8 = 0, headers: UInt8 = 1, rstStream: UInt8 = 3, settings: UInt8 = 4, ping: UInt8 = 6,
        goAway: UInt8 = 7, windowUpdate: UInt8 = 8, continuation: UInt8 = 9
    static let endStream: UInt8 = 1, endHeaders: UInt8 = 4

    let fd: Int32
    private var inbuf: [UInt8] = []
    private var inflater: OpaquePointer?

    /// Connects, sends the preface and an empty SETTINGS.
    convenience init(port: Int, preface: Bool = true) throws {
        self.init(fd: try ConnectSocket.open(host: "127.0.0.1", port: port, receiveTimeout: 10), preface: preface)
    }

    /// Speaks over `fd` (a connected socket it now owns), sending the preface and an empty
    /// SETTINGS unless told not to.
    init(fd: Int32, preface: Bool = true) {
        self.fd = fd
        nghttp2_hd_inflate_new(&inflater)
        if preface {
            write(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
            frame(Self.settings, 0, 0, [])
        }
    }

    deinit {
        close(fd)
        nghttp2_hd_inflate_del(inflater)
    }

    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    static func frameBytes(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
                UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)] + payload
    }

    @discardableResult
    func frame(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> Bool {
        write(Self.frameBytes(type, flags, stream, payload))
    }

    /// An HPACK integer with an `n`-bit prefix whose high bits are `first`.
    static func integer(_ value: Int, prefix n: Int, first: UInt8) -> [UInt8] {
        let max = (1 << n) - 1
        if value < max { return [first | UInt8(value)] }
        var out = [first | UInt8(max)]
        var v = value - max
        while v >= 128 {
            out.append(UInt8(v % 128 + 128))
            v /= 128
        }
        out.append(UInt8(v))
        return out
    }

    static func string(_ s: [UInt8]) -> [UInt8] { integer(s.count, prefix: 7, first: 0) + s }

    /// A literal field without indexing, new name (RFC 7541 §6.2.2).
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00] + string(Array(name.utf8)) + string(Array(value.utf8))
    }

    /// A literal field with incremental indexing, new name (§6.2.1): it enters the dynamic table.
    static func indexedLiteral(_ name: String, _ value: String) -> [UInt8] {
        [0x40] + string(Array(name.utf8)) + string(Array(value.utf8))
    }

    /// An indexed field (§6.1).
    static func indexed(_ index: Int) -> [UInt8] { integer(index, prefix: 7, first: 0x80) }

    static func request(_ method: String, _ path: String, authority: String = "localhost", extra: [(String, String)] = []) -> [UInt8] {
        var b = literal(":method", method) + literal(":scheme", "http") + literal(":path", path) + literal(":authority", authority)
        for (k, v) in extra { b += literal(k, v) }
        return b
    }

    /// HEADERS for a request on `stream` (END_STREAM unless a body follows), then its DATA.
    func sendRequest(_ stream: Int32, _ method: String, _ path: String, body: [UInt8]? = nil, extra: [(String, String)] = []) {
        frame(Self.headers, Self.endHeaders | (body == nil ? Self.endStream : 0), stream, Self.request(method, path, extra: extra))
        if let body { frame(Self.data, Self.endStream, stream, body) }
    }

    /// The next frame, or nil when the connection ended (or nothing came for the socket's
    /// receive time-out).
    func readFrame() -> Frame? {
        while true {
            if inbuf.count >= 9 {
                let n = Int(inbuf[0]) << 16 | Int(inbuf[1]) << 8 | Int(inbuf[2])
                if inbuf.count >= 9 + n {
                    let sid = Int32(bitPattern: UInt32(inbuf[5] & 0x7f) << 24 | UInt32(inbuf[6]) << 16 | UInt32(inbuf[7]) << 8 | UInt32(inbuf[8]))
                    let f = Frame(type: inbuf[3], flags: inbuf[4], stream: sid, payload: Array(inbuf[9..<9 + n]))
                    inbuf.removeFirst(9 + n)
                    return f
                }
            }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { return nil }
            inbuf += buf[0..<n]
        }
    }

    /// Decodes a header block with the connection's HPACK state.
    func decode(_ block: [UInt8]) -> [(String, String)] {
        decodeNoting(block).map { ($0.0, $0.1) }
    }

    /// `decode`, each field with whether it came as a literal never indexed (RFC 7541 §6.2.3).
    func decodeNoting(_ block: [UInt8]) -> [(String, String, neverIndexed: Bool)] {
        var out: [(String, String, neverIndexed: Bool)] = []
        var rest = block[...]
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let used = rest.withUnsafeBufferPointer {
                nghttp2_hd_inflate_hd2(inflater, &nv, &flags, $0.baseAddress, $0.count, 1)
            }
            if used < 0 { return out }
            rest = rest.dropFirst(used)
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                out.append((String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                            String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self),
                            nv.flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0))
            }
            if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                nghttp2_hd_inflate_end_headers(inflater)
                return out
            }
            if used == 0 && rest.isEmpty { return out }
        }
    }

    /// One answer: status, headers and body, per stream.
    struct Answer {
        var status = 0
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var reset: UInt32?
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Reads frames until `streams` are all complete (or reset); other frames are kept in
    /// `others`. Sends WINDOW_UPDATEs as DATA arrives so large answers flow.
    func collect(_ streams: Set<Int32>, others: inout [Frame]) -> [Int32: Answer] {
        var answers: [Int32: Answer] = [:]
        var done = Set<Int32>()
        while !streams.isSubset(of: done), let f = readFrame() {
            switch f.type {
            case Self.headers:
                var a = answers[f.stream] ?? Answer()
                a.headers += decode(f.payload)
                a.status = Int(a.headers.first { $0.0 == ":status" }?.1 ?? "") ?? a.status
                answers[f.stream] = a
                if f.flags & Self.endStream != 0 { done.insert(f.stream) }
            case Self.data:
                answers[f.stream, default: Answer()].body += f.payload
                if !f.payload.isEmpty {
                    let inc = Self.uint32(UInt32(f.payload.count))
                    frame(Self.windowUpdate, 0, 0, inc)
                    frame(Self.windowUpdate, 0, f.stream, inc)
                }
                if f.flags & Self.endStream != 0 { done.insert(f.stream) }
            case Self.rstStream:
                answers[f.stream, default: Answer()].reset = f.errorCode
                done.insert(f.stream)
            case Self.settings where f.flags & 1 == 0:
                frame(Self.settings, 1, 0, [])
                others.append(f)
            default:
                others.append(f)
            }
        }
        return answers
    }

    func collect(_ streams: Set<Int32>) -> [Int32: Answer] {
        var ignored: [Frame] = []
        return collect(streams, others: &ignored)
    }

    /// Reads until a GOAWAY (returned) or the end of the connection (nil).
    func readUntilGoAway() -> Frame? {
        while let f = readFrame() {
            if f.type == Self.goAway { return f }
        }
        return nil
    }

    static func uint32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
}
