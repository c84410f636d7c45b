public import FCMModel
import Platform
import FCMCore
import FCMStore

extension Engine {
    // MARK: Projects

    /// Creates a project; with `upsert` (fixtures), an existing one gains the keys and apps it lacks.
    @discardableResult
    public func createProject(_ p: Project, upsert: Bool = false) throws(EngineError) -> Project {
        let (project, ticket) = try createProjectQueued(p, upsert: upsert)
        if let ticket { try commitControl(ticket) }
        return project
    }

    /// `createProject` without waiting for the commit (fixture loading waits once at the end).
    func createProjectQueued(_ p: Project, upsert: Bool) throws(EngineError) -> (Project, Store.Ticket?) {
        let result: Result<(Project, Store.Ticket?), EngineError> = state.withLock { s in
            for k in p.serverKeys {
                if let owner = s.keyOwner[k], owner != p.senderID {
                    return .failure(.conflict("server key is already a key of project '\(owner)'"))
                }
            }
            if let other = s.projects.values.first(where: { $0.projectID == p.projectID && $0.senderID != p.senderID }) {
                return .failure(.conflict("project_id '\(p.projectID)' is already the id of project '\(other.senderID)'"))
            }
            for a in p.serviceAccounts {
                if let owner = s.projects.values.first(where: { o in o.senderID != p.senderID && o.serviceAccounts.contains { $0.privateKeyID == a.privateKeyID } }) {
                    return .failure(.conflict("service account key '\(a.privateKeyID)' belongs to project '\(owner.senderID)'"))
                }
            }
            var merged = p
            var newAccounts = p.serviceAccounts
            if let old = s.projects[p.senderID] {
                guard upsert else { return .failure(.conflict("project '\(p.senderID)' already exists")) }
                merged = old
                for k in p.serverKeys where !merged.serverKeys.contains(k) { merged.serverKeys.append(k) }
                for a in p.apps where merged.app(named: a.app) == nil { merged.apps.append(a) }
                // A project id given in full replaces the one a project had by default.
                if p.projectID != Project.defaultID(senderID: p.senderID) { merged.projectID = p.projectID }
                newAccounts = p.serviceAccounts.filter { a in !old.serviceAccounts.contains { $0.privateKeyID == a.privateKeyID } }
                merged.serviceAccounts += newAccounts
                if merged == old { return .success((old, nil)) }
            }
            s.insert(merged)
            publishCredentials(s)
            let row = merged
            return .success((merged, submit([Writes.saveProject(senderID: row.senderID, projectID: row.projectID, keysJSON: row.keysJSON,
                                                                appsJSON: row.appsJSON, createdAt: row.createdAt)]
                                                + newAccounts.map { Self.save($0, of: row.senderID) })))
        }
        return try result.get()
    }

    /// Every project, in creation order.
    public func projects() -> [Project] {
        state.withLock { s in s.projectOrder.compactMap { s.projects[$0] } }
    }

    /// One project, by its sender id or its project id.
    public func project(_ senderIDOrProjectID: String) throws(EngineError) -> Project {
        let found = state.withLock { s in
            s.project(named: senderIDOrProjectID)
        }
        guard let found else { throw .notFound("project '\(senderIDOrProjectID)' does not exist") }
        return found
    }

    /// Forgets a project (its keys stop working; its devices stay until reset).
    public func deleteProject(_ senderID: String) throws(EngineError) {
        let ticket: Store.Ticket? = state.withLock { s in
            guard let p = s.projects[senderID] else { return nil }
            for k in p.serverKeys where s.keyOwner[k] == senderID { s.keyOwner[k] = nil }
            s.projects[senderID] = nil
            s.projectOrder.removeAll { $0 == senderID }
            publishCredentials(s)
            return submit([Writes.deleteProject(senderID)])
        }
        guard let ticket else { throw .notFound("project '\(senderID)' does not exist") }
        try commitControl(ticket)
    }

    // MARK: Service accounts

    /// Adds a service account to a project (by sender id or project id); the project as it is then.
    public func addServiceAccount(_ account: ServiceAccount, to project: String) throws(EngineError) -> Project {
        let result: Result<(Project, Store.Ticket), EngineError> = state.withLock { s in
            guard var p = s.project(named: project) else {
                return .failure(.notFound("project '\(project)' does not exist"))
            }
            if s.projects.values.contains(where: { $0.serviceAccounts.contains { $0.privateKeyID == account.privateKeyID } }) {
                return .failure(.conflict("service account key '\(account.privateKeyID)' exists"))
            }
            p.serviceAccounts.append(account)
            s.projects[p.senderID] = p
            publishCredentials(s)
            return .success((p, submit([Self.save(account, of: p.senderID)])))
        }
        let (p, ticket) = try result.get()
        try commitControl(ticket)
        return p
    }

    /// Revokes a service account's key: its JWTs (and the access tokens they got) stop working.
    public func deleteServiceAccount(_ privateKeyID: String, of project: String) throws(EngineError) {
        let result: Result<Store.Ticket, EngineError> = state.withLock { s in
            guard var p = s.project(named: project) else {
                return .failure(.notFound("project '\(project)' does not exist"))
            }
            guard let i = p.serviceAccounts.firstIndex(where: { $0.privateKeyID == privateKeyID }) else {
                return .failure(.notFound("service account key '\(privateKeyID)' does not exist in project '\(project)'"))
            }
            p.serviceAccounts.remove(at: i)
            s.projects[p.senderID] = p
            publishCredentials(s)
            return .success(submit([Writes.deleteServiceAccount(privateKeyID)]))
        }
        try commitControl(try result.get())
    }

    /// The write that stores a service account.
    static func save(_ a: ServiceAccount, of senderID: String) -> WriteOp {
        Writes.saveServiceAccount(senderID: senderID, privateKeyID: a.privateKeyID, clientEmail: a.clientEmail, clientID: a.clientID,
                                  publicKey: a.publicKeyPEM, createdAt: a.createdAt)
    }
}

extension Engine {
    /// A project by its sender id or its project id, as of the last change of projects (read
    /// without the state lock).
    public func project(named name: String) -> Project? {
        credentials.withLock { $0.project(named: name) }
    }
}

extension EngineState {
    /// A project by its sender id or its project id (what `{project}` in a path may be).
    func project(named name: String) -> Project? {
        projects[name] ?? projects.values.first { $0.projectID == name }
    }
}
