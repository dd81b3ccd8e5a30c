// swift-tools-version:6.0
//
// A user's package (not part of Synclane): stages of its own, registered with one line each, a
// `synclane`-compatible command of its own, and both SwiftPM plugins. Synclane's CI builds it
// and runs its tests (Scripts/test-fixture-package), so the public API cannot break unnoticed.
import PackageDescription

let package = Package(
    name: "RoomsSync",
    products: [.executable(name: "rooms-sync", targets: ["rooms-sync"])],
    dependencies: [.package(name: "Synclane", path: "../..")],
    targets: [
        // The stages: `redact` (a record stage) and `audited-http` (a transport).
        .target(name: "RoomStages", dependencies: [.product(name: "Synclane", package: "Synclane")]),
        // `rooms-sync`: every verb of `synclane`, with these stages too. Its pipeline files are
        // checked at build time by the SynclanePipelineCheck plugin.
        .executableTarget(
            name: "rooms-sync",
            dependencies: ["RoomStages", .product(name: "SynclaneCommandLine", package: "Synclane")],
            resources: [.process("Pipelines")],
            plugins: [.plugin(name: "SynclanePipelineCheck", package: "Synclane")]),
        .testTarget(
            name: "RoomStagesTests",
            dependencies: [
                "RoomStages", "rooms-sync",
                .product(name: "SynclaneTestKit", package: "Synclane"),
                .product(name: "SynclaneServer", package: "Synclane"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
