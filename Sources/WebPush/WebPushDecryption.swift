import FCMModel
import FCMCore
import FCMEngine
import Platform
import TLS

/// A push's encrypted body with what its coding needs beside it.
struct WebPushBody: Sendable {
    var encoding: WebPushEncoding
    var bytes: [UInt8]
    /// `aesgcm`: the `Encryption` and `Crypto-Key` headers as sent.
    var encryption: String?
    var cryptoKey: String?
}

/// Why a body does not decrypt, in words (a record's `decrypt_error`).
struct WebPushDecryptFailure: Error, Sendable, Equatable {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// Decryption of pushes with their subscription's keys (RFC 8291 `aes128gcm`, the `aesgcm`
/// draft), through `WebPushCrypto`.
final class WebPushDecryption: Sendable {
    /// Subscriptions' private keys as GnuTLS keys, by their scalar: making one computes its
    /// public point, which every push to the subscription would otherwise pay again.
    private let keys = BoundedCache<[UInt8], P256PrivateKey>(capacity: 10_000)

    /// The plaintext of `body` for subscription `sub`, or why a browser would drop it.
    func decrypt(_ body: WebPushBody, for sub: WebPushSubscription) -> Result<[UInt8], WebPushDecryptFailure> {
        guard let key = keys.value(for: sub.privateKey, orMake: { try? P256PrivateKey(rawScalar: sub.privateKey) }) else {
            return .failure(WebPushDecryptFailure("the subscription's private key is not a P-256 key"))
        }
        do throws(WebPushCrypto.Failure) {
            switch body.encoding {
            case .aes128gcm:
                return .success(try WebPushCrypto.decrypt(aes128gcm: body.bytes, privateKey: key, authSecret: sub.auth))
            case .aesgcm:
                return .success(try WebPushCrypto.decrypt(aesgcm: body.bytes, encryption: body.encryption, cryptoKey: body.cryptoKey,
                                                          privateKey: key, authSecret: sub.auth))
            }
        } catch {
            return .failure(WebPushDecryptFailure(error.description))
        }
    }
}
