// swift-tools-version:6.0
import PackageDescription

// Dependencies point one way: fcm-mock → FCMServer → {FCMStore, HTTPServer, XMPPServer} → FCMCore
// (FCMStore) / Platform (locks, threads, clocks, sockets, files) / C targets.
let package = Package(
    name: "fcm-mock",
    platforms: [.macOS(.v15)],
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
        .target(name: "CGnuTLSShim", dependencies: ["CGnuTLS"]),
        .target(name: "Platform"),
        .target(name: "TLS", dependencies: ["CGnuTLS", "CGnuTLSShim", "Platform"]),
        .target(name: "FCMCore"),
        .target(name: "FCMStore", dependencies: ["CSQLite", "FCMCore", "Platform"]),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "Platform"]),
        .target(name: "XMPPServer", dependencies: ["CExpat", "Platform", "TLS"]),
        .target(name: "FCMServer", dependencies: ["FCMCore", "FCMStore", "HTTPServer", "Platform", "TLS", "XMPPServer"]),
        .target(name: "FCMTesting", dependencies: ["FCMServer", "FCMCore", "Platform", "TLS", "XMPPServer"]),
        .executableTarget(name: "fcm-mock", dependencies: ["FCMServer", "Platform"]),
        .testTarget(name: "FCMCoreTests", dependencies: ["FCMCore"]),
        .testTarget(name: "PlatformTests", dependencies: ["Platform"]),
        .testTarget(name: "TLSTests", dependencies: ["TLS", "Platform"]),
        .testTarget(name: "FCMStoreTests", dependencies: ["FCMStore", "FCMCore"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "FCMTesting", "FCMCore", "Platform"]),
        .testTarget(name: "XMPPServerTests", dependencies: ["XMPPServer"]),
        .testTarget(name: "FCMServerTests",
                    dependencies: ["FCMTesting", "FCMServer", "FCMStore", "FCMCore", "Platform", "TLS"]),
    ],
    swiftLanguageModes: [.v6]
)
