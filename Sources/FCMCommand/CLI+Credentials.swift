import FCMServer
import FCMModel
import FCMCore
import HTTPServer
import Platform
import TLS

/// The commands that make a credential and hand over its private key once: `service-account`,
/// `apns-key`, `apns-cert` (through a running server's control API) and `cert` (a local CA on
/// disk). Each writes the secret with mode 0600 and warns when the file lands in a git work tree.
extension CLI {
    /// `service-account`: a project's service account JSON, private key included, for an SDK.
    static func serviceAccount(_ client: Client, server: String, options: [String: [String]]) -> Int32 {
        guard let project = options["--project"]?.last else { return usage("service-account needs --project PROJECT") }
        guard let r = created(client, server: server, "/api/v1/projects/\(FormBody.percentEncode(project))/service-accounts", nil) else {
            return 1
        }
        guard let out = options["--out"]?.last else {
            print(r.text)
            return 0
        }
        guard writeSecret(out, r.text + "\n") else { return 1 }
        print("wrote \(out): \(r.object?["client_email"]?.stringValue ?? "") (token_uri \(r.object?["token_uri"]?.stringValue ?? ""))")
        warnIfInGitWorkTree(out)
        return 0
    }

    /// `apns-key`: an APNs signing key of a team, its `.p8` written (or printed) once.
    static func apnsKey(_ client: Client, server: String, options: [String: [String]], json: Bool) -> Int32 {
        guard let team = options["--team"]?.last else { return usage("apns-key needs --team TEAM_ID") }
        for (flag, id) in [("--team", team)] + (options["--key-id"]?.last.map { [("--key-id", $0)] } ?? []) where !APNsTeam.isAppleID(id) {
            return usage("\(flag) must be 10 uppercase letters or digits, got '\(id)'")
        }
        var fields: [(String, JSONValue)] = [("team_id", .string(team)),
                                             ("bundle_ids", .array((options["--bundle-id"] ?? []).map { .string($0) }))]
        if let id = options["--key-id"]?.last { fields.append(("key_id", .string(id))) }
        guard let r = created(client, server: server, "/api/v1/apns/keys", fields) else { return 1 }
        guard let pem = r.object?["private_key_pem"]?.stringValue else { return refused(r) }
        let keyID = r.object?["key_id"]?.stringValue ?? ""
        guard let out = options["--out"]?.last else {
            print(json ? r.text : pem + "key id \(keyID), team \(team)")
            return 0
        }
        guard writeSecret(out, pem) else { return 1 }
        if json {
            // The answer without its private key, which is in the file now.
            print(JSONValue.object(JSONObject([("key_id", .string(keyID)), ("team_id", .string(team)), ("out", .string(out))])).serialized())
        } else {
            print("wrote \(out): key id \(keyID), team \(team)")
        }
        warnIfInGitWorkTree(out)
        return 0
    }

    /// `apns-cert`: a client certificate from the server's CA (`POST /api/v1/apns/certificates`),
    /// written with its key as one PEM file (what aioapns's `client_cert` and curl's `--cert`
    /// take).
    static func apnsCertificate(_ client: Client, server: String, options: [String: [String]], json: Bool) -> Int32 {
        guard let bundles = options["--bundle-id"], let first = bundles.first else { return usage("apns-cert needs --bundle-id BUNDLE_ID") }
        if let e = options["--environment"]?.last, !["sandbox", "production", "both"].contains(e) {
            return usage("--environment must be sandbox, production or both, got '\(e)'")
        }
        var fields: [(String, JSONValue)] = [("bundle_id", .string(first)),
                                             ("environment", .string(options["--environment"]?.last ?? "sandbox"))]
        if bundles.count > 1 { fields.append(("bundle_ids", .array(bundles.dropFirst().map { .string($0) }))) }
        if let d = options["--days"]?.last {
            guard let days = Int64(d), (1...3650).contains(days) else { return usage("--days takes a whole number of days, 1-3650") }
            fields.append(("days", .number(JSONNumber(days))))
        }
        guard let r = created(client, server: server, "/api/v1/apns/certificates", fields) else { return 1 }
        guard let o = r.object, let certificate = o["certificate_pem"]?.stringValue,
              let key = o["private_key_pem"]?.stringValue else { return refused(r) }
        let id = o["id"]?.stringValue ?? ""
        let environments = (o["environments"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: " and ")
        guard let out = options["--out"]?.last else {
            print(json ? r.text : certificate + key + "certificate \(id), \(first), \(environments)")
            return 0
        }
        guard writeSecret(out, certificate + key) else { return 1 }
        if json {
            // The answer without its private key, which is in the file now.
            var kept = o
            kept["private_key_pem"] = nil
            kept["out"] = .string(out)
            print(JSONValue.object(kept).serialized())
        } else {
            print("wrote \(out): certificate \(id), \(first), \(environments)")
        }
        warnIfInGitWorkTree(out)
        return 0
    }

    /// POSTs `fields` as a JSON object (nil: no body) to `path`: the 201 answer, or nil once it
    /// said why not (unreachable, or the server's error message).
    static func created(_ client: Client, server: String, _ path: String, _ fields: [(String, JSONValue)]?) -> Response? {
        let r: Response?
        if let fields {
            let body = JSONValue.object(JSONObject(fields)).serialized()
            r = client.request("POST", path, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        } else {
            r = client.request("POST", path)
        }
        guard let r else {
            print("fcm-mock: cannot reach \(server)")
            return nil
        }
        guard r.status == 201 else {
            _ = refused(r)
            return nil
        }
        return r
    }

    /// Prints the server's error message (or its whole answer) for a request that made nothing.
    static func refused(_ r: Response) -> Int32 {
        print("fcm-mock: HTTP \(r.status): \(r.object?["error"]?.objectValue?["message"]?.stringValue ?? r.text)")
        return 1
    }

    /// Writes a private key's file (mode 0600); false (said on stderr) when it cannot be written.
    /// The caller warns (`warnIfInGitWorkTree`) once it has said what it wrote.
    static func writeSecret(_ out: String, _ text: String) -> Bool {
        guard SystemIO.writeFile(out, Array(text.utf8), mode: 0o600) else {
            writeToStandardError("fcm-mock: cannot write \(out)\n")
            return false
        }
        return true
    }

    /// `fcm-mock cert --out DIR [--host NAME]...`: a local CA and a server certificate it signs for
    /// Google's FCM host names, localhost and every `--host`. Returns the exit code.
    public static func cert(_ args: [String]) -> Int32 {
        var out: String?
        var names = Application.googleHosts
        var i = 0
        while i < args.count {
            let a = args[i]
            guard a == "--out" || a == "--host" else { return usage("unknown option '\(a)' for 'cert' (cert --out DIR [--host NAME]...)") }
            i += 1
            guard i < args.count, !args[i].isEmpty, !args[i].hasPrefix("-") else { return usage("\(a) needs a value") }
            if a == "--out" { out = args[i] } else if !names.contains(args[i]) { names.append(args[i]) }
            i += 1
        }
        guard let out else { return usage("cert needs --out DIR") }
        do {
            let files = try LocalCertificateAuthority.create(names: names, directory: out)
            print("wrote \(files.caCertificate) (the CA to trust), \(files.caKey), \(files.serverCertificate), \(files.serverKey)")
            print("serve with: fcm-mock serve --http-tls --tls-cert \(files.serverCertificate) --tls-key \(files.serverKey)")
            print("names: \(names.joined(separator: " "))")
            warnIfInGitWorkTree(files.caKey)
            return 0
        } catch {
            writeToStandardError("fcm-mock: \(error.description)\n")
            return 1
        }
    }

    /// The top of the git work tree holding `path` (a file about to be or just written), if any:
    /// the nearest folder above it with a `.git` (a folder, or a file in a linked work tree).
    static func gitWorkTree(containing path: String) -> String? {
        var dir = SystemIO.absolutePath(path)
        while let slash = dir.lastIndex(of: "/") {
            dir = String(dir[..<slash])
            if SystemIO.kind(of: dir + "/.git") != nil { return dir.isEmpty ? "/" : dir }
            if dir.isEmpty { return nil }
        }
        return nil
    }

    /// A private key written into a checkout is one `git add .` from being published: says so on
    /// stderr (the command still succeeds; the key is what the user asked for).
    static func warnIfInGitWorkTree(_ keyFile: String) {
        guard let tree = gitWorkTree(containing: keyFile) else { return }
        writeToStandardError("fcm-mock: warning: \(keyFile) holds a private key and is inside the git work tree \(tree): "
                             + "keep it out of commits (.gitignore it) or write it elsewhere\n")
    }
}
