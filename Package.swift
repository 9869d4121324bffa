// swift-tools-version:6.1
import PackageDescription

let strictConcurrency: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "pgherald",
    // The daemon is for Linux; HeraldClient and Herald are also meant for apps (Synchronization's Mutex needs these).
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "pgherald", targets: ["pgherald"]),
        .library(name: "Herald", targets: ["Herald"]),
        .library(name: "HeraldPostgres", targets: ["HeraldPostgres"]),
        .library(name: "HeraldClient", targets: ["HeraldClient"]),
        .executable(name: "pgherald-bench", targets: ["HeraldBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.65.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.34.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.38.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // Event model, broker, subscriptions and the change notifier. No I/O.
        .target(
            name: "Herald",
            dependencies: [
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictConcurrency
        ),
        // libpq connection, LISTEN loop with reconnect, installer.
        .target(
            name: "HeraldPostgres",
            dependencies: [
                "CLibPQ",
                "Herald",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // sql/install.sql is the parts joined, for psql; the daemon embeds the parts.
            exclude: ["SQL/examples", "SQL/install.sql"],
            resources: [
                .embedInCode("SQL/install/part01-schema.sql"),
                .embedInCode("SQL/install/part02-settings.sql"),
                .embedInCode("SQL/install/part03-journal.sql"),
                .embedInCode("SQL/install/part04-webhooks.sql"),
                .embedInCode("SQL/install/part05-output-cursors.sql"),
                .embedInCode("SQL/install/part06-row-triggers.sql"),
                .embedInCode("SQL/install/part07-statement-triggers.sql"),
                .embedInCode("SQL/install/part08-attach.sql"),
                .embedInCode("SQL/install/part09-native.sql"),
                .embedInCode("SQL/install/part10-event-trigger.sql"),
                .embedInCode("SQL/install/part11-access.sql"),
                .embedInCode("SQL/uninstall.sql"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Small helpers several modules share: probing a Unix socket, running tasks on a NIO event loop.
        .target(
            name: "HeraldSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The client side of the NATS protocol on SwiftNIO: frames, the connection, JetStream publish acknowledgements.
        .target(
            name: "HeraldNATS",
            dependencies: [
                "HeraldSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Reading settings: the file, PGHERALD_* variables and flags, with where each value came from.
        .target(
            name: "HeraldSettings",
            dependencies: [
                "Herald",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The output contract: how an output is configured, fed (live or from the journal
        // through a cursor of its own), started, reloaded and reported; the registry and metrics.
        .target(
            name: "HeraldOutput",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Webhook endpoints: signing, the retry schedule, durable delivery state in PostgreSQL.
        .target(
            name: "HeraldWebhooks",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Supabase Realtime's postgres_changes protocol: framing, the session state machine,
        // binding filters, change payloads and credentials. No I/O.
        .target(
            name: "HeraldRealtime",
            dependencies: [
                "Herald",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The HTTP transports the socket and the Supabase endpoint share: peer credentials on the Unix
        // socket, the network listener (TLS with a reloadable certificate, HTTP/2 by ALPN, CORS),
        // connection limits, JSON error bodies and event-stream framing.
        .target(
            name: "HeraldHTTP",
            dependencies: [
                "Herald",
                "HeraldSettings",
                "HeraldSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The event log: a durable output writing NDJSON files, and their reader for `tail`.
        .target(
            name: "HeraldEventLog",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The NATS JetStream output: its configuration, subject templates and publishing.
        .target(
            name: "HeraldNATSOutput",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldNATS",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The console: its settings and the page compiled in.
        .target(
            name: "HeraldConsole",
            dependencies: [
                "Herald",
                "HeraldSettings",
                "HeraldRealtime",
                "HeraldHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The cluster: broadcasts and presence shared between members over NATS (the hub, the link),
        // and an edge's feed from a JetStream stream.
        .target(
            name: "HeraldCluster",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldRealtime",
                "HeraldNATS",
                "HeraldNATSOutput",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The service's own parts: logging, stdout, the metrics server and systemd.
        .target(
            name: "HeraldService",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The Supabase Realtime endpoint: WebSocket channels, broadcast and presence on HeraldRealtime's protocol.
        .target(
            name: "HeraldSupabase",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldSupport",
                "HeraldRealtime",
                "HeraldHTTP",
                "HeraldCluster",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The HTTP API: the router on the Unix socket and the network listener, event streams,
        // statistics, the console's routes and live queries.
        .target(
            name: "HeraldAPI",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldSupport",
                "HeraldRealtime",
                "HeraldHTTP",
                "HeraldConsole",
                "HeraldService",
                "HeraldSupabase",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictConcurrency
        ),
        // The daemon's settings: a YAML file, PGHERALD_* variables and flags, checked without connecting.
        .target(
            name: "HeraldConfiguration",
            dependencies: [
                "HeraldPostgres",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldWebhooks",
                "HeraldAPI", "HeraldSupabase", "HeraldCluster", "HeraldEventLog", "HeraldNATSOutput", "HeraldService", "HeraldHTTP", "HeraldConsole",
                "HeraldRealtime",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Swift client for the socket: event streams with reconnect, statistics.
        .target(
            name: "HeraldClient",
            dependencies: [
                "Herald",
                "HeraldSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictConcurrency
        ),
        .executableTarget(
            name: "pgherald",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldService", "HeraldAPI", "HeraldCluster", "HeraldEventLog", "HeraldNATSOutput",
                "HeraldClient",
                "HeraldConfiguration",
                "HeraldSettings",
                "HeraldOutput",
                "HeraldWebhooks",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictConcurrency
        ),
        // What the examples share: reaching the daemon on its socket or over HTTPS with a token.
        .target(
            name: "ExampleSupport",
            dependencies: [
                "HeraldClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Shared",
            swiftSettings: strictConcurrency
        ),
        // The seed app's "enrolments by course" screen on a live query (docs/live-queries.md).
        .executableTarget(
            name: "EnrolmentsByCourse",
            dependencies: [
                "HeraldClient",
                "ExampleSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/EnrolmentsByCourse",
            exclude: ["pgherald.yaml"],
            swiftSettings: strictConcurrency
        ),
        // A detail view that follows its parent: a plant species and its seedlings.
        .executableTarget(
            name: "PlantSpecies",
            dependencies: [
                "HeraldClient",
                "ExampleSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/PlantSpecies",
            exclude: ["pgherald.yaml", "plants.sql"],
            swiftSettings: strictConcurrency
        ),
        // Rows with their associations in one live query: reminder lists and their reminders.
        .executableTarget(
            name: "RemindersLists",
            dependencies: [
                "HeraldClient",
                "ExampleSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/RemindersLists",
            exclude: ["pgherald.yaml", "reminders.sql"],
            swiftSettings: strictConcurrency
        ),
        // Load client and report for scripts/bench: many SSE streams on a few NIO threads.
        .executableTarget(
            name: "HeraldBench",
            dependencies: [
                "HeraldPostgres",
                "HeraldRealtime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldTests",
            dependencies: [
                "Herald", "HeraldPostgres", "HeraldAPI", "HeraldSupabase", "HeraldCluster", "HeraldEventLog", "HeraldNATSOutput", "HeraldService", "HeraldHTTP", "HeraldConsole", "HeraldClient", "HeraldConfiguration", "HeraldWebhooks", "HeraldRealtime",
                "HeraldSettings", "HeraldOutput", "HeraldNATS", "pgherald",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictConcurrency
        ),
        // Unit tests of the modules that have their own; the rest are in HeraldTests.
        .testTarget(
            name: "HeraldClusterTests",
            dependencies: ["Herald", "HeraldCluster", "HeraldNATSOutput", "HeraldRealtime"],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldEventLogTests",
            dependencies: ["HeraldEventLog"],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldHTTPTests",
            dependencies: [
                "HeraldHTTP",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldServiceTests",
            dependencies: [
                "Herald",
                "HeraldService",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldBenchTests",
            dependencies: [
                "HeraldBench",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictConcurrency
        ),
        .testTarget(
            name: "HeraldIntegrationTests",
            dependencies: [
                "Herald",
                "HeraldPostgres",
                "HeraldAPI", "HeraldSupabase", "HeraldCluster", "HeraldEventLog", "HeraldNATSOutput", "HeraldService", "HeraldHTTP", "HeraldConsole",
                "HeraldClient",
                "HeraldWebhooks",
                "HeraldRealtime",
                "HeraldOutput",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: strictConcurrency
        ),
    ]
)
