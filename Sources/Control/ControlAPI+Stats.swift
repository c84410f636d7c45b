public import RoomKit
import FCMStore
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer
import Platform

/// `/api/v1/stats`: the counters of the page's overview.
extension ControlAPI {
    /// `GET /api/v1/stats`: `{"messages":{"accepted":N,"rejected":N},"errors":{CODE:N,…},
    /// "pending":N,"xmpp_connections":N,"devices":N}`, errors by code in code order.
    public func stats(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
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

/// `/api/v1/stats/series`: the overview chart's history.
extension ControlAPI {
    /// `GET /api/v1/stats/series?window=S&bucket=B`: sends and errors per bucket of B seconds over
    /// the last S seconds of the mock clock (S at most 3600, a multiple of B, at most 600 buckets),
    /// oldest first: `{"start":RFC3339,"end":RFC3339,"window":S,"bucket":B,"sends":[…],"errors":[…]}`.
    public func statsSeries(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let window = try c.query.int("window") ?? 600
        let bucket = try c.query.int("bucket") ?? 10
        guard (1...Int64(Engine.seriesSeconds)).contains(window) else { throw .badRequest("window must be 1 to \(Engine.seriesSeconds) seconds") }
        guard bucket >= 1, window % bucket == 0, window / bucket <= 600 else {
            throw .badRequest("bucket must divide window into at most 600 buckets")
        }
        // As for the counters: right after a start, the wait for the store's count is not the HTTP loop's.
        guard engine.storedSendsCounted else {
            let responder = c.responder
            spawnThread { [self] in
                do throws(ControlError) {
                    responder.send(try seriesAnswer(window: window, bucket: bucket))
                } catch {
                    responder.send(Self.errorResponse(error))
                }
            }
            return nil
        }
        return try seriesAnswer(window: window, bucket: bucket)
    }

    private func seriesAnswer(window: Int64, bucket: Int64) throws(ControlError) -> HTTPResponse {
        let s: (start: Int64, sends: [Int64], errors: [Int64])
        do {
            s = try engine.sendSeries(bucket: Int(bucket), count: Int(window / bucket))
        } catch {
            throw .internal("cannot count the stored sends: \(error.description)")
        }
        var w = JSONWriter()
        w.beginObject()
        w.key("start"); w.value(rfc3339(millis: s.start))
        w.key("end"); w.value(rfc3339(millis: s.start + window * 1000))
        w.key("window"); w.value(window)
        w.key("bucket"); w.value(bucket)
        w.key("sends"); w.beginArray(); for n in s.sends { w.value(n) }; w.endArray()
        w.key("errors"); w.beginArray(); for n in s.errors { w.value(n) }; w.endArray()
        w.endObject()
        return ok(w.string)
    }
}
