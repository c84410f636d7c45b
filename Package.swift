// swift-tools-version:6.0
import PackageDescription

// Linux only: the code imports Glibc and uses what only Linux has (glibc's adaptive pthread
// mutexes, a condition variable on the monotonic clock, MSG_NOSIGNAL, epoll and eventfd,
// /proc/locks), so there is no `platforms:` line: none but Linux would build.
//
// Dependencies point one way, downward (docs/architecture.md draws the graph, and its table of
// targets is checked against this file by ArchitectureTests):
//
//   fcm-mock ─→ FCMCommand ─→ FCMServer (the assembly) ─→ a room per protocol ─→ RoomKit
//   RoomKit and the rooms ─┬─→ FCMEngine ─→ FCMModel (its values) ─→ FCMStore ─→ CSQLite
//                          │        └──────────┴─────→ FCMCore (FCM's rules: no I/O)
//                          ├─→ HTTPServer, MCSServer ─→ CLinuxEvents, CNGHTTP2, Protobuf, TLS
//                          ├─→ XMPPServer ─→ CExpat, TLS
//                          └─→ TLS ─→ CGnuTLSShim ─→ CGnuTLS, CNettle
//
// and everything but FCMCore stands on Platform (locks, threads, clocks, sockets, files). The
// engine knows no wire and no transport; the protocol servers know nothing of FCM.
// FCMTesting (the server in-process, test clients) sits on FCMServer.

/// Upcoming language features, on every Swift target: imports are internal unless marked
/// `public`, so no module re-exports what it uses and a C type cannot leak into a public API
/// unnoticed; a member is visible only where its module is imported; existential types are
/// spelled `any`.
let houseSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "fcm-mock",
    products: [
        .executable(name: "fcm-mock", targets: ["fcm-mock"]),
        .library(name: "FCMTesting", targets: ["FCMTesting"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CExpat", pkgConfig: "expat",
                       providers: [.apt(["libexpat1-dev"])]),
        .systemLibrary(name: "CGnuTLS", pkgConfig: "gnutls",
                       providers: [.apt(["libgnutls28-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2",
                       providers: [.apt(["libnghttp2-dev"])]),
        // ECDH on P-256 (Web Push), which GnuTLS's public API lacks; GnuTLS itself stands on nettle.
        .systemLibrary(name: "CNettle", pkgConfig: "hogweed",
                       providers: [.apt(["nettle-dev"])]),
        // epoll and eventfd: part of glibc, so no package and nothing to link.
        .systemLibrary(name: "CLinuxEvents"),
        .target(name: "CGnuTLSShim", dependencies: ["CGnuTLS", "CNettle"]),
        .target(name: "Platform", swiftSettings: houseSettings),
        .target(name: "TLS", dependencies: ["CGnuTLS", "CGnuTLSShim", "CNettle", "Platform"], swiftSettings: houseSettings),
        .target(name: "FCMCore", swiftSettings: houseSettings),
        .target(name: "FCMStore", dependencies: ["CSQLite", "Platform"], swiftSettings: houseSettings),
        .target(name: "HTTPServer", dependencies: ["CLinuxEvents", "CNGHTTP2", "Platform", "TLS"], swiftSettings: houseSettings),
        .target(name: "XMPPServer", dependencies: ["CExpat", "Platform", "TLS"], swiftSettings: houseSettings),
        // The protobuf wire format (our own codec, docs/design.md), and Google's MCS ("mtalk")
        // transport on it: TLS, tagged packets, login, stream ids, acks; no FCM.
        .target(name: "Protobuf", swiftSettings: houseSettings),
        .target(name: "MCSServer", dependencies: ["CLinuxEvents", "Platform", "Protobuf", "TLS"], swiftSettings: houseSettings),
        // The values the engine keeps and answers with (projects, devices, credentials, clients,
        // filters, outcomes, refusals): data and pure checks, no state and no I/O.
        .target(name: "FCMModel", dependencies: ["FCMCore", "FCMStore"], swiftSettings: houseSettings),
        .target(name: "FCMEngine", dependencies: ["FCMCore", "FCMModel", "FCMStore", "Platform"], swiftSettings: houseSettings),
        // What every HTTP room shares: the kept form of an exchange, the control API's call and
        // error types, the log.
        .target(name: "RoomKit", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "Platform", "TLS"], swiftSettings: houseSettings),
        // A room per protocol: each owns its wire end to end and talks to the engine through its port.
        .target(name: "FCMLegacy", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "Platform", "RoomKit"], swiftSettings: houseSettings),
        .target(name: "FCMV1", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "Platform", "RoomKit", "TLS"], swiftSettings: houseSettings),
        .target(name: "CCS", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "Platform", "RoomKit", "XMPPServer"], swiftSettings: houseSettings),
        .target(name: "APNs", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "HTTPServer", "Platform", "RoomKit", "TLS"], swiftSettings: houseSettings),
        .target(name: "WebPush", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "Platform", "RoomKit", "TLS"], swiftSettings: houseSettings),
        // Firefox's push service: Mozilla's autopush protocol over WebSocket (docs/real-clients.md).
        .target(name: "Autopush", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "HTTPServer", "RoomKit"], swiftSettings: houseSettings),
        // FCM's device side for Chromium and raw GCM clients: checkin, register3, and delivery over MCS.
        // Firebase's web registration APIs: Installations and FCM registrations.
        .target(name: "FCMRegistrations", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "RoomKit"], swiftSettings: houseSettings),
        .target(name: "GCM", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "HTTPServer", "MCSServer", "Platform", "Protobuf", "RoomKit"], swiftSettings: houseSettings),
        .target(name: "Control", dependencies: ["FCMCore", "FCMEngine", "FCMModel", "FCMStore", "HTTPServer", "Platform", "RoomKit", "TLS"],
                // Built into the binary: the web page's files, as `PackageResources.index_html`, ….
                resources: [.embedInCode("Resources/web")],
                swiftSettings: houseSettings),
        .target(name: "FCMServer", dependencies: ["APNs", "Autopush", "CCS", "FCMRegistrations", "GCM", "MCSServer", "Control", "FCMCore", "FCMEngine", "FCMModel", "FCMLegacy", "FCMStore", "FCMV1",
                                                  "HTTPServer", "Platform", "RoomKit", "TLS", "WebPush", "XMPPServer"],
                // Built into the binary: the default fixture (a link to fixtures/default.json).
                resources: [.embedInCode("Resources/default-fixture.json")],
                swiftSettings: houseSettings),
        .target(name: "FCMTesting", dependencies: ["FCMServer", "FCMEngine", "HTTPServer", "FCMCore", "Platform", "RoomKit", "TLS", "XMPPServer"], swiftSettings: houseSettings),
        .target(name: "FCMCommand", dependencies: ["APNs", "FCMCore", "FCMModel", "FCMServer", "HTTPServer", "Platform", "RoomKit", "TLS"], swiftSettings: houseSettings),
        .executableTarget(name: "fcm-mock", dependencies: ["FCMCommand", "FCMModel", "FCMServer", "Platform", "RoomKit"], swiftSettings: houseSettings),
        .testTarget(name: "FCMCoreTests", dependencies: ["FCMCore"], swiftSettings: houseSettings),
        .testTarget(name: "FCMV1Tests", dependencies: ["FCMCore", "FCMV1"], swiftSettings: houseSettings),
        .testTarget(name: "APNsRoomTests", dependencies: ["APNs", "FCMCore", "FCMModel", "TLS"], swiftSettings: houseSettings),
        .testTarget(name: "WebPushRoomTests", dependencies: ["FCMCore", "TLS", "WebPush"], swiftSettings: houseSettings),
        .testTarget(name: "PlatformTests", dependencies: ["Platform"], swiftSettings: houseSettings),
        .testTarget(name: "TLSTests", dependencies: ["TLS", "Platform", "FCMCore"], swiftSettings: houseSettings),
        .testTarget(name: "FCMStoreTests", dependencies: ["FCMStore"], swiftSettings: houseSettings),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "CNGHTTP2", "FCMTesting", "FCMEngine", "FCMCore", "Platform", "TLS"], swiftSettings: houseSettings),
        .testTarget(name: "XMPPServerTests", dependencies: ["XMPPServer"], swiftSettings: houseSettings),
        .testTarget(name: "ProtobufTests", dependencies: ["Protobuf"], swiftSettings: houseSettings),
        .testTarget(name: "MCSServerTests", dependencies: ["MCSServer", "Platform", "Protobuf", "TLS"], swiftSettings: houseSettings),
        .testTarget(name: "FCMServerTests",
                    dependencies: ["APNs", "CCS", "Control", "FCMTesting", "FCMServer", "FCMEngine", "FCMModel", "FCMCommand", "FCMLegacy", "FCMStore",
                                   "FCMCore", "FCMV1", "GCM", "MCSServer", "Platform", "RoomKit", "TLS", "WebPush", "Protobuf"],
                    swiftSettings: houseSettings),
    ],
    swiftLanguageModes: [.v6]
)
