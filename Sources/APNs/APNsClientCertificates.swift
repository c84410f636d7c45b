import FCMCore
public import TLS

// Client certificates shaped like Apple's ("Apple Push Services: <bundle id>", subject UID the
// bundle id, the topic extension and the environment markers), issued by the local certificate
// authority through TLS's generic issuer, and read back from a TLS peer.

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
    /// An environment marker's value: ASN.1 NULL.
    static let markerValue: [UInt8] = [0x05, 0x00]

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
        try self.init(ClientCertificate(der: der, extensions: [Self.topicsOID, Self.sandboxOID, Self.productionOID]))
    }

    /// Reads a PEM certificate.
    public init(pem: String) throws(TLSError) {
        try self.init(ClientCertificate(pem: pem, extensions: [Self.topicsOID, Self.sandboxOID, Self.productionOID]))
    }

    private init(_ c: ClientCertificate) throws(TLSError) {
        var env: APNsEnvironments = []
        if c.extensions[Self.sandboxOID] != nil { env.insert(.sandbox) }
        if c.extensions[Self.productionOID] != nil { env.insert(.production) }
        environments = env
        if let value = c.extensions[Self.topicsOID] {
            guard let t = DER.topics(value) else { throw TLSError("the certificate's APNs topic extension is malformed") }
            topics = t
        } else {
            topics = []
        }
        bundleID = c.uid
        serial = c.serial
        notBefore = c.notBefore
        notAfter = c.notAfter
    }
}

extension LocalCertificateAuthority {
    /// A new client certificate for `bundleID` signed by this authority, shaped like Apple's:
    /// subject UID the bundle id, common name "Apple Push Services: <bundle id>", the topic
    /// extension listing the bundle id and its `.voip` and `.complication` topics (then those of
    /// each of `otherBundleIDs`, for a certificate of several apps), and the markers of
    /// `environments`; valid from an hour before `now` for `days`.
    public func issueAPNsClientCertificate(bundleID: String, otherBundleIDs: [String] = [], environments: APNsEnvironments,
                                           days: Int = 365, now: Int64? = nil) throws(TLSError) -> IssuedClientCertificate {
        for b in [bundleID] + otherBundleIDs {
            guard !b.isEmpty, b.utf8.count <= 255, !b.utf8.contains(0) else { throw TLSError("a bundle id is 1 to 255 bytes") }
        }
        guard otherBundleIDs.count <= Self.maxOtherApps else { throw TLSError("a certificate names at most \(Self.maxOtherApps + 1) apps") }
        var extensions: [(oid: String, value: [UInt8])] = [(APNsClientCertificate.topicsOID,
                                                            DER.topicsValue(bundleIDs: [bundleID] + otherBundleIDs))]
        if environments.contains(.sandbox) { extensions.append((APNsClientCertificate.sandboxOID, APNsClientCertificate.markerValue)) }
        if environments.contains(.production) {
            extensions.append((APNsClientCertificate.productionOID, APNsClientCertificate.markerValue))
        }
        return try issueClientCertificate(commonName: "Apple Push Services: " + bundleID, uid: bundleID, extensions: extensions,
                                          days: days, now: now)
    }

    /// Most apps a certificate names besides its first (the topic extension's DER length is
    /// written on two bytes).
    public static let maxOtherApps = 63
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
