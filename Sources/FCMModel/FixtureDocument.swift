/// One fixture file, read and checked at start into what it declares. A reset applies it again
/// from memory: editing the file afterwards changes nothing until a restart, and a reset spends
/// no time parsing.
public struct FixtureDocument: Sendable {
    public let name: String
    public var projects: [Project] = []
    /// Every device with its token (derived from its place in the file when the file gives none).
    public var devices: [DeviceSpec] = []
    public var subscriptions: [(topic: String, tokens: [String])] = []
    public var groups: [(name: String, senderID: String, members: [String])] = []
    /// `apns.teams`: APNs teams, their apps and the public keys their provider tokens are signed
    /// with (checked when the file was read: ids, PEMs, no key id twice).
    public var apnsTeams: [APNsFixtureTeam] = []

    public init(name: String) { self.name = name }
}

/// A fixture's APNs team (`apns.teams[i]`): its apps (added to those it has) and its keys.
public struct APNsFixtureTeam: Sendable {
    package let teamID: String
    package let bundleIDs: [String]
    /// The keys by id, each its public key as PEM (SubjectPublicKeyInfo, as the reader wrote it).
    public let keys: [(keyID: String, publicKeyPEM: String)]

    public init(teamID: String, bundleIDs: [String], keys: [(keyID: String, publicKeyPEM: String)]) {
        self.teamID = teamID
        self.bundleIDs = bundleIDs
        self.keys = keys
    }
}
