public import RoomKit
import FCMEngine
public import FCMModel
import FCMCore
public import HTTPServer

/// `/api/v1/topics`: topics and their subscribers.
extension ControlAPI {
    /// `GET /api/v1/topics`.
    public func topics(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        try paged(engine.allTopics(), c.query) { Self.topicJSON($0.name, $0.subscribers) }
    }

    /// `GET /api/v1/topics/{name}` (`/topics/NAME` works too).
    public func topic(_ c: ControlCall) throws(ControlError) -> HTTPResponse? {
        let name = c["name"]
        let t = try engine.topic(Topics.name(name))
        return ok(Self.topicJSON(t.name, t.subscribers))
    }

    static func topicJSON(_ name: String, _ subscribers: [String]) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.key("name"); w.value(name)
        w.key("subscribers"); w.beginArray()
        for t in subscribers { w.value(t) }
        w.endArray()
        w.key("count"); w.value(subscribers.count)
        w.endObject()
        return w.string
    }
}
