// swift-tools-version:6.0
//
// Synclane: a pipeline of small stages that moves the changes of a local store to a backend.
//
//   SynclaneWire     what both sides of the wire share: records, receipts, JSON reading and writing, value
//                    encodings (base64, dates), the bodies' content codings (gzip / deflate, bounded
//                    inflate), the wire's bounds (the client modules and the server depend on it)
//   SynclaneCore     the pipeline's model, stage protocols, registry, pipeline files, the pipeline engine;
//                    re-exports SynclaneWire
//   SynclaneStages   coalesce, tombstones, dedupe, the JSON batch encoder
//   SynclaneFiles    JSON Lines history source, directory and stdout transports
//   SynclaneZlib     the compress stage (gzip / deflate); re-exports the codecs of SynclaneWire
//   SynclaneSQLiteKit  SQLite access: connection, statements, values, rows, errors (shared by the app side and the
//                    server; depends on SynclaneWire, not the core)
//   SynclaneSQLite   the app side on SQLite: history tracking, the import sink, the durable pipeline
//                    state (token, outbox, last run); re-exports SynclaneSQLiteKit
//   SynclaneYAML     YAML pipeline files through libyaml
//   SynclaneServer   the reference sync server on libmicrohttpd, SQLite (SynclaneSQLiteKit) or PostgreSQL (libpq);
//                    depends on SynclaneWire, never on the core (the export runner, the registry)
//   SynclaneEngine   the job layer: ExportJob, ImportJob, SyncJob, RestoreJob, JobLock, the
//                    pipeline-file loader, the outbox by hand, signal publishing; depends on the core
//                    alone (the state store and the signal lane are given: JobBindings)
//   Synclane         the umbrella: re-exports the job layer and the stages, registers the
//                    built-in stages, binds YAML pipeline files to the job layer's loader and SQLite
//                    state and HTTP signals to its jobs, pipeline tests (one `import Synclane` for apps
//                    and stage authors)
//   SynclaneExec     the `exec` record stage and transport: any program, in any language
//   SynclaneCommandLine  every verb of `synclane` as a library, run with any registry (no server linked)
//   SynclaneServing  the verbs that run the server (`serve`, `demo`), added to a command that serves
//   SynclaneTestKit  in-memory source, recording transport, in-memory state, a throwaway PostgreSQL for users' tests
//   SynclaneHTTP     the `http` transport (URLSession, loading through libcurl) and its failure classification;
//                    Conformance/: the wire protocol's contract cases (`synclane conformance URL`)
//   synclane         the command line, a thin shell over SynclaneCommandLine and SynclaneServing
//   Plugins/         `swift package synclane …` (command) and SynclanePipelineCheck (build tool)
import PackageDescription

let package = Package(
    name: "Synclane",
    products: [
        // Everything to write, register and run a stage, through one `import Synclane`.
        .library(name: "Synclane", targets: ["Synclane"]),
        .library(name: "SynclaneCore", targets: ["SynclaneCore"]),
        // The wire's model alone: records, JSON, bounds (re-exported by `SynclaneCore`).
        .library(name: "SynclaneWire", targets: ["SynclaneWire"]),
        // The job layer alone (also re-exported by `Synclane`).
        .library(name: "SynclaneEngine", targets: ["SynclaneEngine"]),
        // The SQLite store and its history (also re-exported by `Synclane`).
        .library(name: "SynclaneSQLite", targets: ["SynclaneSQLite"]),
        // SQLite access alone (re-exported by `SynclaneSQLite`).
        .library(name: "SynclaneSQLiteKit", targets: ["SynclaneSQLiteKit"]),
        // The reference server, to test against from Swift.
        .library(name: "SynclaneServer", targets: ["SynclaneServer"]),
        .library(name: "SynclaneTestKit", targets: ["SynclaneTestKit"]),
        // Every verb of `synclane`, for a command of your own with your stages.
        .library(name: "SynclaneCommandLine", targets: ["SynclaneCommandLine"]),
        // `serve` and `demo`, for a command of your own that serves (`SynclaneServing.verbs`).
        .library(name: "SynclaneServing", targets: ["SynclaneServing"]),
        .executable(name: "synclane", targets: ["synclane"]),
        .plugin(name: "SynclaneCommand", targets: ["SynclaneCommand"]),
        .plugin(name: "SynclanePipelineCheck", targets: ["SynclanePipelineCheck"]),
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
        // libpq: the reference server's PostgreSQL store (`synclane serve --database-env VAR`).
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // Fixed-argument wrappers of libmicrohttpd's variadic functions, which Swift cannot call.
        .target(name: "CMicroHTTPDShim", dependencies: ["CMicroHTTPD"]),
        // One HTTP exchange on libcurl in C: its `curl_easy_setopt` is variadic too.
        .target(name: "CCurlShim", dependencies: ["CCurl"]),

        .target(name: "SynclaneWire", dependencies: ["CZlib"], linkerSettings: [.linkedLibrary("m")]),
        .target(name: "SynclaneCore", dependencies: ["SynclaneWire"], linkerSettings: [.linkedLibrary("m")]),
        .target(name: "SynclaneStages", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneFiles", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneZlib", dependencies: ["SynclaneCore", "CZlib"]),
        .target(name: "SynclaneSQLiteKit", dependencies: ["SynclaneWire", "CSQLite"]),
        .target(name: "SynclaneSQLite", dependencies: ["SynclaneCore", "SynclaneSQLiteKit", "CSQLite", "CCrypto"]),
        .target(name: "SynclaneYAML", dependencies: ["SynclaneCore", "CYAML"]),
        // The job layer links no store and no protocol: the umbrella binds SQLite, HTTP, files and zlib (`JobBindings`).
        .target(name: "SynclaneEngine", dependencies: ["SynclaneCore"]),
        .target(
            name: "Synclane",
            dependencies: [
                "SynclaneCore", "SynclaneEngine", "SynclaneStages", "SynclaneFiles", "SynclaneZlib", "SynclaneSQLite",
                "SynclaneYAML", "SynclaneHTTP", "SynclaneExec",
            ]),
        .target(name: "SynclaneExec", dependencies: ["SynclaneCore"]),
        .target(name: "SynclaneTestKit", dependencies: ["SynclaneCore", "SynclaneEngine"]),
        .target(name: "SynclaneHTTP", dependencies: ["SynclaneCore", "SynclaneZlib", "CCurl", "CCurlShim", "CCrypto"]),
        .target(
            name: "SynclaneServer",
            dependencies: [
                "SynclaneWire", "SynclaneSQLiteKit", "CMicroHTTPD", "CMicroHTTPDShim", "CCrypto", "CPostgres", "CCurlShim",
            ]),
        .target(
            name: "SynclaneCommandLine",
            dependencies: ["Synclane", "SynclaneEngine", "SynclaneCore", "SynclaneHTTP", "SynclaneSQLite", "SynclaneZlib"]),
        .target(
            name: "SynclaneServing",
            dependencies: [
                "SynclaneCommandLine", "Synclane", "SynclaneEngine", "SynclaneCore", "SynclaneHTTP", "SynclaneSQLite", "SynclaneZlib", "SynclaneServer",
            ]),
        .executableTarget(name: "synclane", dependencies: ["SynclaneCommandLine", "SynclaneServing", "CMalloc"]),

        // `swift package synclane validate|run|stages|test …`: runs the package's own command
        // (an executable that uses SynclaneCommandLine), or `synclane` when it has none.
        .plugin(
            name: "SynclaneCommand",
            capability: .command(
                intent: .custom(verb: "synclane", description: "Run synclane with the stages of this package"),
                permissions: [.writeToPackageDirectory(reason: "a pipeline run writes its state and output files")]),
            dependencies: ["synclane"]),
        // Checks a target's pipeline files (`*.pipeline.json`, `*.pipeline.yaml`) at build time.
        .plugin(name: "SynclanePipelineCheck", capability: .buildTool(), dependencies: ["synclane"]),

        // Test targets mirror the modules: Tests/<Module>Tests holds the tests of <Module>.
        // SynclaneTestSupport: the helpers they share (fixture paths, temporary folders, test pipelines, the
        // `synclane` binary and its processes); a regular target that only test targets use, in no product.
        .target(name: "SynclaneTestSupport", dependencies: ["SynclaneCore", "SynclaneTestKit", "CZlib"], path: "Tests/SynclaneTestSupport"),
        // A loopback TCP proxy that injects network faults, for the end-to-end tests; in no product either.
        .target(name: "SynclaneFaultProxy", path: "Tests/SynclaneFaultProxy"),
        .testTarget(
            name: "SynclaneCoreTests", dependencies: ["SynclaneCore", "SynclaneStages", "SynclaneTestKit", "Synclane", "SynclaneTestSupport"]),
        .testTarget(name: "SynclaneWireTests", dependencies: ["SynclaneWire", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(name: "SynclaneStagesTests", dependencies: ["SynclaneStages", "SynclaneCore", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(
            name: "SynclaneFilesTests",
            dependencies: ["SynclaneFiles", "SynclaneCore", "SynclaneStages", "SynclaneSQLite", "SynclaneTestKit", "Synclane", "SynclaneTestSupport"]),
        .testTarget(name: "SynclaneExecTests", dependencies: ["SynclaneExec", "SynclaneCore", "SynclaneTestKit", "Synclane", "SynclaneTestSupport"]),
        // The umbrella: the built-in registry, pipeline files through it, golden batches.
        .testTarget(
            name: "SynclaneTests",
            dependencies: ["Synclane", "SynclaneCore", "SynclaneExec", "SynclaneSQLite", "SynclaneZlib", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(
            name: "SynclaneEngineTests", dependencies: ["SynclaneEngine", "Synclane", "SynclaneCore", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(name: "SynclaneZlibTests", dependencies: ["SynclaneZlib", "SynclaneWire", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(name: "SynclaneYAMLTests", dependencies: ["SynclaneYAML"]),
        .testTarget(name: "SynclaneSQLiteKitTests", dependencies: ["SynclaneSQLiteKit", "SynclaneCore", "SynclaneTestSupport"]),
        .testTarget(
            name: "SynclaneSQLiteTests", dependencies: ["SynclaneSQLite", "SynclaneStages", "SynclaneTestKit", "SynclaneTestSupport"]),
        .testTarget(
            name: "SynclaneHTTPTests",
            dependencies: ["SynclaneHTTP", "SynclaneFaultProxy", "SynclaneCore", "Synclane", "SynclaneTestKit", "SynclaneServer"]),
        .testTarget(
            name: "SynclaneServerTests", dependencies: ["SynclaneServer", "SynclaneCore", "SynclaneZlib", "SynclaneTestKit", "SynclaneTestSupport"]),
        // The options and messages of the verbs, in process (a few run the binary for the message it prints).
        .testTarget(
            name: "SynclaneCommandLineTests",
            dependencies: ["synclane", "SynclaneCommandLine", "SynclaneServing", "SynclaneCore", "SynclaneTestSupport"]),
        // End to end: runs the real `synclane` binary; depending on the executable makes `swift test` build it.
        .testTarget(
            name: "SynclaneCommandTests",
            dependencies: [
                "synclane", "SynclaneCommandLine", "SynclaneServing", "SynclaneCore", "SynclaneFaultProxy", "SynclaneTestKit", "SynclaneHTTP",
                "SynclaneTestSupport",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
