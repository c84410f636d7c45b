import FCMCore
import HTTPServer

/// `/api/v1/stats`: the counters of the page's overview.
extension ControlAPI {
    /// `GET /api/v1/stats`: `{"messages":{"accepted":N,"rejected":N},"errors":{CODE:N,…},
    /// "pending":N,"xmpp_connections":N,"devices":N}`, errors by code in code order.
    func stats(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let s: StatsSnapshot
        do {
            s = try engine.stats()
        } catch {
            throw .internal("cannot count the stored sends: \(error.description)")
        }
        let connections = xmppConnections().count
        var w = JSONWriter()
        w.beginObject()
        w.key("messages"); w.beginObject()
        w.key("accepted"); w.value(s.counts.accepted)
        w.key("rejected"); w.value(s.counts.rejected)
        w.endObject()
        w.key("errors"); w.beginObject()
        for (code, n) in s.counts.errors.sorted(by: { $0.key < $1.key }) {
            w.key(code); w.value(n)
        }
        w.endObject()
        w.key("pending"); w.value(Int64(s.pending))
        w.key("xmpp_connections"); w.value(Int64(connections))
        w.key("devices"); w.value(Int64(s.devices))
        w.endObject()
        return ok(w.string)
    }
}
