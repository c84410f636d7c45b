import FCMStore
import FCMEngine
import FCMCore
import HTTPServer
import Platform

/// `/api/v1/stats`: the counters of the page's overview.
extension ControlAPI {
    /// `GET /api/v1/stats`: `{"messages":{"accepted":N,"rejected":N},"errors":{CODE:N,…},
    /// "pending":N,"xmpp_connections":N,"devices":N}`, errors by code in code order.
    func stats(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        // In the first moments after a start the store's earlier sends are still being counted:
        // the answer waits for that on a thread of its own, not on the HTTP loop's (which serves
        // every other HTTP/1.1 client meanwhile).
        guard engine.storedSendsCounted else {
            let responder = c.responder
            spawnThread { [self] in
                do throws(ControlError) {
                    responder.send(try statsAnswer())
                } catch {
                    responder.send(Self.errorResponse(error))
                }
            }
            return nil
        }
        return try statsAnswer()
    }

    private func statsAnswer() throws(ControlError) -> HTTPResponse {
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
