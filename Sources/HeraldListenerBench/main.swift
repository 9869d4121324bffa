// Measures the listener path: one transaction sends N notifications shaped
// like pgherald events, and we time how fast they come out of the broker to a
// subscriber. For comparison, a bare libpq loop drains the same burst without
// decoding: that is the most one connection can deliver.
//
// Usage: HeraldListenerBench CONNINFO [EVENTS]   (scripts/bench-listener runs it)

#if canImport(Glibc)
import Glibc
#endif
import Herald
import HeraldPostgres
import Logging

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: HeraldListenerBench CONNINFO [EVENTS]")
    exit(2)
}
let connectionString: ConnectionString
do {
    connectionString = try ConnectionString(arguments[1])
} catch {
    print("HeraldListenerBench: \(error)")
    exit(2)
}
let eventCount = arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000

/// Sends the burst from a separate connection in one transaction.
func sendBurst() throws {
    let sender = try PostgresConnection.connect(connectionString)
    try sender.execute("""
        SELECT count(pg_notify('pgherald', json_build_object(
            'id', g::text, 'op', 'UPDATE', 'schema', 'public', 'table', 'course',
            'pk', json_build_object('id', g),
            'new', json_build_object('id', g, 'short_code', 'ICS3U', 'name', 'Introduction to Computer Science'),
            'old', json_build_object('id', g, 'short_code', 'ICS3U', 'name', 'Intro to CS'),
            'txid', '1', 'at', '2026-11-21T12:00:00.000000Z')::text))
          FROM generate_series(1, \(eventCount)) AS g
        """)
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

struct Measurement {
    var seconds: Double
    var cpu: Double
    var rate: Double { Double(eventCount) / seconds }
}

/// pgherald's path: libpq → decode → broker (stamp, encode once) → subscriber.
func measureListener() async throws -> Measurement {
    var logger = Logger(label: "database")
    logger.logLevel = .warning
    let broker = Broker(configuration: .init(mailboxCapacity: eventCount))
    let subscription = broker.subscribe()
    let listener = PostgresListener(configuration: .init(connection: connectionString), broker: broker, logger: logger)
    let running = Task { try await listener.run() }
    guard await listener.waitUntilListening() else { throw PostgresError(.connectionFailed, "listener did not start") }

    let cpuBefore = cpuSeconds()
    let started = ContinuousClock.now
    try sendBurst()
    var received = 0
    while received < eventCount {
        received += try await subscription.nextBatch(limit: 65_536).count
    }
    let elapsed = ContinuousClock.now - started
    let measurement = Measurement(seconds: elapsed.seconds, cpu: cpuSeconds() - cpuBefore)
    listener.stop()
    try await running.value
    return measurement
}

/// A bare libpq loop that only counts notifications.
func measureBareLibpq() throws -> Measurement {
    let connection = try PostgresConnection.connect(connectionString)
    try connection.execute("LISTEN pgherald")
    let cpuBefore = cpuSeconds()
    let started = ContinuousClock.now
    try sendBurst()
    var received = 0
    while received < eventCount {
        try connection.receiveNotifications { _, _, _ in received += 1 }
    }
    return Measurement(seconds: (ContinuousClock.now - started).seconds, cpu: cpuSeconds() - cpuBefore)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

func report(_ name: String, _ measurement: Measurement) {
    print(
        "\(name): \(eventCount) events in \(format3(measurement.seconds)) s = \(Int(measurement.rate)) events/s, "
            + "\(format3(measurement.cpu * 1e6 / Double(eventCount))) µs CPU per event"
    )
}

func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return String(scaled)
}

do {
    let bare = try measureBareLibpq()
    report("bare libpq LISTEN", bare)
    let herald = try await measureListener()
    report("pgherald listener", herald)
    print("ratio pgherald / bare libpq: \(format3(herald.rate / bare.rate))")
} catch {
    print("HeraldListenerBench: \(error)")
    exit(1)
}
