package import Herald

/// Which NATS server a client tries next, and how long it waits first: each
/// server in turn, with backoff that starts again after a connection that
/// made progress (published, received or read something).
package struct NATSServerRotation {
    let servers: [NATSOutputConfiguration.Server]
    let backoff: BackoffPolicy
    /// Connections in a row that made no progress, the one that just ended included.
    package private(set) var attempt = 0
    private var index = 0

    package init(servers: [NATSOutputConfiguration.Server], backoff: BackoffPolicy) {
        precondition(!servers.isEmpty, "the configuration always names a server")
        self.servers = servers
        self.backoff = backoff
    }

    package var current: NATSOutputConfiguration.Server { servers[index % servers.count] }

    /// The connection to ``current`` ended; moves to the next server and returns the wait before it.
    package mutating func ended(afterProgress: Bool, random: Double = .random(in: 0..<1)) -> Duration {
        attempt = afterProgress ? 1 : attempt + 1
        index += 1
        return backoff.delay(beforeAttempt: attempt, random: random)
    }
}
