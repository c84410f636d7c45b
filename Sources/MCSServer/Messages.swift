// Long because: every packet and part of mcs.proto the transport reads or writes, each a few
// lines of field numbers, kept in one file so they are read side by side with the .proto.
// mcs.proto's messages (Chromium's google_apis/gcm/protocol/mcs.proto, proto2), each written and
// read by hand over Protobuf's codec. Field numbers are the clients': they parse these bytes.
// Decoding is proto2's: unknown fields (and known ones in the wrong wire type, which protobuf
// keeps as unknown) are skipped, unknown enum values likewise, and a missing `required` field,
// nested ones included, fails the whole message. Messages a mock never reads (ClientEvent) are
// still walked, so malformed bytes inside them fail too.

public import Protobuf

/// A message of mcs.proto: read from a reader positioned on its fields, written field by field.
public protocol MCSProtoMessage: Sendable, Equatable {
    /// Reads the message's fields to the reader's end, checking required fields.
    init(reading r: inout ProtoReader) throws(ProtoError)
    /// Writes the message's fields, in field-number order.
    func write(to w: inout ProtoWriter)
}

extension MCSProtoMessage {
    /// Decodes a whole message.
    public init(decoding bytes: [UInt8]) throws(ProtoError) {
        var r = ProtoReader(bytes)
        try self.init(reading: &r)
    }

    /// Decodes a whole message from part of a buffer.
    public init(decoding bytes: ArraySlice<UInt8>) throws(ProtoError) {
        var r = ProtoReader(bytes)
        try self.init(reading: &r)
    }

    /// The message's bytes (without MCS's tag and size).
    public func encode() -> [UInt8] {
        var w = ProtoWriter()
        write(to: &w)
        return w.bytes
    }
}

/// A message that travels as an MCS packet of its own, behind its tag byte.
public protocol MCSPacketMessage: MCSProtoMessage {
    static var tag: MCSTag { get }
}

/// The packet tags of MCS that this server knows (§3.5's table); any other closes the connection.
public enum MCSTag: UInt8, Sendable, CaseIterable {
    case heartbeatPing = 0
    case heartbeatAck = 1
    case loginRequest = 2
    case loginResponse = 3
    case close = 4
    case iqStanza = 7
    case dataMessageStanza = 8
    case streamErrorStanza = 10

    /// The message's name in mcs.proto (log lines say `tag=IqStanza`).
    public var protoName: String {
        switch self {
        case .heartbeatPing: "HeartbeatPing"
        case .heartbeatAck: "HeartbeatAck"
        case .loginRequest: "LoginRequest"
        case .loginResponse: "LoginResponse"
        case .close: "Close"
        case .iqStanza: "IqStanza"
        case .dataMessageStanza: "DataMessageStanza"
        case .streamErrorStanza: "StreamErrorStanza"
        }
    }
}

/// The version byte each side writes before its first packet.
public let mcsVersion: UInt8 = 41

// MARK: - Helpers

func required<T>(_ value: T?, _ message: String, _ field: String) throws(ProtoError) -> T {
    guard let value else { throw .missingRequired(message: message, field: field) }
    return value
}

extension ProtoReader {
    /// The nested message `f` holds, or nil when `f` is not length-delimited (an unknown field).
    func message<M: MCSProtoMessage>(_ f: ProtoField, as: M.Type = M.self) throws(ProtoError) -> M? {
        guard f.bytes != nil else { return nil }
        var inner = try nested(f)
        return try M(reading: &inner)
    }

    /// Walks a nested message no one reads, so malformed bytes inside it still fail.
    func walk(_ f: ProtoField) throws(ProtoError) {
        guard f.bytes != nil else { return }
        var inner = try nested(f)
        try inner.skipAll()
    }
}

extension ProtoWriter {
    mutating func message(_ field: Int, _ m: some MCSProtoMessage) {
        message(field) { m.write(to: &$0) }
    }
}

// MARK: - Shared parts

/// `ErrorInfo`: a login's or an IQ's error.
public struct ErrorInfo: MCSProtoMessage {
    public var code: Int32
    public var message: String?
    public var type: String?
    public var `extension`: Extension?

    public init(code: Int32, message: String? = nil, type: String? = nil, extension: Extension? = nil) {
        self.code = code
        self.message = message
        self.type = type
        self.extension = `extension`
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var code: Int32?, message: String?, type: String?, ext: Extension?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.int32 { code = v }
            case 2: if let v = f.string { message = v }
            case 3: if let v = f.string { type = v }
            case 4: if let v = try r.message(f, as: Extension.self) { ext = v }
            default: break
            }
        }
        self.init(code: try required(code, "ErrorInfo", "code"), message: message, type: type, extension: ext)
    }

    public func write(to w: inout ProtoWriter) {
        w.int32(1, code)
        if let message { w.string(2, message) }
        if let type { w.string(3, type) }
        if let `extension` { w.message(4, `extension`) }
    }
}

/// `Setting`: a name and value pair (login settings such as `new_vc`, `u:f`, `hbping`).
public struct Setting: MCSProtoMessage {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var name: String?, value: String?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { name = v }
            case 2: if let v = f.string { value = v }
            default: break
            }
        }
        self.init(name: try required(name, "Setting", "name"), value: try required(value, "Setting", "value"))
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, name)
        w.string(2, value)
    }
}

/// `HeartbeatStat`: how the client's last heartbeat interval fared.
public struct HeartbeatStat: MCSProtoMessage {
    public var ip: String
    public var timeout: Bool
    public var intervalMs: Int32

    public init(ip: String, timeout: Bool, intervalMs: Int32) {
        self.ip = ip
        self.timeout = timeout
        self.intervalMs = intervalMs
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var ip: String?, timeout: Bool?, interval: Int32?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { ip = v }
            case 2: if let v = f.bool { timeout = v }
            case 3: if let v = f.int32 { interval = v }
            default: break
            }
        }
        self.init(ip: try required(ip, "HeartbeatStat", "ip"), timeout: try required(timeout, "HeartbeatStat", "timeout"),
                  intervalMs: try required(interval, "HeartbeatStat", "interval_ms"))
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, ip)
        w.bool(2, timeout)
        w.int32(3, intervalMs)
    }
}

/// `HeartbeatConfig`: the heartbeat the server asks of the client.
public struct HeartbeatConfig: MCSProtoMessage {
    public var uploadStat: Bool?
    public var ip: String?
    public var intervalMs: Int32?

    public init(uploadStat: Bool? = nil, ip: String? = nil, intervalMs: Int32? = nil) {
        self.uploadStat = uploadStat
        self.ip = ip
        self.intervalMs = intervalMs
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        self.init()
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.bool { uploadStat = v }
            case 2: if let v = f.string { ip = v }
            case 3: if let v = f.int32 { intervalMs = v }
            default: break
            }
        }
    }

    public func write(to w: inout ProtoWriter) {
        if let uploadStat { w.bool(1, uploadStat) }
        if let ip { w.string(2, ip) }
        if let intervalMs { w.int32(3, intervalMs) }
    }
}

/// `Extension`: an IQ's payload, by id (12 SelectiveAck, 13 StreamAck).
public struct Extension: MCSProtoMessage {
    public static let selectiveAck: Int32 = 12
    public static let streamAck: Int32 = 13

    public var id: Int32
    public var data: [UInt8]

    public init(id: Int32, data: [UInt8]) {
        self.id = id
        self.data = data
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var id: Int32?, data: [UInt8]?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.int32 { id = v }
            case 2: if let v = f.bytes { data = Array(v) }
            default: break
            }
        }
        self.init(id: try required(id, "Extension", "id"), data: try required(data, "Extension", "data"))
    }

    public func write(to w: inout ProtoWriter) {
        w.int32(1, id)
        w.bytes(2, data)
    }
}

/// `AppData`: one key and value of a data message.
public struct AppData: MCSProtoMessage {
    public var key: String
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var key: String?, value: String?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { key = v }
            case 2: if let v = f.string { value = v }
            default: break
            }
        }
        self.init(key: try required(key, "AppData", "key"), value: try required(value, "AppData", "value"))
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, key)
        w.string(2, value)
    }
}

// MARK: - Packets

/// Tag 0: a heartbeat ping, from either side.
public struct HeartbeatPing: MCSPacketMessage {
    public static let tag = MCSTag.heartbeatPing
    public var streamID: Int32?
    public var lastStreamIDReceived: Int32?
    public var status: Int64?

    public init(streamID: Int32? = nil, lastStreamIDReceived: Int32? = nil, status: Int64? = nil) {
        self.streamID = streamID
        self.lastStreamIDReceived = lastStreamIDReceived
        self.status = status
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        self.init()
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.int32 { streamID = v }
            case 2: if let v = f.int32 { lastStreamIDReceived = v }
            case 3: if let v = f.int64 { status = v }
            default: break
            }
        }
    }

    public func write(to w: inout ProtoWriter) {
        if let streamID { w.int32(1, streamID) }
        if let lastStreamIDReceived { w.int32(2, lastStreamIDReceived) }
        if let status { w.int64(3, status) }
    }
}

/// Tag 1: the answer to a heartbeat ping, from either side.
public struct HeartbeatAck: MCSPacketMessage {
    public static let tag = MCSTag.heartbeatAck
    public var streamID: Int32?
    public var lastStreamIDReceived: Int32?
    public var status: Int64?

    public init(streamID: Int32? = nil, lastStreamIDReceived: Int32? = nil, status: Int64? = nil) {
        self.streamID = streamID
        self.lastStreamIDReceived = lastStreamIDReceived
        self.status = status
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        let ping = try HeartbeatPing(reading: &r)  // the same fields
        self.init(streamID: ping.streamID, lastStreamIDReceived: ping.lastStreamIDReceived, status: ping.status)
    }

    public func write(to w: inout ProtoWriter) {
        HeartbeatPing(streamID: streamID, lastStreamIDReceived: lastStreamIDReceived, status: status).write(to: &w)
    }
}

/// Tag 2: the client's login, its first packet.
public struct LoginRequest: MCSPacketMessage {
    public static let tag = MCSTag.loginRequest

    public enum AuthService: Int32, Sendable {
        case androidID = 2
    }

    public var id: String
    public var domain: String
    /// The android id, in decimal.
    public var user: String
    public var resource: String
    /// The security token, in decimal.
    public var authToken: String
    /// `android-<hex android id>`.
    public var deviceID: String?
    public var lastRMQID: Int64?
    public var settings: [Setting]
    /// Persistent ids of the messages the client got since it last logged in (acknowledging them).
    public var receivedPersistentIDs: [String]
    public var adaptiveHeartbeat: Bool?
    public var heartbeatStat: HeartbeatStat?
    public var useRMQ2: Bool?
    public var accountID: Int64?
    public var authService: AuthService?
    public var networkType: Int32?
    public var status: Int64?

    public init(id: String, domain: String, user: String, resource: String, authToken: String, deviceID: String? = nil,
                lastRMQID: Int64? = nil, settings: [Setting] = [], receivedPersistentIDs: [String] = [],
                adaptiveHeartbeat: Bool? = nil, heartbeatStat: HeartbeatStat? = nil, useRMQ2: Bool? = nil,
                accountID: Int64? = nil, authService: AuthService? = nil, networkType: Int32? = nil, status: Int64? = nil) {
        self.id = id
        self.domain = domain
        self.user = user
        self.resource = resource
        self.authToken = authToken
        self.deviceID = deviceID
        self.lastRMQID = lastRMQID
        self.settings = settings
        self.receivedPersistentIDs = receivedPersistentIDs
        self.adaptiveHeartbeat = adaptiveHeartbeat
        self.heartbeatStat = heartbeatStat
        self.useRMQ2 = useRMQ2
        self.accountID = accountID
        self.authService = authService
        self.networkType = networkType
        self.status = status
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var id: String?, domain: String?, user: String?, resource: String?, authToken: String?
        var m = LoginRequest(id: "", domain: "", user: "", resource: "", authToken: "")
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { id = v }
            case 2: if let v = f.string { domain = v }
            case 3: if let v = f.string { user = v }
            case 4: if let v = f.string { resource = v }
            case 5: if let v = f.string { authToken = v }
            case 6: if let v = f.string { m.deviceID = v }
            case 7: if let v = f.int64 { m.lastRMQID = v }
            case 8: if let v = try r.message(f, as: Setting.self) { m.settings.append(v) }
            case 10: if let v = f.string { m.receivedPersistentIDs.append(v) }
            case 12: if let v = f.bool { m.adaptiveHeartbeat = v }
            case 13: if let v = try r.message(f, as: HeartbeatStat.self) { m.heartbeatStat = v }
            case 14: if let v = f.bool { m.useRMQ2 = v }
            case 15: if let v = f.int64 { m.accountID = v }
            case 16: if let v = f.int32, let s = AuthService(rawValue: v) { m.authService = s }
            case 17: if let v = f.int32 { m.networkType = v }
            case 18: if let v = f.int64 { m.status = v }
            case 22: try r.walk(f)  // ClientEvent: no required field, nothing the server uses
            default: break
            }
        }
        m.id = try required(id, "LoginRequest", "id")
        m.domain = try required(domain, "LoginRequest", "domain")
        m.user = try required(user, "LoginRequest", "user")
        m.resource = try required(resource, "LoginRequest", "resource")
        m.authToken = try required(authToken, "LoginRequest", "auth_token")
        self = m
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, id)
        w.string(2, domain)
        w.string(3, user)
        w.string(4, resource)
        w.string(5, authToken)
        if let deviceID { w.string(6, deviceID) }
        if let lastRMQID { w.int64(7, lastRMQID) }
        for s in settings { w.message(8, s) }
        for p in receivedPersistentIDs { w.string(10, p) }
        if let adaptiveHeartbeat { w.bool(12, adaptiveHeartbeat) }
        if let heartbeatStat { w.message(13, heartbeatStat) }
        if let useRMQ2 { w.bool(14, useRMQ2) }
        if let accountID { w.int64(15, accountID) }
        if let authService { w.int32(16, authService.rawValue) }
        if let networkType { w.int32(17, networkType) }
        if let status { w.int64(18, status) }
    }
}

/// Tag 3: the server's answer to a login.
public struct LoginResponse: MCSPacketMessage {
    public static let tag = MCSTag.loginResponse
    public var id: String
    public var jid: String?
    /// Absent when the login succeeded.
    public var error: ErrorInfo?
    public var settings: [Setting]
    public var streamID: Int32?
    public var lastStreamIDReceived: Int32?
    public var heartbeatConfig: HeartbeatConfig?
    /// The server's clock, epoch milliseconds.
    public var serverTimestamp: Int64?

    public init(id: String, jid: String? = nil, error: ErrorInfo? = nil, settings: [Setting] = [], streamID: Int32? = nil,
                lastStreamIDReceived: Int32? = nil, heartbeatConfig: HeartbeatConfig? = nil, serverTimestamp: Int64? = nil) {
        self.id = id
        self.jid = jid
        self.error = error
        self.settings = settings
        self.streamID = streamID
        self.lastStreamIDReceived = lastStreamIDReceived
        self.heartbeatConfig = heartbeatConfig
        self.serverTimestamp = serverTimestamp
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var id: String?
        var m = LoginResponse(id: "")
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { id = v }
            case 2: if let v = f.string { m.jid = v }
            case 3: if let v = try r.message(f, as: ErrorInfo.self) { m.error = v }
            case 4: if let v = try r.message(f, as: Setting.self) { m.settings.append(v) }
            case 5: if let v = f.int32 { m.streamID = v }
            case 6: if let v = f.int32 { m.lastStreamIDReceived = v }
            case 7: if let v = try r.message(f, as: HeartbeatConfig.self) { m.heartbeatConfig = v }
            case 8: if let v = f.int64 { m.serverTimestamp = v }
            default: break
            }
        }
        m.id = try required(id, "LoginResponse", "id")
        self = m
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, id)
        if let jid { w.string(2, jid) }
        if let error { w.message(3, error) }
        for s in settings { w.message(4, s) }
        if let streamID { w.int32(5, streamID) }
        if let lastStreamIDReceived { w.int32(6, lastStreamIDReceived) }
        if let heartbeatConfig { w.message(7, heartbeatConfig) }
        if let serverTimestamp { w.int64(8, serverTimestamp) }
    }
}

/// Tag 4: the end of the connection, from either side (an empty message).
public struct Close: MCSPacketMessage {
    public static let tag = MCSTag.close

    public init() {}

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        try r.skipAll()
    }

    public func write(to w: inout ProtoWriter) {}
}

/// Tag 7: an IQ, here the carrier of acknowledgements (SelectiveAck, StreamAck).
public struct IqStanza: MCSPacketMessage {
    public static let tag = MCSTag.iqStanza

    public enum IqType: Int32, Sendable {
        case get = 0
        case set = 1
        case result = 2
        case error = 3
    }

    public var rmqID: Int64?
    public var type: IqType
    public var id: String
    public var from: String?
    public var to: String?
    public var error: ErrorInfo?
    public var `extension`: Extension?
    public var persistentID: String?
    public var streamID: Int32?
    public var lastStreamIDReceived: Int32?
    public var accountID: Int64?
    public var status: Int64?

    public init(rmqID: Int64? = nil, type: IqType, id: String, from: String? = nil, to: String? = nil, error: ErrorInfo? = nil,
                extension: Extension? = nil, persistentID: String? = nil, streamID: Int32? = nil,
                lastStreamIDReceived: Int32? = nil, accountID: Int64? = nil, status: Int64? = nil) {
        self.rmqID = rmqID
        self.type = type
        self.id = id
        self.from = from
        self.to = to
        self.error = error
        self.extension = `extension`
        self.persistentID = persistentID
        self.streamID = streamID
        self.lastStreamIDReceived = lastStreamIDReceived
        self.accountID = accountID
        self.status = status
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var type: IqType?, id: String?
        var m = IqStanza(type: .get, id: "")
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.int64 { m.rmqID = v }
            case 2: if let v = f.int32, let t = IqType(rawValue: v) { type = t }
            case 3: if let v = f.string { id = v }
            case 4: if let v = f.string { m.from = v }
            case 5: if let v = f.string { m.to = v }
            case 6: if let v = try r.message(f, as: ErrorInfo.self) { m.error = v }
            case 7: if let v = try r.message(f, as: Extension.self) { m.extension = v }
            case 8: if let v = f.string { m.persistentID = v }
            case 9: if let v = f.int32 { m.streamID = v }
            case 10: if let v = f.int32 { m.lastStreamIDReceived = v }
            case 11: if let v = f.int64 { m.accountID = v }
            case 12: if let v = f.int64 { m.status = v }
            default: break
            }
        }
        m.type = try required(type, "IqStanza", "type")
        m.id = try required(id, "IqStanza", "id")
        self = m
    }

    public func write(to w: inout ProtoWriter) {
        if let rmqID { w.int64(1, rmqID) }
        w.int32(2, type.rawValue)
        w.string(3, id)
        if let from { w.string(4, from) }
        if let to { w.string(5, to) }
        if let error { w.message(6, error) }
        if let `extension` { w.message(7, `extension`) }
        if let persistentID { w.string(8, persistentID) }
        if let streamID { w.int32(9, streamID) }
        if let lastStreamIDReceived { w.int32(10, lastStreamIDReceived) }
        if let accountID { w.int64(11, accountID) }
        if let status { w.int64(12, status) }
    }
}

/// Extension 12's data: the persistent ids of the messages the client acknowledges.
public struct SelectiveAck: MCSProtoMessage {
    public var ids: [String]

    public init(ids: [String]) { self.ids = ids }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var ids: [String] = []
        while let f = try r.next() {
            if f.number == 1, let v = f.string { ids.append(v) }
        }
        self.init(ids: ids)
    }

    public func write(to w: inout ProtoWriter) {
        for id in ids { w.string(1, id) }
    }
}

/// Extension 13's data: empty; the IQ's `last_stream_id_received` is the acknowledgement.
public struct StreamAck: MCSProtoMessage {
    public init() {}

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        try r.skipAll()
    }

    public func write(to w: inout ProtoWriter) {}
}

/// Tag 8: a data message (downstream here; read and ignored from a client).
public struct DataMessageStanza: MCSPacketMessage {
    public static let tag = MCSTag.dataMessageStanza
    public var id: String?
    public var from: String
    public var to: String?
    public var category: String
    /// The collapse key.
    public var token: String?
    public var appData: [AppData]
    public var fromTrustedServer: Bool?
    public var persistentID: String?
    public var streamID: Int32?
    public var lastStreamIDReceived: Int32?
    public var regID: String?
    public var deviceUserID: Int64?
    /// Seconds.
    public var ttl: Int32?
    public var sent: Int64?
    public var queued: Int32?
    public var status: Int64?
    public var rawData: [UInt8]?
    public var immediateAck: Bool?

    public init(id: String? = nil, from: String, to: String? = nil, category: String, token: String? = nil, appData: [AppData] = [],
                fromTrustedServer: Bool? = nil, persistentID: String? = nil, streamID: Int32? = nil,
                lastStreamIDReceived: Int32? = nil, regID: String? = nil, deviceUserID: Int64? = nil, ttl: Int32? = nil,
                sent: Int64? = nil, queued: Int32? = nil, status: Int64? = nil, rawData: [UInt8]? = nil, immediateAck: Bool? = nil) {
        self.id = id
        self.from = from
        self.to = to
        self.category = category
        self.token = token
        self.appData = appData
        self.fromTrustedServer = fromTrustedServer
        self.persistentID = persistentID
        self.streamID = streamID
        self.lastStreamIDReceived = lastStreamIDReceived
        self.regID = regID
        self.deviceUserID = deviceUserID
        self.ttl = ttl
        self.sent = sent
        self.queued = queued
        self.status = status
        self.rawData = rawData
        self.immediateAck = immediateAck
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var from: String?, category: String?
        var m = DataMessageStanza(from: "", category: "")
        while let f = try r.next() {
            switch f.number {
            case 2: if let v = f.string { m.id = v }
            case 3: if let v = f.string { from = v }
            case 4: if let v = f.string { m.to = v }
            case 5: if let v = f.string { category = v }
            case 6: if let v = f.string { m.token = v }
            case 7: if let v = try r.message(f, as: AppData.self) { m.appData.append(v) }
            case 8: if let v = f.bool { m.fromTrustedServer = v }
            case 9: if let v = f.string { m.persistentID = v }
            case 10: if let v = f.int32 { m.streamID = v }
            case 11: if let v = f.int32 { m.lastStreamIDReceived = v }
            case 13: if let v = f.string { m.regID = v }
            case 16: if let v = f.int64 { m.deviceUserID = v }
            case 17: if let v = f.int32 { m.ttl = v }
            case 18: if let v = f.int64 { m.sent = v }
            case 19: if let v = f.int32 { m.queued = v }
            case 20: if let v = f.int64 { m.status = v }
            case 21: if let v = f.bytes { m.rawData = Array(v) }
            case 24: if let v = f.bool { m.immediateAck = v }
            default: break
            }
        }
        m.from = try required(from, "DataMessageStanza", "from")
        m.category = try required(category, "DataMessageStanza", "category")
        self = m
    }

    public func write(to w: inout ProtoWriter) {
        if let id { w.string(2, id) }
        w.string(3, from)
        if let to { w.string(4, to) }
        w.string(5, category)
        if let token { w.string(6, token) }
        for a in appData { w.message(7, a) }
        if let fromTrustedServer { w.bool(8, fromTrustedServer) }
        if let persistentID { w.string(9, persistentID) }
        if let streamID { w.int32(10, streamID) }
        if let lastStreamIDReceived { w.int32(11, lastStreamIDReceived) }
        if let regID { w.string(13, regID) }
        if let deviceUserID { w.int64(16, deviceUserID) }
        if let ttl { w.int32(17, ttl) }
        if let sent { w.int64(18, sent) }
        if let queued { w.int32(19, queued) }
        if let status { w.int64(20, status) }
        if let rawData { w.bytes(21, rawData) }
        if let immediateAck { w.bool(24, immediateAck) }
    }
}

/// Tag 10: the client reports a stream error before it closes.
public struct StreamErrorStanza: MCSPacketMessage {
    public static let tag = MCSTag.streamErrorStanza
    public var type: String
    public var text: String?

    public init(type: String, text: String? = nil) {
        self.type = type
        self.text = text
    }

    public init(reading r: inout ProtoReader) throws(ProtoError) {
        var type: String?, text: String?
        while let f = try r.next() {
            switch f.number {
            case 1: if let v = f.string { type = v }
            case 2: if let v = f.string { text = v }
            default: break
            }
        }
        self.init(type: try required(type, "StreamErrorStanza", "type"), text: text)
    }

    public func write(to w: inout ProtoWriter) {
        w.string(1, type)
        if let text { w.string(2, text) }
    }
}
