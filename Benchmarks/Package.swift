// swift-tools-version:6.1
// Micro-benchmarks of pgherald's hot path, kept out of the main package so
// that its build stays lean. Run from this directory:
//   swift package benchmark
import PackageDescription

let package = Package(
    name: "pgherald-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "pgherald", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "HeraldMicro",
            dependencies: [
                .product(name: "Herald", package: "pgherald"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/HeraldMicro",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
