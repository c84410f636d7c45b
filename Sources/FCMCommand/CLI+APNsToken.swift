import APNs
import FCMModel
import Platform
import TLS

/// `fcm-mock apns-token`: an APNs provider token (an ES256 JWT, docs/apns.md "Provider tokens")
/// signed with a `.p8` on disk, printed on one line for a shell (`curl -H "authorization: bearer
/// $(fcm-mock apns-token …)"`). It needs no server: the key is the sender's (`fcm-mock apns-key`
/// wrote it, or Apple did, its public half given to the mock).
extension CLI {
    /// Its options: flag, value placeholder, default, what it does (parsing and help read this).
    static let apnsTokenOptions: [(flag: String, value: String, defaultText: String, help: String)] = [
        ("--key", "FILE", "required", "the signing key: a P-256 private key as PEM (a .p8 as Apple's download or fcm-mock apns-key writes it)"),
        ("--key-id", "KEY_ID", "required", "the key's id, the token's kid: 10 uppercase letters or digits"),
        ("--team", "TEAM_ID", "required", "the key's team, the token's iss: 10 uppercase letters or digits"),
        ("--iat", "SECONDS", "now",
         "the token's iat: UNIX seconds, or +N / -N seconds from now (after POST /api/v1/clock {\"advance_s\":N}, +N)"),
    ]

    /// `apns-token --key FILE --key-id K --team T [--iat SECONDS]`: prints the token; exit 0, 1
    /// when the key file cannot be read or is not a P-256 private key, 2 for bad options.
    /// `nowSeconds`: the wall clock's UNIX seconds, when nil (tests pass a fixed one).
    public static func apnsToken(_ args: [String], nowSeconds given: Int64? = nil) -> Int32 {
        let nowSeconds = given ?? wallClockMicros() / 1_000_000
        var options: [String: String] = [:]
        var i = 0
        while i < args.count {
            let a = args[i]
            guard apnsTokenOptions.contains(where: { $0.flag == a }) else {
                return usage("unknown option '\(a)' for 'apns-token' (see fcm-mock apns-token --help)")
            }
            i += 1
            guard i < args.count, !args[i].isEmpty else { return usage("\(a) needs a value") }
            options[a] = args[i]
            i += 1
        }
        for o in apnsTokenOptions where o.defaultText == "required" && options[o.flag] == nil {
            return usage("apns-token needs \(o.flag) \(o.value)")
        }
        let (file, keyID, team) = (options["--key"]!, options["--key-id"]!, options["--team"]!)
        // Apple's shape, as the mock checks it: a token the mock would refuse is not printed.
        for (flag, id) in [("--key-id", keyID), ("--team", team)] where !APNsTeam.isAppleID(id) {
            return usage("\(flag) must be 10 uppercase letters or digits, as Apple's are, got '\(id)'")
        }
        var iat = nowSeconds
        if let text = options["--iat"] {
            guard let n = Int64(text.hasPrefix("+") ? String(text.dropFirst()) : text), n >= 0 || text.hasPrefix("-") else {
                return usage("--iat takes whole UNIX seconds, or +N / -N seconds from now, got '\(text)'")
            }
            iat = text.hasPrefix("+") || text.hasPrefix("-") ? nowSeconds + n : n
        }
        guard let bytes = SystemIO.readFile(file) else {
            writeToStandardError("fcm-mock: cannot read the key file \(file)\n")
            return 1
        }
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey(pem: String(decoding: bytes, as: UTF8.self))
        } catch {
            writeToStandardError("fcm-mock: \(file) is not a P-256 private key PEM (a .p8): \(error.description)\n")
            return 1
        }
        do {
            print(try ProviderTokenMaker.token(signingWith: key, keyID: keyID, teamID: team, issuedAt: iat))
            return 0
        } catch {
            writeToStandardError("fcm-mock: cannot sign with \(file): \(error.description)\n")
            return 1
        }
    }

    /// `fcm-mock apns-token --help`.
    public static var apnsTokenHelp: String {
        var lines = [
            "usage: fcm-mock apns-token --key FILE --key-id KEY_ID --team TEAM_ID [--iat SECONDS]",
            "",
            "Prints an APNs provider token (an ES256 JWT: header {\"alg\":\"ES256\",\"kid\":KEY_ID}, claims",
            "{\"iss\":TEAM_ID,\"iat\":SECONDS}) signed with the key, on one line, for curl and scripts:",
            "  curl --http2-prior-knowledge -H \"authorization: bearer $(fcm-mock apns-token --key AuthKey.p8 ...)\" ...",
            "Needs no server. A token is good for an hour after its iat, on the mock's clock.",
            "",
            "options:",
        ]
        for o in apnsTokenOptions {
            lines += Help.option(o.flag + " " + o.value, environment: nil, defaultText: o.defaultText, help: o.help)
        }
        lines += ["", "exit codes: 0 printed; 1 the key file cannot be read or is not a P-256 private key; 2 bad options."]
        return lines.joined(separator: "\n")
    }
}
