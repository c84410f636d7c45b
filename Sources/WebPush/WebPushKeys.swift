import FCMCore
import RoomKit
public import FCMEngine
import Platform
import TLS

extension WebPushKeyOps {
    /// Web Push's keys and coding with the TLS layer's P-256 keys and `WebPushCrypto`.
    public static let tls = WebPushKeyOps(newKeyPair: {
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

