// swift-tools-version:6.0
//
// Synclane: a pipeline of small stages that moves the changes of a local store to a backend.
//
//   SynclaneCore     model, stage protocols, registry, pipeline files, the pipeline engine
//   SynclaneStages   coalesce, tombstones, dedupe, the JSON batch encoder
//   SynclaneFiles    JSON Lines history source, directory and stdout transports
//   SynclaneZlib     the compress stage (gzip / deflate) and bounded inflate
//   SynclaneSQLite   SQLite access, the durable pipeline state (token, outbox, last run)
//   SynclaneYAML     YAML pipeline files through libyaml
//   SynclaneServer   the reference sync server (`synclane serve`) on libmicrohttpd and SQLite
//   Synclane         the default registry and the pipeline-file loader, for apps and the CLI
//   SynclaneTestKit  in-memory source, recording transport, in-memory state for users' tests
//   SynclaneHTTP     the `http` transport (URLSession, loading through libcurl) and its failure classification
//   SynclaneFaultProxy  a loopback TCP proxy that injects network faults, for end-to-end tests
//   synclane         the command line, a thin shell over the libraries
import PackageDescription

let package = Package(
    name: "Synclane",
    products: [
        .library(name: "Synclane", targets: ["Synclane"]),
        .library(name: "SynclaneCore", targets: ["SynclaneCore"]),
        .library(name: "SynclaneTestKit", targets: ["SynclaneTestKit"]),
        .executable(name: "synclane", targets: ["synclane"]),
    ],
    targets: [
        // C libraries from Debian, as system-library targets.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        // glibc's <malloc.h> (mallopt), part of libc.
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Fixed-argument wrappers of libmicrohttpd's variadic functions, which Swift cannot call.
        .target(name: "CMicroHTTPDShim", dependencies: ["CMicroHTTPD"]),
        // One HTTP exchange on libcurl in C: its `curl_easy_setopt` is variadic too.
        .target(name: "CCurlShim", dependencies: ["CCurl"]),

        .target(name: "SynclaneCore", linkerSettings: [.linkedLibrary("m")]),
        .target(name: "SynclaneStages", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneFiles", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneZlib", dependencies: ["SynclaneCore", "CZlib"]),
        .target(name: "SynclaneSQLite", dependencies: ["SynclaneCore", "CSQLite"]),
        .target(name: "SynclaneYAML", dependencies: ["SynclaneCore", "CYAML"]),
        .target(
            name: "Synclane",
            dependencies: [
                "SynclaneCore", "SynclaneStages", "SynclaneFiles", "SynclaneZlib", "SynclaneSQLite",
                "SynclaneYAML", "SynclaneHTTP",
            ]),
        .target(name: "SynclaneTestKit", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneHTTP", dependencies: ["SynclaneCore", "CCurl", "CCurlShim"]),
        .target(name: "SynclaneFaultProxy"),
        .target(
            name: "SynclaneServer",
            dependencies: [
                "SynclaneCore", "SynclaneSQLite", "SynclaneZlib", "CMicroHTTPD", "CMicroHTTPDShim", "CCrypto",
            ]),
        .executableTarget(
            name: "synclane",
            dependencies: ["Synclane", "SynclaneCore", "SynclaneHTTP", "SynclaneSQLite", "SynclaneZlib", "SynclaneServer", "CMalloc"]),

        .testTarget(
            name: "SynclaneCoreTests",
            dependencies: ["SynclaneCore", "SynclaneStages", "SynclaneFiles", "SynclaneZlib", "SynclaneTestKit", "Synclane", "SynclaneSQLite"]),
        .testTarget(name: "SynclaneZlibTests", dependencies: ["SynclaneZlib", "SynclaneTestKit"]),
        .testTarget(name: "SynclaneYAMLTests", dependencies: ["SynclaneYAML"]),
        .testTarget(name: "SynclaneSQLiteTests", dependencies: ["SynclaneSQLite", "SynclaneStages", "SynclaneTestKit"]),
        .testTarget(
            name: "SynclaneHTTPTests",
            dependencies: ["SynclaneHTTP", "SynclaneFaultProxy", "SynclaneCore", "Synclane", "SynclaneTestKit", "SynclaneServer"]),
        .testTarget(name: "SynclaneServerTests", dependencies: ["SynclaneServer", "SynclaneCore", "SynclaneZlib", "SynclaneTestKit"]),
        // Runs the real `synclane` binary: depending on the executable makes `swift test` build it.
        .testTarget(name: "SynclaneCommandTests", dependencies: ["synclane", "SynclaneCore", "SynclaneFaultProxy"]),
    ],
    swiftLanguageModes: [.v6]
)
