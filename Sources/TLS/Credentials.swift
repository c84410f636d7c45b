// The certificates a TLS session needs: a server's credentials, a generated self-signed
// certificate, and `fcm-mock cert`'s local certificate authority.

import CGnuTLS
import CGnuTLSShim
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// Why TLS could not be set up.
public struct TLSError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ what: String, _ rc: Int32) {
        description = "\(what): \(String(cString: gnutls_strerror(rc)))"
    }
    /// A failure in the caller's words (a refused argument, for example).
    public init(_ what: String) { description = what }
}

/// A server certificate and key loaded into GnuTLS credentials, shared by every session.
///
/// `@unchecked Sendable`: the credentials are written once here and only read afterwards, which
/// GnuTLS allows from any number of sessions and threads.
public final class TLSCredentials: @unchecked Sendable {
    let credentials: gnutls_certificate_credentials_t
    /// The PEM files in use (generated ones are in a temporary folder).
    public let certificatePath: String
    public let keyPath: String
    /// Their texts as loaded (the HTTPS listener takes these, so both listeners use the same
    /// certificate even if the files change later).
    public let certificatePEM: String
    public let keyPEM: String

    /// Loads `certificate` and `key` (PEM files), each read once.
    public init(certificate: String, key: String) throws(TLSError) {
        let certPEM = try Self.load(certificate), keyPEM = try Self.load(key)
        var cred: gnutls_certificate_credentials_t?
        var rc = gnutls_certificate_allocate_credentials(&cred)
        guard rc >= 0, let cred else { throw TLSError("cannot allocate TLS credentials", rc) }
        rc = certPEM.withUnsafeBufferPointer { c in
            keyPEM.withUnsafeBufferPointer { k in
                var cd = gnutls_datum_t(data: UnsafeMutablePointer(mutating: c.baseAddress), size: UInt32(c.count))
                var kd = gnutls_datum_t(data: UnsafeMutablePointer(mutating: k.baseAddress), size: UInt32(k.count))
                return gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM)
            }
        }
        guard rc >= 0 else {
            gnutls_certificate_free_credentials(cred)
            throw TLSError("cannot load \(certificate) and \(key)", rc)
        }
        credentials = cred
        certificatePath = certificate
        keyPath = key
        certificatePEM = String(decoding: certPEM, as: UTF8.self)
        self.keyPEM = String(decoding: keyPEM, as: UTF8.self)
    }

    /// The bytes of the file at `path`.
    private static func load(_ path: String) throws(TLSError) -> [UInt8] {
        var d = gnutls_datum_t(data: nil, size: 0)
        let rc = gnutls_load_file(path, &d)
        guard rc >= 0 else { throw TLSError("cannot read \(path)", rc) }
        defer { fcm_gnutls_free(d.data) }
        return Array(UnsafeBufferPointer(start: d.data, count: Int(d.size)))
    }

    deinit { gnutls_certificate_free_credentials(credentials) }

    /// Generates a self-signed certificate for `names` (DNS names or IP literals; the first is the
    /// common name) into a new folder under `directory`, and loads it.
    public static func selfSigned(names: [String], directory: String) throws(TLSError) -> TLSCredentials {
        let dir = directory + "/fcm-mock-tls-\(getpid())-\(wallClockMicros())"
        guard mkdir(dir, 0o700) == 0 else { throw TLSError("cannot create \(dir)") }
        let cert = dir + "/server.pem", key = dir + "/server.key"
        var packed: [CChar] = []
        for n in names { packed += n.utf8CString }
        let rc = fcm_gnutls_self_signed(packed, Int32(names.count), cert, key, time(nil))
        guard rc == 0 else { throw TLSError("cannot generate a certificate", rc) }
        return try TLSCredentials(certificate: cert, key: key)
    }
}

/// The files `fcm-mock cert` writes.
public struct LocalCertificateAuthority: Sendable {
    public let caCertificate: String
    public let caKey: String
    public let serverCertificate: String
    public let serverKey: String

    /// The local certificate authority in `directory` if its four files are there (so a client
    /// that trusts `ca.pem` keeps trusting the server across restarts), else a new one made by
    /// `create`; `created` says which. A kept CA whose server certificate lacks one of `names`
    /// (made by a version that served fewer hosts) or expires within 30 days gets a new server
    /// certificate from the same CA, so clients' trust in `ca.pem` still holds (with the names
    /// the old one had beyond `names`, such as `fcm-mock cert --host`'s); `renewed` says why
    /// (nil when it was not). When the folder cannot be written, the old one stays, and
    /// `renewed` says that too.
    /// `now`: the time certificates are made and checked at (Unix seconds, the clock's when nil;
    /// tests move it).
    public static func loadOrCreate(names: [String], directory: String, now: Int? = nil) throws(TLSError)
        -> (authority: LocalCertificateAuthority, created: Bool, renewed: String?) {
        let now = now ?? time(nil)
        let existing = LocalCertificateAuthority(caCertificate: directory + "/ca.pem", caKey: directory + "/ca.key",
                                                 serverCertificate: directory + "/server.pem", serverKey: directory + "/server.key")
        let files = [existing.caCertificate, existing.caKey, existing.serverCertificate, existing.serverKey]
        guard files.allSatisfy({ access($0, R_OK) == 0 }) else { return (try create(names: names, directory: directory, now: now), true, nil) }
        let packed = Self.packed(names)
        let why: String
        switch fcm_gnutls_cert_serves(existing.serverCertificate, packed, Int32(names.count), now + 30 * 86_400) {
        case 0: return (existing, false, nil)
        case 1: why = "its server certificate did not name every host this version serves"
        case 2: why = "its server certificate expires within 30 days"
        default: why = "its server certificate could not be read"
        }
        // Made beside the old pair under names of this process's own, then renamed over it, the
        // key first: a crash between the two leaves an old certificate that fails this check
        // again at the next start. The old key is kept aside meanwhile and put back when the
        // certificate cannot follow it, so a failure leaves the old pair as it was.
        let tag = ".\(getpid())"
        let (newCert, newKey, oldKey) = (existing.serverCertificate + ".new" + tag, existing.serverKey + ".new" + tag,
                                         existing.serverKey + ".old" + tag)
        let rc = fcm_gnutls_server_from_ca(packed, Int32(names.count), existing.caCertificate, existing.caKey,
                                           existing.serverCertificate, newCert, newKey, now)
        let failure: String?
        if rc != 0 {
            failure = String(cString: gnutls_strerror(rc))
        } else if link(existing.serverKey, oldKey) != 0 || rename(newKey, existing.serverKey) != 0 {
            failure = String(cString: strerror(errno))
        } else if rename(newCert, existing.serverCertificate) != 0 {
            failure = String(cString: strerror(errno))
            rename(oldKey, existing.serverKey)
        } else {
            failure = nil
        }
        for leftover in [newCert, newKey, oldKey] { unlink(leftover) }
        if let failure { return (existing, false, why + "; a new one could not be written (\(failure)): the old one is used") }
        return (existing, false, why + ": the CA signed a new one")
    }

    /// NUL-separated, as the C side reads a list of names.
    private static func packed(_ names: [String]) -> [CChar] {
        var packed: [CChar] = []
        for n in names { packed += n.utf8CString }
        return packed
    }

    /// Creates a new local certificate authority and a server certificate it signs for `names`
    /// (DNS names, or IP literals), as `ca.pem`, `ca.key`, `server.pem` and `server.key` in
    /// `directory` (created if missing; existing files are replaced).
    /// `now`: as `loadOrCreate`'s.
    public static func create(names: [String], directory: String, now: Int? = nil) throws(TLSError) -> LocalCertificateAuthority {
        let now = now ?? time(nil)
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw TLSError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let r = LocalCertificateAuthority(caCertificate: directory + "/ca.pem", caKey: directory + "/ca.key",
                                          serverCertificate: directory + "/server.pem", serverKey: directory + "/server.key")
        let rc = fcm_gnutls_ca_and_server(packed(names), Int32(names.count), r.caCertificate, r.caKey,
                                          r.serverCertificate, r.serverKey, now)
        guard rc == 0 else { throw TLSError("cannot write certificates into \(directory)", rc) }
        return r
    }
}
