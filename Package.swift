// swift-tools-version:6.0
import PackageDescription

// Linux only: the code imports Glibc and uses what only Linux has (glibc's adaptive pthread
// mutexes, a condition variable on the monotonic clock, MSG_NOSIGNAL, libmicrohttpd's epoll
// loop, /proc/locks), so there is no `platforms:` line: none but Linux would build.
//
// Dependencies point one way, downward:
//
//   fcm-mock ─→ FCMServer ─┬─→ FCMStore ──→ CSQLite
//                          ├─→ HTTPServer ─→ CMicroHTTPD, CNGHTTP2 (HTTP/2), TLS (the HTTPS port)
//                          ├─→ XMPPServer ─→ CExpat, TLS
//                          └─→ FCMCore (FCM's rules: standard library only, no I/O)
//   TLS ─→ CGnuTLSShim (certificate building, C) ─→ CGnuTLS
//
// and FCMStore, HTTPServer, XMPPServer, TLS, FCMServer and fcm-mock all stand on Platform
// (locks, threads, clocks, sockets, files: the operating system, nothing of FCM). The protocol
// servers know nothing of FCM: they depend on Platform and their C libraries, not on FCMCore.
// FCMTesting (test clients, the out-of-process test server) sits on FCMServer.

/// Upcoming language features for the layers that wrap C: imports are internal unless marked
/// `public`, so a C type cannot leak into their public API unnoticed; a member is visible only
/// where its module is imported; existential types are spelled `any`.
let wrapperSettings: [SwiftSetting] = [
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
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CExpat", pkgConfig: "expat",
                       providers: [.apt(["libexpat1-dev"])]),
        .systemLibrary(name: "CGnuTLS", pkgConfig: "gnutls",
                       providers: [.apt(["libgnutls28-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2",
                       providers: [.apt(["libnghttp2-dev"])]),
        // epoll and eventfd: part of glibc, so no package and nothing to link.
        .systemLibrary(name: "CLinuxEvents"),
        .target(name: "CGnuTLSShim", dependencies: ["CGnuTLS"]),
        .target(name: "Platform", swiftSettings: wrapperSettings),
        .target(name: "TLS", dependencies: ["CGnuTLS", "CGnuTLSShim", "Platform"], swiftSettings: wrapperSettings),
        .target(name: "FCMCore"),
        .target(name: "FCMStore", dependencies: ["CSQLite", "Platform"]),
        .target(name: "HTTPServer", dependencies: ["CLinuxEvents", "CMicroHTTPD", "CNGHTTP2", "Platform", "TLS"]),
        .target(name: "XMPPServer", dependencies: ["CExpat", "Platform", "TLS"]),
        .target(name: "FCMEngine", dependencies: ["FCMCore", "FCMStore", "Platform"]),
        .target(name: "FCMServer", dependencies: ["FCMCore", "FCMEngine", "FCMStore", "HTTPServer", "Platform", "TLS", "XMPPServer"],
                // Built into the binary: the web page's files and the default fixture (a link to
                // fixtures/default.json), as `PackageResources.index_html`, `.default_fixture_json`, ….
                resources: [.embedInCode("Resources/web"), .embedInCode("Resources/default-fixture.json")]),
        .target(name: "FCMTesting", dependencies: ["FCMServer", "FCMEngine", "HTTPServer", "FCMCore", "Platform", "TLS", "XMPPServer"]),
        .executableTarget(name: "fcm-mock", dependencies: ["FCMServer", "Platform"]),
        .testTarget(name: "FCMCoreTests", dependencies: ["FCMCore"]),
        .testTarget(name: "PlatformTests", dependencies: ["Platform"]),
        .testTarget(name: "TLSTests", dependencies: ["TLS", "Platform", "FCMCore"]),
        .testTarget(name: "FCMStoreTests", dependencies: ["FCMStore"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "CNGHTTP2", "FCMTesting", "FCMEngine", "FCMCore", "Platform", "TLS"]),
        .testTarget(name: "XMPPServerTests", dependencies: ["XMPPServer"]),
        .testTarget(name: "FCMServerTests",
                    dependencies: ["FCMTesting", "FCMServer", "FCMEngine", "FCMStore", "FCMCore", "Platform", "TLS"]),
    ],
    swiftLanguageModes: [.v6]
)
