import FCMCore
public import FCMEngine
public import HTTPServer
import Platform
import TLS

extension RecordedExchange {
    /// The headers of `r` that `headerNames` lists, in that order, in one pass over the request's
    /// fields (a repeated field is joined with ", ", as `HTTPRequest.header` does).
    static func headers(_ r: HTTPRequest) -> String {
        // Every send keeps these: one pass over the fields, names compared as bytes, nothing
        // built for the fields not kept.
        var found: [(Int, String)] = []
        found.reserveCapacity(headerNames.count)
        for h in r.headers {
            guard let i = headerIndex(h.name) else { continue }
            if let j = found.firstIndex(where: { $0.0 == i }) {
                found[j].1 += ", " + h.value
            } else {
                found.append((i, h.value))
            }
        }
        if found.isEmpty { return "" }
        found.sort { $0.0 < $1.0 }
        // Written as bytes, one string at the end.
        var out: [UInt8] = []
        out.reserveCapacity(256)
        for (i, value) in found {
            out.append(contentsOf: headerBytes[i])
            out.append(9)
            if i == 1 {
                appendClean(mask(value), into: &out)
            } else if value.utf8.count > 256 {
                appendClean(String(value.prefix(256)), into: &out)
            } else {
                appendClean(value, into: &out)
            }
            out.append(10)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An HTTP answer in the stored form.
    static func answer(_ response: HTTPResponse) -> String {
        var type: String?
        for (name, value) in response.headers where name.utf8.count == 12 && hasPrefixIgnoringCase(name.utf8, "content-type") {
            type = value
        }
        return answer(status: response.status, contentType: type, body: response.body)
    }
}

extension HTTPResponse: KeptAnswer {
    /// The answer in the stored form its record keeps.
    public var storedForm: String { RecordedExchange.answer(self) }
}

extension SignatureChecks {
    /// The checks made with the TLS layer's RSA and P-256 keys.
    static let tls = SignatureChecks(rs256: { pem, input, signature in
        guard let key = try? RSAPublicKey(pem: pem) else { return false }
        return key.verifiesRS256(input, signature: signature)
    }, es256: { pem, input, signature in
        guard let key = try? P256PublicKey(pem: pem) else { return false }
        return key.verifiesES256(input, signature: signature)
    }, webPush: .tls)
}

extension WebPushKeyOps {
    /// Web Push's keys and coding with the TLS layer's P-256 keys and `WebPushCrypto`.
    static let tls = WebPushKeyOps(newKeyPair: {
        guard let key = try? P256PrivateKey() else { return nil }
        return (key.rawScalar, key.publicKey.rawPoint)
    }, isPublicKey: { bytes in
        (try? P256PublicKey(rawPoint: bytes)) != nil
    }, verifyES256: { point, input, signature in
        guard let key = try? P256PublicKey(rawPoint: point) else { return false }
        return key.verifiesES256(input, signature: signature)
    }, decrypt: { body, scalar, auth in
        guard let key = WebPushPrivateKeys.shared.key(scalar) else {
            return .failure(WebPushDecryptFailure("the subscription's private key is not a P-256 key"))
        }
        do throws(WebPushCrypto.Failure) {
            switch body.encoding {
            case .aes128gcm:
                return .success(try WebPushCrypto.decrypt(aes128gcm: body.bytes, privateKey: key, authSecret: auth))
            case .aesgcm:
                return .success(try WebPushCrypto.decrypt(aesgcm: body.bytes, encryption: body.encryption, cryptoKey: body.cryptoKey,
                                                          privateKey: key, authSecret: auth))
            }
        } catch {
            return .failure(WebPushDecryptFailure(error.description))
        }
    })
}

/// Subscriptions' private keys as GnuTLS keys, by their scalar: making one computes its public
/// point, which every push to the subscription would otherwise pay again. Bounded: a full table
/// is emptied.
final class WebPushPrivateKeys: Sendable {
    static let shared = WebPushPrivateKeys()
    static let capacity = 10_000
    private let keys = Locked<[[UInt8]: P256PrivateKey]>([:])

    func key(_ scalar: [UInt8]) -> P256PrivateKey? {
        if let known = keys.withLock({ $0[scalar] }) { return known }
        guard let made = try? P256PrivateKey(rawScalar: scalar) else { return nil }
        keys.withLock { k in
            if k.count >= Self.capacity { k.removeAll(keepingCapacity: true) }
            k[scalar] = made
        }
        return made
    }
}

extension Engine {
    /// `answer`, kept first on the record (when one was made) with the request's `headers`: how
    /// the send routes answer a refused request.
    func keeping(_ answer: HTTPResponse, record id: Int64?, headers: String?) -> HTTPResponse {
        keepAnswer(record: id, answer: RecordedExchange.answer(answer), headers: headers)
        return answer
    }
}

/// The event stream's readers are HTTP streams.
extension HTTPStream: EventReader {}
