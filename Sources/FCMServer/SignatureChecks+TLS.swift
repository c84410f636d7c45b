import WebPush
import RoomKit
import FCMEngine
import TLS

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

