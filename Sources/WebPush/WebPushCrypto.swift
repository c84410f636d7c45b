// Web Push message encryption, both directions: RFC 8291 over RFC 8188's `aes128gcm` content
// coding, and the older `aesgcm` draft (draft-ietf-webpush-encryption-04 over
// draft-ietf-httpbis-encryption-encoding-03, with `Encryption: salt=` and `Crypto-Key: dh=`
// headers). The primitives are GnuTLS's and nettle's, through the TLS layer (P256 keys and ECDH,
// HKDF, AES-128-GCM, random bytes); this file is only the key schedule and the record layout.

import FCMCore
public import TLS

/// Web Push encryption (RFC 8291, RFC 8188 and the `aesgcm` draft).
public enum WebPushCrypto {
    /// Why a body does not decrypt: each is a reason a browser would drop the message too.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// `aes128gcm`: the body is shorter than its header (21 bytes plus the key id).
        case headerTooShort(Int)
        /// `aes128gcm` for Web Push: the key id must be the sender's public key, 65 bytes.
        case keyIDLength(Int)
        /// The record size is below the smallest that can hold a byte (18 for `aes128gcm`,
        /// 3 for `aesgcm`).
        case recordSizeTooSmall(UInt64)
        /// `aesgcm`: the `rs` parameter is not a number below 2^32.
        case invalidRecordSize(String)
        /// The sender's public key (the key id, or `dh`) is not a P-256 point.
        case invalidSenderKey
        /// `aesgcm`: the salt is missing or not 16 bytes (its length, or nil when missing).
        case invalidSalt(Int?)
        /// `aesgcm`: no `Encryption` or no `Crypto-Key` header, or one without the parameter
        /// the scheme needs (the header's name).
        case missingParameter(String)
        /// The authentication tag of record `record` (from 0) does not match: the keys are not
        /// the subscription's, or the bytes were altered.
        case authenticationFailed(record: Int)
        /// Record `record` decrypted but its padding is wrong (no delimiter, a delimiter of the
        /// wrong kind, non-zero padding, or a padding length beyond the record).
        case badPadding(record: Int)
        /// The body ends inside record `record` (too short for a tag and a byte), or ends after
        /// it without a last record.
        case truncated(record: Int)

        public var description: String {
            switch self {
            case .headerTooShort(let n): return "the body (\(n) bytes) is shorter than its aes128gcm header"
            case .keyIDLength(let n): return "the key id is \(n) bytes; Web Push puts the sender's 65-byte public key there"
            case .recordSizeTooSmall(let rs): return "the record size \(rs) is too small"
            case .invalidRecordSize(let rs): return "the record size \"\(rs)\" is not a number below 2^32"
            case .invalidSenderKey: return "the sender's public key is not a P-256 point"
            case .invalidSalt(let n?): return "the salt is \(n) bytes, not 16"
            case .invalidSalt(nil): return "the Encryption header has no salt"
            case .missingParameter(let what): return "missing \(what)"
            case .authenticationFailed(let r): return "record \(r) does not authenticate: wrong keys, or the body was altered"
            case .badPadding(let r): return "record \(r) has bad padding"
            case .truncated(let r): return "the body is truncated at record \(r)"
            }
        }
    }

    /// An `aesgcm` message: the body and the two headers that travel with it.
    public struct AESGCMMessage: Sendable, Equatable {
        public let body: [UInt8]
        /// `salt=<base64url>` (the record size is the default, 4096).
        public let encryption: String
        /// `dh=<base64url sender public key>`.
        public let cryptoKey: String
    }

    // MARK: RFC 8291 (aes128gcm)

    /// The plaintext of an `aes128gcm` Web Push body, for the subscription whose private key and
    /// auth secret are given.
    public static func decrypt(aes128gcm body: [UInt8], privateKey: P256PrivateKey, authSecret: [UInt8]) throws(Failure) -> [UInt8] {
        let header = try ContentCoding.header(of: body)
        guard header.keyID.count == 65 else { throw .keyIDLength(header.keyID.count) }
        guard let sender = try? P256PublicKey(rawPoint: header.keyID) else { throw .invalidSenderKey }
        let ikm = webPushIKM(privateKey: privateKey, sender: sender, receiver: privateKey.publicKey, authSecret: authSecret)
        return try ContentCoding.decryptRecords(body, header: header, ikm: ikm)
    }

    /// `plaintext` as an `aes128gcm` Web Push body for the subscription `receiver` (its
    /// `p256dh`) and `authSecret`. `senderKey` and `salt` are fresh random ones unless given (the
    /// RFC's example fixes them); `padding` zero bytes are added.
    public static func encrypt(aes128gcm plaintext: [UInt8], to receiver: P256PublicKey, authSecret: [UInt8],
                               senderKey: P256PrivateKey? = nil, salt: [UInt8]? = nil, recordSize: UInt32 = 4096,
                               padding: Int = 0) throws(TLSError) -> [UInt8] {
        let sender = try senderKey.orNew()
        let ikm = webPushIKM(privateKey: sender, sender: sender.publicKey, receiver: receiver, authSecret: authSecret)
        return try ContentCoding.encrypt(plaintext, ikm: ikm, salt: salt.orRandom(), recordSize: recordSize,
                                         keyID: sender.publicKey.rawPoint, padding: padding)
    }

    /// RFC 8291 §3.3-3.4: the input keying material of the content coding.
    fileprivate static func webPushIKM(privateKey: P256PrivateKey, sender: P256PublicKey, receiver: P256PublicKey,
                                   authSecret: [UInt8]) -> [UInt8] {
        let peer = privateKey.publicKey == sender ? receiver : sender
        let secret = privateKey.sharedSecret(with: peer)
        let prk = HKDF.extract(salt: authSecret, ikm: secret)
        return HKDF.expand(prk: prk, info: Array("WebPush: info\0".utf8) + receiver.rawPoint + sender.rawPoint, count: 32)
    }

    // MARK: the aesgcm draft

    /// The plaintext of an `aesgcm` body, given its `Encryption` and `Crypto-Key` header values.
    public static func decrypt(aesgcm body: [UInt8], encryption: String?, cryptoKey: String?, privateKey: P256PrivateKey,
                               authSecret: [UInt8]) throws(Failure) -> [UInt8] {
        guard let encryption else { throw .missingParameter("the Encryption header") }
        guard let cryptoKey else { throw .missingParameter("the Crypto-Key header") }
        let params = headerParameters(encryption)
        guard let saltText = params["salt"] else { throw .invalidSalt(nil) }
        guard let salt = Base64URL.decode(saltText), salt.count == 16 else {
            throw .invalidSalt(Base64URL.decode(saltText)?.count ?? 0)
        }
        var recordSize: UInt64 = 4096
        if let rs = params["rs"] {
            guard let n = UInt64(rs), n <= UInt64(UInt32.max) else { throw .invalidRecordSize(String(rs.prefix(20))) }
            guard n >= 3 else { throw .recordSizeTooSmall(n) }
            recordSize = n
        }
        guard let dh = headerParameters(cryptoKey)["dh"] else { throw .missingParameter("dh in the Crypto-Key header") }
        guard let dhBytes = Base64URL.decode(dh), let sender = try? P256PublicKey(rawPoint: dhBytes) else {
            throw .invalidSenderKey
        }
        let keys = aesgcmKeys(privateKey: privateKey, sender: sender, receiver: privateKey.publicKey, authSecret: authSecret,
                              salt: salt)
        let cipher = AES128GCM(key: keys.key)
        // Records are rs bytes of plaintext (a two-byte padding length, the padding, data) and a
        // tag; a body that ends on a record boundary was cut (the draft ends it with a short one).
        let chunk = Int(recordSize) + 16
        guard body.count % chunk != 0 else { throw .truncated(record: body.count / chunk) }
        var out: [UInt8] = []
        var index = 0
        for start in stride(from: 0, to: body.count, by: chunk) {
            let sealed = body[start..<min(start + chunk, body.count)]
            guard sealed.count >= 18 else { throw .truncated(record: index) }
            guard let plain = cipher.open(sealed, nonce: recordNonce(keys.nonce, index)) else {
                throw .authenticationFailed(record: index)
            }
            let pad = Int(plain[0]) << 8 | Int(plain[1])
            guard 2 + pad <= plain.count, plain[2..<2 + pad].allSatisfy({ $0 == 0 }) else { throw .badPadding(record: index) }
            out += plain[(2 + pad)...]
            index += 1
        }
        return out
    }

    /// `plaintext` as an `aesgcm` message (record size 4096) for `receiver` and `authSecret`;
    /// `padding` zero bytes go into the first record.
    public static func encrypt(aesgcm plaintext: [UInt8], to receiver: P256PublicKey, authSecret: [UInt8],
                               senderKey: P256PrivateKey? = nil, salt: [UInt8]? = nil,
                               padding: Int = 0) throws(TLSError) -> AESGCMMessage {
        let sender = try senderKey.orNew()
        let salt = try salt.orRandom()
        guard salt.count == 16 else { throw TLSError("an aesgcm salt is 16 bytes") }
        guard padding >= 0, padding <= 4094 else { throw TLSError("aesgcm padding fits in one record: 0 to 4094 bytes") }
        let keys = aesgcmKeys(privateKey: sender, sender: sender.publicKey, receiver: receiver, authSecret: authSecret, salt: salt)
        let cipher = AES128GCM(key: keys.key)
        var body: [UInt8] = []
        var rest = plaintext[...]
        var pad = padding
        var index = 0
        // One record more when the data fills the last one exactly: the short record says "end".
        repeat {
            let take = min(rest.count, 4094 - pad)
            let record = [UInt8(pad >> 8), UInt8(pad & 0xff)] + [UInt8](repeating: 0, count: pad) + rest.prefix(take)
            body += cipher.seal(record, nonce: recordNonce(keys.nonce, index))
            rest = rest.dropFirst(take)
            pad = 0
            index += 1
            if rest.isEmpty && record.count < 4096 { break }
        } while true
        return AESGCMMessage(body: body, encryption: "salt=" + Base64URL.encode(salt),
                             cryptoKey: "dh=" + sender.publicKey.base64URL)
    }

    /// The draft's key schedule: the auth secret mixed in, then a key and nonce bound to both
    /// public keys.
    private static func aesgcmKeys(privateKey: P256PrivateKey, sender: P256PublicKey, receiver: P256PublicKey,
                                   authSecret: [UInt8], salt: [UInt8]) -> (key: [UInt8], nonce: [UInt8]) {
        let peer = privateKey.publicKey == sender ? receiver : sender
        let secret = privateKey.sharedSecret(with: peer)
        let ikm = HKDF.expand(prk: HKDF.extract(salt: authSecret, ikm: secret), info: Array("Content-Encoding: auth\0".utf8),
                              count: 32)
        let context = Array("P-256\0".utf8) + [0, 65] + receiver.rawPoint + [0, 65] + sender.rawPoint
        let prk = HKDF.extract(salt: salt, ikm: ikm)
        return (HKDF.expand(prk: prk, info: Array("Content-Encoding: aesgcm\0".utf8) + context, count: 16),
                HKDF.expand(prk: prk, info: Array("Content-Encoding: nonce\0".utf8) + context, count: 12))
    }

    /// `name=value` parameters of a header value, split at `;` and `,` (the older scheme's
    /// `Crypto-Key` may join `dh=…;p256ecdsa=…` either way); the first of each name wins.
    static func headerParameters(_ value: String) -> [String: String] {
        var out: [String: String] = [:]
        for part in value.split(whereSeparator: { $0 == ";" || $0 == "," }) {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            let name = pair[0].trimmingSpaces.lowercased()
            var v = pair[1].trimmingSpaces
            if v.count >= 2, v.first == "\"", v.last == "\"" { v = v.dropFirst().dropLast() }
            if out[name] == nil { out[name] = String(v) }
        }
        return out
    }
}

/// RFC 8188's `aes128gcm` content coding, for any input keying material (Web Push derives it
/// from ECDH; the RFC's own examples give it directly).
public enum ContentCoding {
    /// The fixed part of the header: salt (16), record size (4), key id length (1).
    static let fixedHeader = 21

    /// A parsed header: where the records start.
    struct Header {
        var salt: [UInt8]
        var recordSize: UInt32
        var keyID: [UInt8]
        var recordsStart: Int
    }

    /// The plaintext of `body` and the key id its header names, under `ikm`.
    public static func decrypt(_ body: [UInt8], ikm: [UInt8]) throws(WebPushCrypto.Failure) -> (plaintext: [UInt8], keyID: [UInt8]) {
        let header = try header(of: body)
        return (try decryptRecords(body, header: header, ikm: ikm), header.keyID)
    }

    /// `plaintext` coded under `ikm`: a header with `salt` (16 bytes), `recordSize` (18 or more)
    /// and `keyID` (up to 255 bytes), then the records. `padding` zero bytes are added, laid out
    /// as in RFC 8188's second example: a record takes the padding that fits beside as much data
    /// as it holds less one byte, so every record but the last stays full.
    public static func encrypt(_ plaintext: [UInt8], ikm: [UInt8], salt: [UInt8], recordSize: UInt32 = 4096,
                               keyID: [UInt8] = [], padding: Int = 0) throws(TLSError) -> [UInt8] {
        guard salt.count == 16 else { throw TLSError("an aes128gcm salt is 16 bytes") }
        guard recordSize >= 18 else { throw TLSError("an aes128gcm record size is at least 18") }
        guard keyID.count <= 255 else { throw TLSError("an aes128gcm key id is at most 255 bytes") }
        guard padding >= 0 else { throw TLSError("padding cannot be negative") }
        let keys = derive(salt: salt, ikm: ikm)
        let cipher = AES128GCM(key: keys.key)
        let rs = recordSize
        var out = salt + [UInt8(rs >> 24), UInt8(rs >> 16 & 0xff), UInt8(rs >> 8 & 0xff), UInt8(rs & 0xff), UInt8(keyID.count)] + keyID
        // Each record holds rs - 17 bytes of data and padding (a delimiter and the tag take 17).
        let room = Int(rs) - 17
        var rest = plaintext[...]
        var pad = padding
        var index = 0
        while true {
            let padHere = min(pad, room - min(room - 1, rest.count))
            let dataHere = min(rest.count, room - padHere)
            let last = dataHere == rest.count && padHere == pad
            let record = Array(rest.prefix(dataHere)) + [last ? 2 : 1] + [UInt8](repeating: 0, count: padHere)
            out += cipher.seal(record, nonce: recordNonce(keys.nonce, index))
            rest = rest.dropFirst(dataHere)
            pad -= padHere
            index += 1
            if last { return out }
        }
    }

    /// The header of `body`; the record size is checked here, the key id by the caller.
    static func header(of body: [UInt8]) throws(WebPushCrypto.Failure) -> Header {
        guard body.count >= fixedHeader else { throw .headerTooShort(body.count) }
        let rs = UInt32(body[16]) << 24 | UInt32(body[17]) << 16 | UInt32(body[18]) << 8 | UInt32(body[19])
        let idLength = Int(body[20])
        guard body.count >= fixedHeader + idLength else { throw .headerTooShort(body.count) }
        guard rs >= 18 else { throw .recordSizeTooSmall(UInt64(rs)) }
        return Header(salt: Array(body[0..<16]), recordSize: rs, keyID: Array(body[fixedHeader..<fixedHeader + idLength]),
                      recordsStart: fixedHeader + idLength)
    }

    /// The records of `body` decrypted and their padding removed.
    static func decryptRecords(_ body: [UInt8], header: Header, ikm: [UInt8]) throws(WebPushCrypto.Failure) -> [UInt8] {
        let keys = derive(salt: header.salt, ikm: ikm)
        let cipher = AES128GCM(key: keys.key)
        // Int holds any 32-bit record size, so the sum below cannot overflow for a body in memory.
        let rs = Int(header.recordSize)
        var out: [UInt8] = []
        var start = header.recordsStart
        var index = 0
        guard start < body.count else { throw .truncated(record: 0) }
        while start < body.count {
            let end = body.count - start > rs ? start + rs : body.count
            let last = end == body.count
            // A record holds at least a delimiter and the tag.
            guard end - start >= 17 else { throw .truncated(record: index) }
            guard var plain = cipher.open(body[start..<end], nonce: recordNonce(keys.nonce, index)) else {
                throw .authenticationFailed(record: index)
            }
            // The delimiter is the last non-zero byte: 2 ends the message, 1 says more follows.
            while plain.last == 0 { plain.removeLast() }
            guard let delimiter = plain.popLast() else { throw .badPadding(record: index) }
            if last {
                if delimiter == 1 { throw .truncated(record: index) }
                guard delimiter == 2 else { throw .badPadding(record: index) }
            } else {
                guard delimiter == 1 else { throw .badPadding(record: index) }
            }
            out += plain
            start = end
            index += 1
        }
        return out
    }

    /// RFC 8188 §2.2-2.3: the content-encryption key and the base nonce.
    fileprivate static func derive(salt: [UInt8], ikm: [UInt8]) -> (key: [UInt8], nonce: [UInt8]) {
        let prk = HKDF.extract(salt: salt, ikm: ikm)
        return (HKDF.expand(prk: prk, info: Array("Content-Encoding: aes128gcm\0".utf8), count: 16),
                HKDF.expand(prk: prk, info: Array("Content-Encoding: nonce\0".utf8), count: 12))
    }
}

extension WebPushCrypto {
    /// An `aes128gcm` Web Push body whose records are `records` sealed exactly as given (no
    /// delimiter or padding added) under the keys of `sender` and `receiver`: the bodies a
    /// receiver's padding and truncation rules are tested with (`@testable import TLS`).
    static func sealRecords(_ records: [[UInt8]], sender: P256PrivateKey, receiver: P256PublicKey, authSecret: [UInt8],
                            salt: [UInt8], recordSize: Int) -> [UInt8] {
        let ikm = webPushIKM(privateKey: sender, sender: sender.publicKey, receiver: receiver, authSecret: authSecret)
        let keys = ContentCoding.derive(salt: salt, ikm: ikm)
        let cipher = AES128GCM(key: keys.key)
        let rs = recordSize
        var body = salt + [UInt8(rs >> 24 & 0xff), UInt8(rs >> 16 & 0xff), UInt8(rs >> 8 & 0xff), UInt8(rs & 0xff), 65]
            + sender.publicKey.rawPoint
        for (i, r) in records.enumerated() { body += cipher.seal(r, nonce: recordNonce(keys.nonce, i)) }
        return body
    }
}

/// The nonce of record `index`: the base nonce XOR the record's sequence number (both schemes).
private func recordNonce(_ base: [UInt8], _ index: Int) -> [UInt8] {
    var nonce = base
    var seq = UInt64(index)
    for i in stride(from: 11, through: 4, by: -1) {
        nonce[i] ^= UInt8(seq & 0xff)
        seq >>= 8
    }
    return nonce
}

extension Optional where Wrapped == P256PrivateKey {
    /// The key given, or a fresh one (the encrypting side makes one per message).
    fileprivate func orNew() throws(TLSError) -> P256PrivateKey {
        if let self { return self }
        return try P256PrivateKey()
    }
}

extension Optional where Wrapped == [UInt8] {
    /// The salt given, or 16 random bytes.
    fileprivate func orRandom() throws(TLSError) -> [UInt8] {
        if let self { return self }
        return try randomBytes(16)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
