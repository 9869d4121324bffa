package import HeraldNATS

/// A NATS client of the daemon could not start: nothing listens at any
/// server of the setting that lists them (see ``NATSFirstRound``).
package struct NATSStartFailure: Error, CustomStringConvertible {
    /// The setting that lists the servers: `nats.servers`, `cluster.nats`.
    var key: String
    /// Whose connection it was: `the NATS output`, `the edge`, `the cluster`.
    var client: String
    /// Each server's refusal, in the order they were tried.
    var refusals: [NATSError]

    package init(key: String, client: String, refusals: [NATSError]) {
        self.key = key
        self.client = client
        self.refusals = refusals
    }

    package var description: String {
        "\(key): no NATS server takes \(client)'s connection (\(refusals.map(\.message).joined(separator: "; "))); start NATS, or correct \(key)"
    }
}
