import FCMCore
@testable import FCMEngine
import FCMServer
import FCMTesting
import Foundation
import Platform
import TLS
import XCTest
import XMPPServer

/// CCS allowed a sender id 1000 connections at once; one more is refused (the limit lowered to 2
/// here, as no flag sets it).
final class XMPPConnectionLimitTests: XCTestCase {
    func testOneConnectionOverTheLimitIsRefused() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppConnectionsPerSender = 2 }
        defer { s.stop() }
        let port = s.app.xmppPort
        let first = try XMPPTestClient(port: port)
        _ = try first.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r1")
        let second = try XMPPTestClient(port: port)
        _ = try second.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r2")
        let third = try XMPPTestClient(port: port)
        // It sends a message with its bind, before it could learn it is refused: not taken.
        let early = #"<message><gcm xmlns="google:mobile:data">{"to":"a1","message_id":"over-limit"}</gcm></message>"#
        _ = try? third.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r3", withBind: early)
        var sawError = false
        while let st = try? third.nextStanza(timeout: 2) {
            if st.localName == "error", st.children.contains(where: { $0.localName == "policy-violation" }) { sawError = true }
        }
        XCTAssertTrue(sawError, "the third connection gets a policy-violation stream error")
        XCTAssertEqual(items(try s.client().get("/api/v1/messages?xmpp_message_id=over-limit")).count, 0)
        // The refused socket leaves the list when its thread has finished with it.
        var open = -1
        let deadline = Date().addingTimeInterval(5)
        repeat {
            open = items(try s.client().get("/api/v1/xmpp/connections")).count
            if open != 2 { usleep(10_000) }
        } while open != 2 && Date() < deadline
        XCTAssertEqual(open, 2)
        // Another sender is not affected; a freed place can be taken again.
        let other = try XMPPTestClient(port: port)
        _ = try other.login(user: "222@fcm.googleapis.com", password: "key-222", resource: "o1")
        first.sendDownstream(#"{"to":"a1","message_id":"still-works"}"#)
        XCTAssertEqual(try first.nextGCM()?["message_type"]?.stringValue, "ack")
        second.drop()
        var reopened: XMPPTestClient?
        for _ in 0..<50 where reopened == nil {
            let c = try XMPPTestClient(port: port)
            if (try? c.login(user: "111@fcm.googleapis.com", password: "key-111", resource: "r4")) != nil,
                (try? c.nextStanza(timeout: 0.2)) == nil
            {
                reopened = c
            } else {
                usleep(20_000)
            }
        }
        XCTAssertNotNil(reopened, "a place freed by a closed connection is taken again")
    }
}

/// SIGTERM ends XMPP streams cleanly.
final class XMPPShutdownTests: XCTestCase {
    func testSIGTERMClosesStreams() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"])
        let c = try XMPPTestClient(port: s.xmppPort)
        try c.login(user: DemoProject.senderID, password: DemoProject.serverKey)
        XCTAssertEqual(s.stop(signal: SIGTERM), 0)
        XCTAssertTrue(c.waitForClose(timeout: 5))
        XCTAssertTrue(String(decoding: c.received, as: UTF8.self).hasSuffix("</stream:stream>"))
    }
}

/// `--xmpp-tls`: TLS from the first byte, with a generated or a given certificate.
final class XMPPTLSTests: XCTestCase {
    func testSelfSignedTLS() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--xmpp-tls", "--log-level", "warning"])
        defer { s.stop() }
        let c = try XMPPTestClient(port: s.xmppPort, tls: true)
        XCTAssertEqual(c.peerCertificateCount, 1)
        XCTAssertEqual(try c.login(user: DemoProject.senderID, password: DemoProject.serverKey), "\(DemoProject.senderID)@gcm.googleapis.com/test")
        c.sendDownstream(#"{"to":"demo-android-1","message_id":"tls-1"}"#)
        XCTAssertEqual(try c.nextGCM()?["message_type"]?.stringValue, "ack")
        XCTAssertEqual(items(try s.client().get("/api/v1/xmpp/connections")).first?["tls"]?.boolValue, true)
        // A plain-text client on the TLS port gets nowhere (its bytes are not a TLS hello).
        let plain = try XMPPTestClient(port: s.xmppPort)
        plain.send(XMPPTestClient.header)
        XCTAssertTrue(plain.waitForClose(timeout: 15))
        // The generated certificate's path is in the log, even at --log-level warning.
        let log = String(decoding: s.takeStderr(waitingFor: "tls.cert="), as: UTF8.self)
        XCTAssertTrue(log.contains("tls.cert=") && log.contains("server.pem"), log)
    }

    func testGivenCertificateAndBadFiles() throws {
        let dir = try temporaryDirectory("tls")
        let made = try TLSCredentials.selfSigned(names: ["localhost"], directory: dir)
        let s = try BinaryServer(arguments: ["--db", ":memory:", "--xmpp-tls", "--tls-cert", made.certificatePath, "--tls-key", made.keyPath])
        defer { s.stop() }
        let c = try XMPPTestClient(port: s.xmppPort, tls: true)
        XCTAssertNoThrow(try c.login(user: DemoProject.senderID, password: DemoProject.serverKey))
        let bad = try runBinary(["serve", "--db", ":memory:", "--http-port", "0", "--xmpp-port", "0", "--xmpp-tls",
                                 "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("TLS"), bad.stderr)
        XCTAssertEqual(try runBinary(["serve", "--tls-cert", made.certificatePath]).status, 2, "a certificate needs its key")
    }
}

/// A client that does not log in is disconnected after the login time-out (lowered to 1 s here,
/// as no flag sets it); a bound connection may stay idle.
final class XMPPLoginTimeoutTests: XCTestCase {
    func testIdleBeforeLoginIsDisconnected() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppLoginTimeout = 1 }
        defer { s.stop() }
        let silent = try XMPPTestClient(port: s.app.xmppPort)
        let halfway = try XMPPTestClient(port: s.app.xmppPort)
        halfway.send(XMPPTestClient.header)
        let bound = try XMPPTestClient(port: s.app.xmppPort)
        _ = try bound.login(user: "111@fcm.googleapis.com", password: "key-111")
        for c in [silent, halfway] {
            XCTAssertTrue(c.waitForClose(timeout: 10))
            XCTAssertTrue(String(decoding: c.received, as: UTF8.self).contains("<connection-timeout xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
        }
        // A deadline, not an idle time: whitespace every 200 ms does not keep a client in.
        let trickle = try XMPPTestClient(port: s.app.xmppPort)
        trickle.send(XMPPTestClient.header)
        var closed = false
        for _ in 0..<50 where !closed {
            usleep(200_000)
            trickle.send(" ")
            closed = trickle.waitForClose(timeout: 0.01)
        }
        XCTAssertTrue(closed, "a client sending whitespace is still disconnected at the deadline")
        bound.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try bound.nextStanza()?.attributes["type"], "result")
    }
}

/// After login a stanza has its own deadline from its first byte (lowered to 1 s here): a byte
/// now and then keeps none open; whitespace between stanzas and an idle stream are not on it.
final class XMPPStanzaTimeoutTests: XCTestCase {
    func testAStanzaThatDoesNotArriveWholeInTimeEndsTheStream() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppStanzaTimeout = 1 }
        defer { s.stop() }
        let slow = try XMPPTestClient(port: s.app.xmppPort)
        _ = try slow.login(user: "111@fcm.googleapis.com", password: "key-111")
        let idle = try XMPPTestClient(port: s.app.xmppPort)
        _ = try idle.login(user: "111@fcm.googleapis.com", password: "key-111")
        slow.send(#"<message id="z"><gcm xmlns="google:mobile:data">"#)
        var closed = false
        let started = Date()
        for _ in 0..<40 where !closed {
            usleep(100_000)
            slow.send(" ")
            idle.send(" ")  // whitespace between stanzas: a keep-alive, not a stanza
            closed = slow.waitForClose(timeout: 0.01)
        }
        XCTAssertTrue(closed, "still open after 4 s")
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        let said = String(decoding: slow.received, as: UTF8.self)
        XCTAssertTrue(said.contains("<policy-violation xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"), said)
        XCTAssertTrue(said.contains("a stanza must arrive whole within 1 seconds"), said)
        idle.send(#"<iq type="get" id="p"><ping xmlns="urn:xmpp:ping"/></iq>"#)
        XCTAssertEqual(try idle.nextStanza()?.attributes["type"], "result", "the idle stream stays")
    }

    /// A busy client's writes end in the middle of a stanza all the time: each stanza has its
    /// own clock, so one that never pauses is not cut off.
    func testStanzasSplitAcrossWritesForLongerThanTheDeadlineAreFine() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppStanzaTimeout = 1 }
        defer { s.stop() }
        let busy = try XMPPTestClient(port: s.app.xmppPort)
        _ = try busy.login(user: "111@fcm.googleapis.com", password: "key-111")
        let started = Date()
        var i = 0
        busy.send(#"<iq type="get" id="p0">"#)
        while Date().timeIntervalSince(started) < 2.5 {
            usleep(100_000)
            i += 1
            // The end of one ping and the start of the next in one write.
            busy.send(#"<ping xmlns="urn:xmpp:ping"/></iq><iq type="get" id="p\#(i)">"#)
        }
        busy.send(#"<ping xmlns="urn:xmpp:ping"/></iq>"#)
        for n in 0...i {
            XCTAssertEqual(try busy.nextStanza()?.attributes["id"], "p\(n)", "still served after \(n) pings")
        }
    }
}

/// Out of descriptors, the listener waits and goes on accepting (it stopped for good).
final class XMPPDescriptorExhaustionTests: XCTestCase {
    func testListenerSurvivesRunningOutOfDescriptors() throws {
        let s = try BinaryServer(arguments: ["--db", ":memory:"], maxOpenFiles: 64)
        defer { s.stop() }
        var idle: [XMPPTestClient] = []
        for _ in 0..<80 { idle.append(try XMPPTestClient(port: s.xmppPort)) }
        usleep(300_000)
        idle.removeAll()  // closes them
        var ok = false
        for _ in 0..<50 where !ok {
            let c = try XMPPTestClient(port: s.xmppPort)
            if (try? c.login(user: "123456789012@fcm.googleapis.com", password: "AAAAfcmmock:demo-server-key")) != nil { ok = true } else { usleep(100_000) }
        }
        XCTAssertTrue(ok, "a new connection logs in once descriptors are free again")
    }
}

/// Connections open at once are bounded (each holds a thread); one more is refused with a
/// policy-violation stream error, and a freed place is taken again (limit lowered to 3 here).
final class XMPPServerConnectionCapTests: XCTestCase {
    func testOneConnectionOverTheServerLimitIsRefused() throws {
        let s = try TestServer(fixtures: [errorTableFixture]) { $0.xmppMaxConnections = 3 }
        defer { s.stop() }
        let port = s.app.xmppPort
        var open = [try XMPPTestClient(port: port), try XMPPTestClient(port: port)]
        let logged = try XMPPTestClient(port: port)
        _ = try logged.login(user: "111@fcm.googleapis.com", password: "key-111")
        let extra = try XMPPTestClient(port: port)
        XCTAssertTrue(extra.waitForClose())
        XCTAssertTrue(String(decoding: extra.received, as: UTF8.self).contains("<policy-violation xmlns=\"urn:ietf:params:xml:ns:xmpp-streams\"/>"))
        logged.sendDownstream(#"{"to":"a1","message_id":"still-served"}"#)
        XCTAssertEqual(try logged.nextGCM()?["message_id"]?.stringValue, "still-served")
        open[0].drop()
        open.removeFirst()
        var again: XMPPTestClient?
        for _ in 0..<100 where again == nil {
            let c = try XMPPTestClient(port: port)
            if (try? c.login(user: "111@fcm.googleapis.com", password: "key-111")) != nil { again = c } else { usleep(20_000) }
        }
        XCTAssertNotNil(again, "a freed place is taken again")
    }
}
