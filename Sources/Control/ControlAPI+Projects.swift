public import RoomKit
import Platform
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// `/api/v1/projects`: sender ids, their server keys and apps.
extension ControlAPI {
    /// `GET /api/v1/projects`.
    public func projects(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.projects(), c.query, Render.project)
    }

    /// `POST /api/v1/projects`.
    public func createProject(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let p = try Self.projectSpec(try c.jsonBody(), now: engine.clock.nowMillis())
        return ok(Render.project(try engine.createProject(p)), status: 201)
    }

    /// `GET /api/v1/projects/{sender_id}`: the sender id or the project id.
    public func project(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        ok(Render.project(try engine.project(c["sender_id"])))
    }

    /// `DELETE /api/v1/projects/{sender_id}`: the sender id or the project id.
    public func deleteProject(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try engine.deleteProject(try engine.project(c["sender_id"]).senderID)
        return Self.noContent
    }

    /// A project from its JSON form (`POST /api/v1/projects` and fixtures).
    public static func projectSpec(_ o: Body, now: Int64) throws(ControlError) -> Project {
        try o.allow(["sender_id", "server_keys", "apps", "project_id", "service_accounts"])
        guard let sender = try o.string("sender_id"), !sender.isEmpty, !sender.contains("/"), !sender.contains(" ") else {
            throw .badRequest("sender_id is required: a non-empty string without spaces or slashes")
        }
        let keys = try o.stringArray("server_keys") ?? []
        if keys.contains(where: { $0.isEmpty }) { throw .badRequest("server_keys must not contain an empty key") }
        var apps: [AppConfig] = []
        for (i, v) in (try o.array("apps") ?? []).enumerated() {
            guard let obj = v.objectValue else { throw .badRequest("apps[\(i)] must be an object") }
            let a = Body(obj, path: "apps[\(i)].")
            try a.allow(["app", "platform", "apns_credential"])
            guard let name = try a.string("app"), !name.isEmpty else { throw .badRequest("apps[\(i)].app is required") }
            let platform = try a.platform("platform") ?? .android
            let cred = try a.string("apns_credential") ?? "valid"
            guard ["valid", "missing", "expired"].contains(cred) else {
                throw .badRequest("apps[\(i)].apns_credential must be valid, missing or expired")
            }
            apps.append(AppConfig(app: name, platform: platform, apnsCredential: cred))
        }
        let projectID = try o.string("project_id")
        if let id = projectID, id.isEmpty || id.contains("/") || id.contains(" ") || id.contains(":") {
            throw .badRequest("project_id must be a non-empty string without spaces, slashes or colons")
        }
        var accounts: [ServiceAccount] = []
        for (i, v) in (try o.array("service_accounts") ?? []).enumerated() {
            guard let obj = v.objectValue else { throw .badRequest("service_accounts[\(i)] must be an object") }
            accounts.append(try serviceAccountSpec(Body(obj, path: "service_accounts[\(i)]."), now: now))
        }
        return Project(senderID: sender, serverKeys: keys, apps: apps, createdAt: now, projectID: projectID, serviceAccounts: accounts)
    }
}
