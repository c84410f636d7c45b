// swift-tools-version:6.0
import PackageDescription

// Dependencies point one way: fcm-mock → FCMServer → {FCMStore, HTTPServer} → FCMCore / C targets.
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
        .target(name: "FCMCore"),
        .target(name: "FCMStore", dependencies: ["CSQLite", "FCMCore"]),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "FCMCore"]),
        .target(name: "XMPPServer", dependencies: ["CExpat", "CGnuTLS", "FCMCore", "HTTPServer"]),
        .target(name: "FCMServer", dependencies: ["FCMCore", "FCMStore", "HTTPServer", "XMPPServer"],
                // Built into the binary: the web page's files and the default fixture (a link to
                // fixtures/default.json), as `PackageResources.index_html`, `.default_fixture_json`, ….
                resources: [.embedInCode("Resources/web"), .embedInCode("Resources/default-fixture.json")]),
        .target(name: "FCMTesting", dependencies: ["FCMServer", "FCMCore", "XMPPServer", "CGnuTLS"]),
        .executableTarget(name: "fcm-mock", dependencies: ["FCMServer"]),
        .testTarget(name: "FCMCoreTests", dependencies: ["FCMCore"]),
        .testTarget(name: "FCMStoreTests", dependencies: ["FCMStore", "FCMCore"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "FCMTesting", "FCMCore"]),
        .testTarget(name: "XMPPServerTests", dependencies: ["XMPPServer"]),
        .testTarget(name: "FCMServerTests", dependencies: ["FCMTesting", "FCMServer", "FCMStore", "FCMCore"]),
    ],
    swiftLanguageModes: [.v6]
)
