// APNs certificate authentication: client certificates shaped like Apple's ("Apple Push
// Services: <bundle id>", subject UID the bundle id, the topic extension and the environment
// markers), issued by the local certificate authority, and read back from a TLS peer.

import CGnuTLS
import CGnuTLSShim

#if canImport(Glibc)
    import Glibc
#endif

/// The APNs environments a client certificate is good for (Apple's marker extensions).
public struct APNsEnvironments: OptionSet, Sendable, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    /// Development (`api.sandbox.push.apple.com`): OID 1.2.840.113635.100.6.3.1.
    public static let sandbox = APNsEnvironments(rawValue: 1)
    /// Production (`api.push.apple.com`): OID 1.2.840.113635.100.6.3.2.
    public static let production = APNsEnvironments(rawValue: 2)
}

/// What an APNs client certificate says: the app, its topics and environments.
public struct APNsClientCertificate: Sendable, Equatable {
    /// Apple's topic extension: the bundle id and the topics derived from it.
    static let topicsOID = "1.2.840.113635.100.6.3.6"
    static let sandboxOID = "1.2.840.113635.100.6.3.1"
    static let productionOID = "1.2.840.113635.100.6.3.2"

    /// The subject's UID (Apple puts the bundle id there), or nil.
    public let bundleID: String?
    /// The topics of the topic extension, in order (empty without it).
    public let topics: [String]
    /// The environment markers present.
    public let environments: APNsEnvironments
    /// The serial number, lowercase hex: names the certificate (for revocation).
    public let serial: String
    /// Its validity period (notBefore, notAfter), in seconds since the epoch.
    public let notBefore: Int64
    public let notAfter: Int64

    /// Reads a certificate (DER, as `TLSSession.peerCertificate` gives it).
    public init(der: [UInt8]) throws(TLSError) {
        var c: gnutls_x509_crt_t?
        var rc = gnutls_x509_crt_init(&c)
        guard rc >= 0, let crt = c else { throw TLSError("cannot make a certificate", rc) }
        defer { gnutls_x509_crt_deinit(crt) }
        rc = withDatum(der) { gnutls_x509_crt_import(crt, &$0, GNUTLS_X509_FMT_DER) }
        guard rc >= 0 else { throw TLSError("not a DER certificate", rc) }
        func extensionValue(_ oid: String) -> [UInt8]? {
            var d = gnutls_datum_t(data: nil, size: 0)
            var critical: UInt32 = 0
            guard gnutls_x509_crt_get_extension_by_oid2(crt, oid, 0, &d, &critical) >= 0 else { return nil }
            return takeDatum(d)
        }
        var env: APNsEnvironments = []
        if extensionValue(Self.sandboxOID) != nil { env.insert(.sandbox) }
        if extensionValue(Self.productionOID) != nil { env.insert(.production) }
        environments = env
        if let value = extensionValue(Self.topicsOID) {
            guard let t = DER.topics(value) else { throw TLSError("the certificate's APNs topic extension is malformed") }
            topics = t
        } else {
            topics = []
        }
        var size = 0
        if gnutls_x509_crt_get_dn_by_oid(crt, "0.9.2342.19200300.100.1.1", 0, 0, nil, &size) == GNUTLS_E_SHORT_MEMORY_BUFFER {
            var buf = [CChar](repeating: 0, count: size + 1)
            rc = gnutls_x509_crt_get_dn_by_oid(crt, "0.9.2342.19200300.100.1.1", 0, 0, &buf, &size)
            bundleID = rc >= 0 ? String(decoding: buf[0..<size].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        } else {
            bundleID = nil
        }
        var serialBytes = [UInt8](repeating: 0, count: 40)
        var serialSize = serialBytes.count
        rc = gnutls_x509_crt_get_serial(crt, &serialBytes, &serialSize)
        guard rc >= 0 else { throw TLSError("the certificate has no readable serial number", rc) }
        let hex = Array("0123456789abcdef".utf8)
        serial = String(decoding: serialBytes[0..<serialSize].flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }, as: UTF8.self)
        notBefore = Int64(gnutls_x509_crt_get_activation_time(crt))
        notAfter = Int64(gnutls_x509_crt_get_expiration_time(crt))
    }

    /// Reads a PEM certificate.
    public init(pem: String) throws(TLSError) {
        var d = gnutls_datum_t(data: nil, size: 0)
        let rc = withDatum(Array(pem.utf8)) { gnutls_pem_base64_decode2("CERTIFICATE", &$0, &d) }
        guard rc >= 0 else { throw TLSError("not a PEM certificate", rc) }
        try self.init(der: takeDatum(d))
    }
}

/// A client certificate and its key as `POST /api/v1/apns/certificates` hands them out.
public struct IssuedClientCertificate: Sendable {
    public let certificatePEM: String
    /// PKCS #8 PEM. A secret: shown once, never logged.
    public let privateKeyPEM: String
    /// The serial number, lowercase hex (as `APNsClientCertificate.serial` reads it back).
    public let serial: String
}

extension LocalCertificateAuthority {
    /// A new client certificate for `bundleID` signed by this authority, shaped like Apple's:
    /// subject UID the bundle id, common name "Apple Push Services: <bundle id>", the topic
    /// extension listing the bundle id and its `.voip` and `.complication` topics (then those of
    /// each of `otherBundleIDs`, for a certificate of several apps), and the markers of
    /// `environments`; valid from an hour before `now` (seconds since the epoch; the system's
    /// clock by default: the server passes its mock clock's, so the dates agree with what it
    /// checks) for `days`.
    public func issueAPNsClientCertificate(bundleID: String, otherBundleIDs: [String] = [], environments: APNsEnvironments,
                                           days: Int = 365, now: Int64? = nil) throws(TLSError) -> IssuedClientCertificate {
        for b in [bundleID] + otherBundleIDs {
            guard !b.isEmpty, b.utf8.count <= 255, !b.utf8.contains(0) else { throw TLSError("a bundle id is 1 to 255 bytes") }
        }
        guard otherBundleIDs.count <= Self.maxOtherApps else { throw TLSError("a certificate names at most \(Self.maxOtherApps + 1) apps") }
        guard days > 0 else { throw TLSError("a certificate lasts at least a day") }
        let topics = DER.topicsValue(bundleIDs: [bundleID] + otherBundleIDs)
        var cert: UnsafeMutablePointer<UInt8>?, key: UnsafeMutablePointer<UInt8>?
        var certSize: UInt32 = 0, keySize: UInt32 = 0
        let rc = fcm_gnutls_apns_client(caCertificate, caKey, bundleID, topics, UInt32(topics.count), environments.rawValue,
                                        Int(now ?? Int64(time(nil))), days, &cert, &certSize, &key, &keySize)
        guard rc == 0 else { throw TLSError("cannot issue a client certificate", rc) }
        let certificatePEM = String(decoding: takeDatum(gnutls_datum_t(data: cert, size: certSize)), as: UTF8.self)
        // Rewritten in the `.p8` layout that strict readers take (see `P256PrivateKey.pem`).
        let privateKeyPEM = try P256PrivateKey(pem: String(decoding: takeDatum(gnutls_datum_t(data: key, size: keySize)),
                                                           as: UTF8.self)).pem
        return IssuedClientCertificate(certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM,
                                       serial: try APNsClientCertificate(pem: certificatePEM).serial)
    }

    /// Most apps a certificate names besides its first (the topic extension's DER length is
    /// written on two bytes).
    public static let maxOtherApps = 63

    /// Whether `der` (a peer's certificate) carries this authority's valid signature and (unless
    /// `checkingTime` is false, for a caller that checks the period on a clock of its own) is
    /// within its validity period now. Reads `ca.pem` each time: a caller that checks many keeps
    /// a `CertificateIssuer`.
    public func hasIssued(_ der: [UInt8], checkingTime: Bool = true) -> Bool {
        (try? CertificateIssuer(self))?.hasIssued(der, checkingTime: checkingTime) ?? false
    }
}

/// A local CA's certificate, read once, that tells the certificates it signed.
public struct CertificateIssuer: Sendable {
    /// `ca.pem` as read.
    let caPEM: [UInt8]

    /// Reads `authority`'s `ca.pem`.
    public init(_ authority: LocalCertificateAuthority) throws(TLSError) {
        var file = gnutls_datum_t(data: nil, size: 0)
        let rc = gnutls_load_file(authority.caCertificate, &file)
        guard rc >= 0 else { throw TLSError("cannot read \(authority.caCertificate)", rc) }
        caPEM = takeDatum(file)
    }

    /// Whether `der` carries the CA's valid signature and (unless `checkingTime` is false) is
    /// within its validity period now.
    public func hasIssued(_ der: [UInt8], checkingTime: Bool = true) -> Bool {
        var ca: gnutls_x509_crt_t?, crt: gnutls_x509_crt_t?
        guard gnutls_x509_crt_init(&ca) >= 0, let ca else { return false }
        defer { gnutls_x509_crt_deinit(ca) }
        guard gnutls_x509_crt_init(&crt) >= 0, let crt else { return false }
        defer { gnutls_x509_crt_deinit(crt) }
        guard withDatum(caPEM, { gnutls_x509_crt_import(ca, &$0, GNUTLS_X509_FMT_PEM) }) >= 0,
            withDatum(der, { gnutls_x509_crt_import(crt, &$0, GNUTLS_X509_FMT_DER) }) >= 0
        else { return false }
        var status: UInt32 = 0
        var list: [gnutls_x509_crt_t?] = [ca]
        let flags = checkingTime ? 0 : UInt32(GNUTLS_VERIFY_DISABLE_TIME_CHECKS.rawValue)
        return gnutls_x509_crt_verify(crt, &list, 1, flags, &status) >= 0 && status == 0
    }
}

/// The little DER Apple's topic extension needs: a SEQUENCE of UTF8Strings, each topic followed
/// by a SEQUENCE naming its kind (`app`, `voip`, `complication`).
enum DER {
    /// The extension value for `bundleIDs`: each app followed by its `.voip` and `.complication`
    /// topics.
    static func topicsValue(bundleIDs: [String]) -> [UInt8] {
        func string(_ s: String) -> [UInt8] { tlv(0x0C, Array(s.utf8)) }
        var content: [UInt8] = []
        for bundleID in bundleIDs {
            for (suffix, kind) in [("", "app"), (".voip", "voip"), (".complication", "complication")] {
                content += string(bundleID + suffix) + tlv(0x30, string(kind))
            }
        }
        return tlv(0x30, content)
    }

    /// The topics of an extension value: the strings directly inside the outer SEQUENCE (the
    /// nested kinds are skipped); nil when it is not such a SEQUENCE.
    static func topics(_ value: [UInt8]) -> [String]? {
        guard let (tag, content, rest) = read(value[...]), tag == 0x30, rest.isEmpty else { return nil }
        var topics: [String] = []
        var items = content
        while !items.isEmpty {
            guard let (t, c, r) = read(items) else { return nil }
            // UTF8String, PrintableString, IA5String.
            if t == 0x0C || t == 0x13 || t == 0x16 { topics.append(String(decoding: c, as: UTF8.self)) }
            items = r
        }
        return topics
    }

    /// A tag, length and content.
    private static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        if n < 0x80 { return [tag, UInt8(n)] + content }
        if n <= 0xFF { return [tag, 0x81, UInt8(n)] + content }
        return [tag, 0x82, UInt8(n >> 8), UInt8(n & 0xFF)] + content
    }

    /// The first element of `bytes` (tag, content) and what follows it; nil when malformed
    /// (definite lengths of up to four bytes only, as DER allows no other).
    private static func read(_ bytes: ArraySlice<UInt8>) -> (UInt8, ArraySlice<UInt8>, ArraySlice<UInt8>)? {
        var p = bytes.startIndex
        guard bytes.count >= 2 else { return nil }
        let tag = bytes[p]
        var length = Int(bytes[p + 1])
        p += 2
        if length >= 0x80 {
            let k = length & 0x7F
            guard k >= 1, k <= 4, bytes.endIndex - p >= k else { return nil }
            length = 0
            for _ in 0..<k {
                length = length << 8 | Int(bytes[p])
                p += 1
            }
        }
        guard bytes.endIndex - p >= length else { return nil }
        return (tag, bytes[p..<p + length], bytes[(p + length)...])
    }
}
