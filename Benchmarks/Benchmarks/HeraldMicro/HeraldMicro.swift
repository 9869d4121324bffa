import Benchmark
import Herald

/// A trigger payload as pgherald's durable trigger sends it: a row of about 100 bytes.
let payload = #"{"id" : "1042", "op" : "INSERT", "schema" : "public", "table" : "enrols_in", "pk" : {"id":1042}, "new" : {"id":1042,"student_id":7,"course_id":11,"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, "old" : null, "txid" : "7791", "at" : "2026-11-21T12:00:00.123456Z"}"#

let metrics: [BenchmarkMetric] = [.wallClock, .cpuTotal, .mallocCountTotal, .throughput]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: metrics, maxDuration: .seconds(2))

    Benchmark("Decode a trigger payload") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Event(payload: payload))
        }
    }

    Benchmark("Encode an event as JSON") { benchmark in
        let event = try Event(payload: payload)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(event.jsonBytes)
        }
    }

    let filter = try! FilterQuery.parse([
        (name: "table", value: "enrols_in"), (name: "op", value: "INSERT,UPDATE"), (name: "where", value: "course_id.eq.11"),
    ])
    Benchmark("Match a table, op and column filter") { benchmark in
        let event = try Event(payload: payload)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(filter.matches(event))
        }
    }

    for subscribers in [1, 100, 1000] {
        // One iteration publishes one event and every subscriber takes it: the
        // broker's whole share of a delivery. Allocations per iteration are
        // allocations per event.
        Benchmark("Broker fan-out to \(subscribers) subscribers") { benchmark in
            let broker = Broker()
            let subscriptions = (0..<subscribers).map { _ in broker.subscribe() }
            let event = try Event(payload: payload)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                broker.publish(event)
                for subscription in subscriptions {
                    blackHole(try await subscription.nextBatch())
                }
            }
            benchmark.stopMeasurement()
            withExtendedLifetime(subscriptions) {}
        }
    }
}
