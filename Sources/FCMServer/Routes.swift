import APNs
import Autopush
import FCMRegistrations
import GCM
import Control
import FCMEngine
import FCMLegacy
import FCMV1
import HTTPServer
import RoomKit
import WebPush

/// What answers a request once its route is found: the request, the `{name}` segments of the
/// route's pattern, and the responder to answer through (now, or later for sends and long polls).
typealias RouteHandler = @Sendable (HTTPRequest, PathParams, HTTPResponder) -> Void

extension HTTPApp {
    /// Every HTTP route (how patterns match: Router.swift). A literal path wins over `{…}`
    /// patterns, which win over prefixes (`/...`); an entry of another method does not count.
    ///
    /// Each surface answers in its own format and makes its own checks first: the FCM paths
    /// theirs (a `*` route answers a wrong method itself, after the checks that come first),
    /// `iid` the body's size and the server key, `control` the body's size and the control
    /// token, `v1` the Bearer credential. A path nothing matches gets the plain-text `Not Found: PATH`.
    static func router(engine: Engine, maxBodyBytes: Int, credentials: GoogleCredentials, send: FCMSendRoute, groups: GroupRoutes, page: WebPageRoute, iid: IIDRoutes,
                       control: ControlAPI, token: TokenRoute, apns: APNsRoutes,
                       apnsControl: APNsControl, autopush: AutopushRoom, log: Log) -> Router<RouteHandler> {
        let v1 = V1Routes(engine: engine, credentials: credentials, maxBodyBytes: maxBodyBytes)
        let webPush = WebPushRoutes(engine: engine, log: log)
        let gcm = GCMRoutes(engine: engine)
        let firebase = FCMRegistrationRoutes(engine: engine)
        let fcm: [(String, String, RouteHandler)] = [
            ("*",      "/fcm/send",                                send.handle),     // POST
            ("*",      "/gcm/send",                                send.handle),     // POST
            ("*",      "/fcm/notification",                        groups.handle),   // GET, POST
            ("*",      "/gcm/notification",                        groups.handle),   // GET, POST
            // `GET /` upgraded with the subprotocol push-notification is Firefox's default server URL.
            ("*",      "/",                                        { r, p, responder in
                if AutopushRoom.isAutopushUpgrade(r) { autopush.upgrade(r, p, responder) } else { page.handle(r, p, responder) }
            }),                                                                      // GET, HEAD
            // Firefox's push service: the autopush WebSocket (Autopush/AutopushRoom.swift).
            ("*",      "/autopush",                                autopush.upgrade), // GET, an upgrade
            ("*",      "/index.html",                              page.handle),     // GET, HEAD
            ("*",      "/token",                                   token.handle),    // POST: OAuth 2.0
            ("*",      "/oauth2/v4/token",                         token.handle),    // POST
            ("*",      "/o/oauth2/token",                          token.handle),    // POST
            // HTTP v1: Google's JSON errors, its 404 included.
            ("*",      "/v1/projects/{project}/messages:send",     v1.send),         // POST
            // Firebase's web registration APIs (FCMRegistrations/FCMRegistrationRoutes.swift).
            ("POST",   "/v1/projects/{project}/installations",     firebase.createInstallation),
            ("POST",   "/v1/projects/{project}/installations/{fid}/authTokens:generate", firebase.generateAuthToken),
            ("DELETE", "/v1/projects/{project}/installations/{fid}", firebase.deleteInstallation),
            ("POST",   "/v1/projects/{project}/registrations",     firebase.createRegistration),
            ("GET",    "/v1/projects/{project}/registrations/{token}", firebase.registration),
            ("PATCH",  "/v1/projects/{project}/registrations/{token}", firebase.registration),
            ("DELETE", "/v1/projects/{project}/registrations/{token}", firebase.registration),
            ("POST",   "/v1/projects/{project}/registrations/{token}/topicSubscriptions", v1.subscribe),
            ("DELETE", "/v1/projects/{project}/registrations/{token}/topicSubscriptions/{topic}", v1.unsubscribe),
            ("*",      "/v1/...",                                  v1.notFound),
            // APNs: Apple's {"reason":…} answers, BadPath included (APNs/APNsRoutes.swift).
            ("*",      "/3/...",                                   apns.handle),     // POST /3/device/{token}
            // Web Push: autopush's {"code","errno","error","message"} answers (WebPush/WebPushRoutes.swift).
            // `/fcm/send` itself (no segment after it) is the legacy send above.
            ("*",      "/wp/{id}",                                 webPush.push),    // POST
            ("*",      "/fcm/send/{id}",                           webPush.push),    // POST
            ("*",      "/wpush/v2/{id}",                           webPush.push),    // POST: Mozilla's endpoint form
            // FCM's device side (GCM/GCMRoutes.swift): Chromium's checkin and registrations.
            ("*",      "/checkin",                                 gcm.checkin),     // POST, protobuf
            ("*",      "/c2dm/register3",                          gcm.register),    // POST, a form
            ("*",      "/m/{id}",                                  webPush.message), // DELETE
        ]
        let instanceID: [(String, String, IIDRoutes.Handler)] = [
            ("POST",   "/iid/v1:batchAdd",                         iid.batchAdd),
            ("POST",   "/iid/v1:batchRemove",                      iid.batchRemove),
            ("POST",   "/iid/v1/{token?}/rel/topics/{topic?}",     iid.subscribe),
            ("GET",    "/iid/info/{token?}",                       iid.info),
            ("*",      "/iid/...",                                 iid.notFound),    // {"error":"Not found: METHOD PATH"}
        ]
        let controlAPI = controlRoutes(control, apnsControl)
        return Router(fcm
                      + instanceID.map { m, p, h in (m, p, { iid.run(h, $0, $1, $2) }) }
                      + controlAPI.map { m, p, h in (m, p, { control.run(h, $0, $1, $2) }) },
                      otherwise: { r, _, responder in
                          responder.send(HTTPResponse(status: 404, contentType: ContentType.text, body: "Not Found: \(r.path)\n"))
                      })
    }

    /// The control API's routes (docs/spec/control-api.md), APNs's credentials among them
    /// (APNs/APNsControl.swift): each runs behind the body's size and the control token.
    static func controlRoutes(_ control: ControlAPI, _ apnsControl: APNsControl) -> [(String, String, ControlHandler)] {
        [
            ("GET",    "/api/v1/health",                           control.health),
            ("GET",    "/readyz",                                  control.readyz),
            ("GET",    "/livez",                                   control.livez),
            ("GET",    "/api/v1/tls/ca.pem",                       control.tlsCAFile),
            ("POST",   "/api/v1/reset",                            control.reset),
            ("GET",    "/api/v1/clock",                            control.clock),
            ("POST",   "/api/v1/clock",                            control.setClock),
            ("GET",    "/api/v1/events",                           control.events),
            ("GET",    "/api/v1/stats",                            control.stats),
            ("GET",    "/api/v1/stats/series",                     control.statsSeries),
            ("GET",    "/api/v1/projects",                         control.projects),
            ("POST",   "/api/v1/projects",                         control.createProject),
            ("GET",    "/api/v1/projects/{sender_id}",             control.project),
            ("DELETE", "/api/v1/projects/{sender_id}",             control.deleteProject),
            ("POST",   "/api/v1/projects/{project}/service-accounts", control.createServiceAccount),
            ("GET",    "/api/v1/projects/{project}/service-accounts", control.serviceAccounts),
            ("DELETE", "/api/v1/projects/{project}/service-accounts/{key_id}", control.deleteServiceAccount),
            ("POST",   "/api/v1/projects/{project}/access-tokens", control.createAccessToken),
            ("GET",    "/api/v1/access-tokens",                    control.accessTokens),
            ("DELETE", "/api/v1/access-tokens/{id}",               control.revokeAccessToken),
            ("GET",    "/api/v1/devices",                          control.devices),
            ("POST",   "/api/v1/devices",                          control.createDevice),
            ("GET",    "/api/v1/devices/{token}",                  control.device),
            ("PATCH",  "/api/v1/devices/{token}",                  control.setOnline),
            ("DELETE", "/api/v1/devices/{token}",                  control.deleteDevice),
            ("POST",   "/api/v1/devices/{token}:unregister",       control.unregister),
            ("POST",   "/api/v1/devices/{token}:refresh",          control.refresh),
            ("POST",   "/api/v1/devices/{token}/upstream",         control.sendUpstream),
            ("POST",   "/api/v1/devices/{token}/web-push/expire",  control.expireWebPush),
            ("POST",   "/api/v1/devices/{token}/topics/{topic}",   control.subscribe),
            ("DELETE", "/api/v1/devices/{token}/topics/{topic}",   control.unsubscribe),
            ("GET",    "/api/v1/devices/{token}/messages",         control.inbox),
            ("GET",    "/api/v1/devices/{token}/messages/{id}",    control.inboxEntry),
            ("GET",    "/api/v1/messages",                         control.messages),
            ("GET",    "/api/v1/messages/{id}",                    control.message),
            ("GET",    "/api/v1/upstream",                         control.upstream),
            ("GET",    "/api/v1/topics",                           control.topics),
            ("GET",    "/api/v1/topics/{name}",                    control.topic),
            ("GET",    "/api/v1/groups",                           control.groups),
            ("GET",    "/api/v1/groups/{key}",                     control.group),
            ("GET",    "/api/v1/faults",                           control.faults),
            ("POST",   "/api/v1/faults",                           control.addFault),
            ("DELETE", "/api/v1/faults",                           control.deleteFaults),
            ("DELETE", "/api/v1/faults/{id}",                      control.deleteFault),
            ("POST",   "/api/v1/apns/keys",                        apnsControl.createAPNsKey),
            ("GET",    "/api/v1/apns/keys",                        apnsControl.apnsKeys),
            ("DELETE", "/api/v1/apns/keys/{key_id}",               apnsControl.deleteAPNsKey),
            ("POST",   "/api/v1/apns/certificates",                apnsControl.createAPNsCertificate),
            ("GET",    "/api/v1/apns/certificates",                apnsControl.apnsCertificateList),
            ("DELETE", "/api/v1/apns/certificates/{id}",           apnsControl.deleteAPNsCertificate),
            ("GET",    "/api/v1/apns/teams",                       apnsControl.apnsTeams),
            ("PUT",    "/api/v1/apns/teams/{team_id}",             apnsControl.putAPNsTeam),
            ("GET",    "/api/v1/clients",                          control.clients),
            ("GET",    "/api/v1/clients/{id}",                     control.client),
            ("DELETE", "/api/v1/clients/{id}",                     control.deleteClient),
            ("POST",   "/api/v1/clients/{id}:disconnect",          control.disconnectClient),
            ("GET",    "/api/v1/xmpp/connections",                 control.connections),
            ("POST",   "/api/v1/xmpp:drain",                       control.drainAll),
            ("POST",   "/api/v1/xmpp/connections/{id}:drain",      control.drain),
            ("*",      "/api/v1/...",                              control.noSuchCall), // {"error":{"code":"not_found",…}}
        ]
    }
}
