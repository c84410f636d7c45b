// Client certificates issued by the local certificate authority and read back from a TLS peer:
// the generic parts (subject UID, serial, dates, extensions by OID). What an extension means is
// its reader's: the APNs room's topic extension and environment markers
// (APNs/APNsClientCertificates.swift).

import CGnuTLS
import CGnuTLSShim

#if canImport(Glibc)
    import Glibc
#endif

/// What a client certificate says, read from its DER (as `TLSSession.peerCertificate` gives it).
public struct ClientCertificate: Sendable, Equatable {
    /// The subject's UID, or nil.
    public let uid: String?
    /// The serial number, lowercase hex: names the certificate (for revocation).
    public let serial: String
    /// Its validity period (notBefore, notAfter), in seconds since the epoch.
    public let notBefore: Int64
    public let notAfter: Int64
    /// The values (DER) of the extensions asked for that it has, by OID.
    public let extensions: [String: [UInt8]]

    /// Reads a certificate and the values of the extensions `oids`.
    public init(der: [UInt8], extensions oids: [String] = []) throws(TLSError) {
        var c: gnutls_x509_crt_t?
        var rc = gnutls_x509_crt_init(&c)
        guard rc >= 0, let crt = c else { throw TLSError("cannot make a certificate", rc) }
        defer { gnutls_x509_crt_deinit(crt) }
        rc = withDatum(der) { gnutls_x509_crt_import(crt, &$0, GNUTLS_X509_FMT_DER) }
        guard rc >= 0 else { throw TLSError("not a DER certificate", rc) }
        var found: [String: [UInt8]] = [:]
        for oid in oids {
            var d = gnutls_datum_t(data: nil, size: 0)
            var critical: UInt32 = 0
            if gnutls_x509_crt_get_extension_by_oid2(crt, oid, 0, &d, &critical) >= 0 { found[oid] = takeDatum(d) }
        }
        extensions = found
        var size = 0
        if gnutls_x509_crt_get_dn_by_oid(crt, "0.9.2342.19200300.100.1.1", 0, 0, nil, &size) == GNUTLS_E_SHORT_MEMORY_BUFFER {
            var buf = [CChar](repeating: 0, count: size + 1)
            rc = gnutls_x509_crt_get_dn_by_oid(crt, "0.9.2342.19200300.100.1.1", 0, 0, &buf, &size)
            uid = rc >= 0 ? String(decoding: buf[0..<size].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        } else {
            uid = nil
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
    public init(pem: String, extensions oids: [String] = []) throws(TLSError) {
        var d = gnutls_datum_t(data: nil, size: 0)
        let rc = withDatum(Array(pem.utf8)) { gnutls_pem_base64_decode2("CERTIFICATE", &$0, &d) }
        guard rc >= 0 else { throw TLSError("not a PEM certificate", rc) }
        try self.init(der: takeDatum(d), extensions: oids)
    }
}

/// A client certificate and its key as the authority issued them (`POST /api/v1/apns/certificates`
/// hands them out once).
public struct IssuedClientCertificate: Sendable {
    public let certificatePEM: String
    /// PKCS #8 PEM. A secret: shown once, never logged.
    public let privateKeyPEM: String
    /// The serial number, lowercase hex (as `ClientCertificate.serial` reads it back).
    public let serial: String
}

extension LocalCertificateAuthority {
    /// A new client certificate signed by this authority: a new P-256 key, subject UID `uid`,
    /// common name `commonName`, client-authentication usage, `extensions` (OID and DER value,
    /// in that order), valid from an hour before `now` (seconds since the epoch; the system's
    /// clock by default: the server passes its mock clock's, so the dates agree with what it
    /// checks) for `days`.
    public func issueClientCertificate(commonName: String, uid: String, extensions: [(oid: String, value: [UInt8])],
                                       days: Int = 365, now: Int64? = nil) throws(TLSError) -> IssuedClientCertificate {
        guard !uid.isEmpty, uid.utf8.count <= 255, !uid.utf8.contains(0), !commonName.utf8.contains(0) else {
            throw TLSError("a certificate's UID is 1 to 255 bytes")
        }
        guard days > 0 else { throw TLSError("a certificate lasts at least a day") }
        var cert: UnsafeMutablePointer<UInt8>?, key: UnsafeMutablePointer<UInt8>?
        var certSize: UInt32 = 0, keySize: UInt32 = 0
        // The extensions' OIDs and values as C arrays, alive for the call.
        let oids = extensions.map { strdup($0.oid) }
        defer { oids.forEach { free($0) } }
        let values = extensions.map { e -> UnsafeMutablePointer<UInt8> in
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(e.value.count, 1))
            p.initialize(from: e.value, count: e.value.count)
            return p
        }
        defer { values.forEach { $0.deallocate() } }
        let sizes = extensions.map { UInt32($0.value.count) }
        let rc = oids.map { UnsafePointer($0) }.withUnsafeBufferPointer { o in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { v in
                sizes.withUnsafeBufferPointer { n in
                    fcm_gnutls_client_cert(caCertificate, caKey, commonName, uid, o.baseAddress, v.baseAddress, n.baseAddress,
                                           UInt32(extensions.count), Int(now ?? Int64(time(nil))), days,
                                           &cert, &certSize, &key, &keySize)
                }
            }
        }
        guard rc == 0 else { throw TLSError("cannot issue a client certificate", rc) }
        let certificatePEM = String(decoding: takeDatum(gnutls_datum_t(data: cert, size: certSize)), as: UTF8.self)
        // Rewritten in the `.p8` layout that strict readers take (see `P256PrivateKey.pem`).
        let privateKeyPEM = try P256PrivateKey(pem: String(decoding: takeDatum(gnutls_datum_t(data: key, size: keySize)),
                                                           as: UTF8.self)).pem
        return IssuedClientCertificate(certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM,
                                       serial: try ClientCertificate(pem: certificatePEM).serial)
    }

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
