public import FCMModel
public import FCMCore

/// JSON forms of the control API's objects.
public enum Render {
    static func device(_ d: Device, canonicalToken: String?, topics: [String], pending: Int, webPush: (WebPushSubscription, json: String)? = nil,
                       client: (inout JSONWriter) -> Void = { $0.null() }) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("token"); w.value(d.token)
        w.key("fid"); w.value(d.fid)
        w.key("sender_id"); w.value(d.senderID)
        w.key("app"); w.value(d.app)
        w.key("platform"); w.value(d.platform.rawValue)
        w.key("state"); w.value(d.state.rawValue)
        w.key("canonical_token"); w.value(canonicalToken)
        w.key("online"); w.value(d.online)
        w.key("topics"); w.beginArray()
        for t in topics { w.value(t) }
        w.endArray()
        w.key("pending"); w.value(pending)
        w.key("created_at"); w.value(rfc3339(millis: d.createdAt))
        w.key("last_seen_at"); w.value(rfc3339(millis: d.lastSeenAt))
        // A real client's (docs/real-clients.md); null for a fake device.
        w.key("client"); client(&w)
        if let apns = d.apnsToken {
            w.key("apns_token"); w.value(apns)
            w.key("apns_environment"); w.value(d.apnsEnvironment.rawValue)
            w.key("expires_at"); w.value(d.apnsExpiresAt.map { rfc3339(millis: $0) })
        }
        if let (webPush, shown) = webPush {
            // As the browser shows it (the Web Push room's form); what it would not show, beside it.
            w.key("web_push"); w.raw(shown)
            w.key("web_push_expired"); w.value(webPush.expired)
            w.key("application_server_key"); w.value(webPush.applicationServerKey)
        }
        w.endObject()
        return w.string
    }

    public static func project(_ p: Project) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("sender_id"); w.value(p.senderID)
        w.key("project_id"); w.value(p.projectID)
        w.key("server_keys"); w.raw(p.keysJSON)
        w.key("apps"); w.raw(p.appsJSON)
        w.key("service_accounts"); w.beginArray()
        for a in p.serviceAccounts { serviceAccount(&w, a) }
        w.endArray()
        w.key("created_at"); w.value(rfc3339(millis: p.createdAt))
        w.endObject()
        return w.string
    }

    /// A service account as lists show it: never its private key.
    public static func serviceAccount(_ w: inout JSONWriter, _ a: ServiceAccount) {
        w.beginObject()
        w.key("client_email"); w.value(a.clientEmail)
        w.key("private_key_id"); w.value(a.privateKeyID)
        w.key("client_id"); w.value(a.clientID)
        w.key("public_key"); w.value(a.publicKeyPEM)
        w.key("created_at"); w.value(rfc3339(millis: a.createdAt))
        w.endObject()
    }

    /// `{"items":[…],"next":…}`, the shape of every list.
    public static func list(_ items: [String], next: Int64?) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("items"); w.beginArray()
        for i in items { w.raw(i) }
        w.endArray()
        w.key("next"); w.value(next.map { String($0) })
        w.endObject()
        return w.string
    }
}
